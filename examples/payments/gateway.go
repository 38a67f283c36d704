package payments

import (
	"context"
	"errors"
	"sort"
	"sync"
)

// SMSGateway is the external SMS provider. Send must treat idempotencyKey as the
// provider's idempotency key: a second call with a key that was sent already sends
// nothing and succeeds.
type SMSGateway interface {
	Send(ctx context.Context, idempotencyKey, phone, text string) error
}

// FakeGateway stands in for the SMS provider: it keeps in memory what a real one
// would report per idempotency key, and can be made flaky.
type FakeGateway struct {
	// FailEvery makes every n-th call fail (0: never), alternating the two ways a
	// real provider fails: a 503 before sending, and a timeout after sending (the SMS
	// went out, the answer was lost). The second is why the key matters: the retry
	// must not send again.
	FailEvery int

	mu    sync.Mutex
	n     int
	fails int
	keys  map[string]*KeyRecord
}

// KeyRecord is what the gateway saw for one idempotency key.
type KeyRecord struct {
	Calls    int // every call
	Failures int // calls answered with an error
	Accepted int // calls answered with success (a repeat of a sent key included)
	Sent     int // SMS actually sent: 0 or 1, the provider dedupes by key
}

var (
	errGatewayUnavailable = errors.New("sms gateway: 503 service unavailable (injected)")
	errGatewayTimeout     = errors.New("sms gateway: timeout waiting for the answer (injected)")
)

// Send records the call and sends at most one SMS per key. The phone number and the
// text are not kept: the record is by key only.
func (g *FakeGateway) Send(_ context.Context, key, _, _ string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.keys == nil {
		g.keys = map[string]*KeyRecord{}
	}
	r := g.keys[key]
	if r == nil {
		r = &KeyRecord{}
		g.keys[key] = r
	}
	g.n++
	r.Calls++
	if g.FailEvery > 0 && g.n%g.FailEvery == 0 {
		r.Failures++
		g.fails++
		if g.fails%2 == 1 {
			return errGatewayUnavailable
		}
		r.Sent = 1 // sent, but the caller never hears of it
		return errGatewayTimeout
	}
	r.Accepted++
	r.Sent = 1
	return nil
}

// Record returns what the gateway saw for key.
func (g *FakeGateway) Record(key string) KeyRecord {
	g.mu.Lock()
	defer g.mu.Unlock()
	if r := g.keys[key]; r != nil {
		return *r
	}
	return KeyRecord{}
}

// SentFor is the provider's delivery report: how many SMS went out for key.
func (g *FakeGateway) SentFor(key string) int { return g.Record(key).Sent }

// Keys lists every key the gateway was called with, sorted.
func (g *FakeGateway) Keys() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]string, 0, len(g.keys))
	for k := range g.keys {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
