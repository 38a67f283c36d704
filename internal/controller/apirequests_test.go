package controller

import (
	"net/http"
	"strings"
	"sync"
)

// apiRequests counts the requests the suite's manager sends to the real API server
// (its rest.Config's transport is wrapped in suite_test.go), so a spec can say how
// many reads of a kind the production wiring makes, not what a fake saw.
var apiRequests = &requestCounter{}

type requestCounter struct {
	mu   sync.Mutex
	seen []string // "METHOD /path?query"
}

func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		c.mu.Lock()
		c.seen = append(c.seen, req.Method+" "+req.URL.RequestURI())
		c.mu.Unlock()
		return rt.RoundTrip(req)
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// count is how many requests so far start with prefix ("GET /api/v1/namespaces/x/secrets/").
func (c *requestCounter) count(prefix string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, s := range c.seen {
		if strings.HasPrefix(s, prefix) {
			n++
		}
	}
	return n
}

// secretGets counts the manager's single-Secret GETs in namespace ns (not the
// metadata informer's cluster-wide list and watch).
func secretGets(ns string) func() int {
	return func() int { return apiRequests.count("GET /api/v1/namespaces/" + ns + "/secrets/") }
}
