package relay_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/outbox-operator/outbox-operator/internal/relayworker/publish"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/relay"
	"github.com/outbox-operator/outbox-operator/internal/testenv/relaytest"
)

// afterPublish runs hook once, right after the first publish returned.
type afterPublish struct {
	inner relay.Publisher
	once  sync.Once
	hook  func()
}

func (a *afterPublish) Publish(ctx context.Context, msgs []kafka.Message) []publish.Result {
	res := a.inner.Publish(ctx, msgs)
	a.once.Do(a.hook)
	return res
}

// Marks are written in the background while the next batch is claimed; Run must
// still mark every published batch before it returns, or a clean shutdown would
// leave published rows SENDING until their lease ran out (and re-send them).
func TestRunMarksTheLastBatchBeforeReturning(t *testing.T) {
	dsn, db := relaytest.NewDB(t)
	tp := topic(t)
	relaytest.Insert(t, db, relaytest.Many("m", tp, 40)...)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ap := &afterPublish{hook: cancel} // SIGTERM lands between publish and mark
	w := newWorker(t, dsn, db, "w", opts{batch: 40, lease: time.Minute, noListen: true,
		pub: func(p relay.Publisher) relay.Publisher { ap.inner = p; return ap }})
	if err := w.r.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if c := relaytest.CountStatus(t, db); c["SENT"] != 40 {
		t.Fatalf("when Run returned: %v; want all 40 SENT", c)
	}
}

// While draining, the next batch is claimed during the current publish. On shutdown
// that batch was never published: Run hands it back instead of leaving it SENDING
// until its lease runs out.
func TestRunReleasesTheBatchClaimedAhead(t *testing.T) {
	dsn, db := relaytest.NewDB(t)
	tp := topic(t)
	relaytest.Insert(t, db, relaytest.Many("a", tp, 30)...)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ap := &afterPublish{hook: cancel}
	w := newWorker(t, dsn, db, "w", opts{batch: 10, lease: time.Minute, noListen: true,
		pub: func(p relay.Publisher) relay.Publisher { ap.inner = p; return ap }})
	if err := w.r.Run(ctx); err != nil {
		t.Fatal(err)
	}
	c := relaytest.CountStatus(t, db)
	if c["SENT"] != 10 || c["PENDING"] != 20 {
		t.Fatalf("when Run returned: %v; want the first batch SENT and the rest PENDING", c)
	}
	if got := testutilCounter(w.m, "outbox_lease_released_total"); got != 10 {
		t.Fatalf("released %v rows; want the 10 claimed ahead", got)
	}
}
