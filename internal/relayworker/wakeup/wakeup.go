// Package wakeup is a relay worker's LISTEN on its table's channel, shared by both
// relay loops: a NOTIFY (the outbox package, or migrate's --notify-trigger) ends the
// loop's idle wait early. Losing the connection or a notification only costs latency:
// polling still finds every event.
package wakeup

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	"github.com/lib/pq"

	"github.com/outbox-operator/outbox-operator/internal/relayworker/metrics"
)

// Listen calls wake with the payload of every notification on channel until ctx
// ends. On reconnect it calls wake("") once, since notifications sent while
// disconnected are gone. Connection problems count
// outbox_relay_errors_total{stage="listen"}. ready, if not nil, is called once the
// first LISTEN was acknowledged by the server (or failed): from then on nothing sent
// on channel is missed while the connection lasts.
func Listen(ctx context.Context, dsn, channel string, m *metrics.Metrics, log logr.Logger, wake func(payload string), ready func()) {
	l := pq.NewListener(dsn, 100*time.Millisecond, 10*time.Second, func(ev pq.ListenerEventType, err error) {
		switch ev {
		case pq.ListenerEventConnectionAttemptFailed, pq.ListenerEventDisconnected:
			m.Errors.WithLabelValues("listen").Inc()
			if err != nil {
				log.V(1).Info("LISTEN connection problem; polling continues", "error", err.Error())
			}
		case pq.ListenerEventReconnected:
			wake("")
		}
	})
	defer l.Close()
	if err := l.Listen(channel); err != nil {
		m.Errors.WithLabelValues("listen").Inc()
		log.Error(err, "LISTEN failed; relying on polling")
	}
	if ready != nil {
		ready()
	}
	for {
		select {
		case <-ctx.Done():
			return
		case n := <-l.Notify:
			payload := ""
			if n != nil { // nil: pq's own note of a reconnect, reported above
				payload = n.Extra
			}
			wake(payload)
		}
	}
}
