package cli

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/relayworker/config"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/health"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/metrics"
)

// serveEndpoints serves /metrics, /healthz and /readyz, and pprof when asked for; an
// empty address turns its endpoint off. stop shuts the servers down (two seconds each).
func serveEndpoints(cfg *config.Relay, m *metrics.Metrics, h *health.State) (stop func(), err error) {
	var servers []*http.Server
	stop = func() {
		for _, s := range servers {
			c, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_ = s.Shutdown(c)
			cancel()
		}
	}
	for _, ep := range []struct {
		addr string
		h    func() http.Handler
		what string
	}{
		{cfg.MetricsAddr, func() http.Handler { return withPath("/metrics", m.Handler()) }, "metrics"},
		{cfg.HealthAddr, h.Handler, "health"},
		{cfg.PprofAddr, pprofHandler, "pprof"}, // built only when asked for: it switches block/mutex sampling on
	} {
		if ep.addr == "" {
			continue
		}
		ln, err := net.Listen("tcp", ep.addr)
		if err != nil {
			stop()
			return nil, fmt.Errorf("%s endpoint %s: %w", ep.what, ep.addr, err)
		}
		srv := &http.Server{Handler: ep.h(), ReadHeaderTimeout: 5 * time.Second}
		servers = append(servers, srv)
		go func() { _ = srv.Serve(ln) }()
	}
	return stop, nil
}

func withPath(p string, h http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle(p, h)
	return mux
}
