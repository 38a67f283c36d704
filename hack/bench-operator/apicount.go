// apicount.go: API requests as the kube-apiserver counts them (apiserver_request_total
// on its /metrics, by verb and resource), the benchmark's own requests counted on its
// side so they can be subtracted, and the requests of the manager's user alone as API
// Priority and Fairness dispatched them (the flow schema its ServiceAccount falls in).

package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/rest"
)

// managerFlowSchema is the APF flow schema of ServiceAccounts outside kube-system: of
// everything this benchmark runs, only the manager's user is in it.
const managerFlowSchema = "service-accounts"

// requestKey names a kind of request: the API server's verb and the resource (with
// its subresource), or "" for non-resource URLs such as /metrics.
type requestKey struct{ verb, resource string }

func (k requestKey) String() string {
	switch {
	case k.resource == "":
		return k.verb + " (non-resource)"
	case k.byAPIServer():
		return k.verb + " " + k.resource + " (by the API server, for new Services)"
	}
	return k.verb + " " + k.resource
}

// byAPIServer reports requests the API server makes itself on behalf of another:
// allocating a new Service's ClusterIP creates an IPAddress object.
func (k requestKey) byAPIServer() bool { return k.resource == "ipaddresses" }

// write reports whether the verb changes something.
func (k requestKey) write() bool {
	if k.byAPIServer() {
		return false
	}
	switch k.verb {
	case "POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION":
		return true
	}
	return false
}

// read reports whether the verb reads (CONNECT and the like are neither).
func (k requestKey) read() bool {
	if k.byAPIServer() {
		return false
	}
	switch k.verb {
	case "GET", "LIST", "WATCH", "WATCHLIST":
		return true
	}
	return false
}

// counts are requests by kind.
type counts map[requestKey]float64

func (c counts) minus(o counts) counts {
	out := counts{}
	for k, v := range c {
		out[k] = v - o[k]
	}
	for k, v := range o {
		if _, ok := c[k]; !ok {
			out[k] = -v
		}
	}
	return out
}

func (c counts) scaled(f float64) counts {
	out := counts{}
	for k, v := range c {
		out[k] = v * f
	}
	return out
}

// sum adds up the requests whose key passes keep.
func (c counts) sum(keep func(requestKey) bool) float64 {
	t := 0.0
	for k, v := range c {
		if keep(k) {
			t += v
		}
	}
	return t
}

func isWrite(k requestKey) bool { return k.write() }
func isRead(k requestKey) bool  { return k.read() }

// sorted lists the kinds by count, largest first, leaving out |v| < min.
func (c counts) sorted(min float64) []requestKey {
	var ks []requestKey
	for k, v := range c {
		if v >= min || v <= -min {
			ks = append(ks, k)
		}
	}
	sort.Slice(ks, func(i, j int) bool {
		if c[ks[i]] != c[ks[j]] {
			return c[ks[i]] > c[ks[j]]
		}
		return ks[i].String() < ks[j].String()
	})
	return ks
}

// apiSnapshot is one scrape of the kube-apiserver's counters.
type apiSnapshot struct {
	at       time.Time
	requests counts
	// managerAPF is the requests APF dispatched for managerFlowSchema (-1 without APF).
	managerAPF float64
}

// scrapeAPI reads the kube-apiserver's /metrics with the admin client.
func (c *cluster) scrapeAPI(ctx context.Context) (apiSnapshot, error) {
	fams, err := scrape(ctx, c.adminCfg)
	if err != nil {
		return apiSnapshot{}, err
	}
	s := apiSnapshot{at: time.Now(), requests: counts{}, managerAPF: -1}
	for _, m := range fams["apiserver_request_total"].GetMetric() {
		l := labels(m)
		if l["component"] != "" && l["component"] != "apiserver" {
			continue // the aggregator's view of the same requests
		}
		// A non-resource URL (/metrics, /openapi/v3) has its path in subresource.
		res := l["resource"]
		if res != "" && l["subresource"] != "" {
			res += "/" + l["subresource"]
		}
		s.requests[requestKey{l["verb"], res}] += m.GetCounter().GetValue()
	}
	if f, ok := fams["apiserver_flowcontrol_dispatched_requests_total"]; ok {
		s.managerAPF = 0
		for _, m := range f.GetMetric() {
			if labels(m)["flow_schema"] == managerFlowSchema {
				s.managerAPF += m.GetCounter().GetValue()
			}
		}
	}
	return s, nil
}

func scrape(ctx context.Context, cfg *rest.Config) (map[string]*dto.MetricFamily, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	return scrapeURL(ctx, hc, strings.TrimSuffix(cfg.Host, "/")+"/metrics")
}

func scrapeURL(ctx context.Context, hc *http.Client, url string) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("scrape %s: %s: %s", url, resp.Status, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", url, err)
	}
	return fams, nil
}

func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, lp := range m.GetLabel() {
		out[lp.GetName()] = lp.GetValue()
	}
	return out
}

// requestCounter counts the benchmark's own requests as the API server names them.
type requestCounter struct {
	mu sync.Mutex
	n  counts
}

func newRequestCounter() *requestCounter { return &requestCounter{n: counts{}} }

func (rc *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		rc.mu.Lock()
		rc.n[keyOfRequest(r)]++
		rc.mu.Unlock()
		return rt.RoundTrip(r)
	})
}

func (rc *requestCounter) snapshot() counts {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.n.scaled(1)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// keyOfRequest maps an HTTP request to the API server's verb and resource:
// /api/v1/namespaces/{ns}/{resource}[/{name}[/{sub}]], /apis/{group}/{version}/...
func keyOfRequest(r *http.Request) requestKey {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	var rest []string
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		rest = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		rest = parts[3:]
	default:
		return requestKey{r.Method, ""}
	}
	if len(rest) >= 2 && rest[0] == "namespaces" && len(rest) > 2 {
		rest = rest[2:]
	}
	if len(rest) == 0 {
		return requestKey{r.Method, ""}
	}
	res, named := rest[0], len(rest) >= 2
	if len(rest) >= 3 {
		res += "/" + rest[2]
	}
	return requestKey{verbOf(r, named), res}
}

func verbOf(r *http.Request, named bool) string {
	switch {
	case r.Method == http.MethodGet && r.URL.Query().Get("watch") == "true":
		return "WATCH"
	case r.Method == http.MethodGet && !named:
		return "LIST"
	case r.Method == http.MethodPatch && r.Header.Get("Content-Type") == "application/apply-patch+yaml":
		return "APPLY"
	case r.Method == http.MethodDelete && !named:
		return "DELETECOLLECTION"
	}
	return r.Method
}
