package relay_test

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/outbox-operator/outbox-operator/internal/relayworker/publish"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/relay"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/store"
	"github.com/outbox-operator/outbox-operator/internal/testenv/relaytest"
)

// gate blocks publishes until opened, ignoring the context (a zombie that keeps
// sending after its lease, e.g. after a GC pause or SIGSTOP).
type gate struct {
	inner   relay.Publisher
	entered chan struct{}
	open    chan struct{}
	once    sync.Once
	hold    atomic.Bool
}

func (g *gate) Publish(ctx context.Context, msgs []kafka.Message) []publish.Result {
	if g.hold.Load() {
		g.once.Do(func() { close(g.entered) })
		<-g.open
		ctx = context.Background() // the zombie publishes anyway
	}
	return g.inner.Publish(ctx, msgs)
}

// Pitfall: zombie fencing. A worker whose lease expired mid-publish is taken over; its
// late marks change 0 rows and cannot overwrite the new owner's SENT.
func TestZombieCannotOverwriteNewOwner(t *testing.T) {
	dsn, db := relaytest.NewDB(t)
	tp := topic(t)
	relaytest.Insert(t, db, relaytest.Ev{ID: "z", AggID: "a", Version: 1, Topic: tp})
	g := &gate{entered: make(chan struct{}), open: make(chan struct{})}
	g.hold.Store(true)
	zombie := newWorker(t, dsn, db, "zombie", opts{lease: time.Second, poll: time.Hour, noListen: true,
		pub: func(p relay.Publisher) relay.Publisher { g.inner = p; return g }}).start(t)
	<-g.entered
	var zombieToken string
	_ = db.QueryRow(`SELECT owner_token FROM outbox_event`).Scan(&zombieToken)
	// The lease runs out on the DB clock; a second worker takes over and sends.
	healthy := newWorker(t, dsn, db, "healthy", opts{lease: 30 * time.Second, poll: 100 * time.Millisecond}).start(t)
	waitStatus(t, db, "SENT", 1, 15*time.Second)
	var owner string
	_ = db.QueryRow(`SELECT owner_token FROM outbox_event`).Scan(&owner)
	if owner == zombieToken {
		t.Fatal("take-over did not change the owner token")
	}
	if testutilCounter(healthy.m, "outbox_lease_expired_total") != 1 {
		t.Fatal("take-over not counted in outbox_lease_expired_total")
	}
	// The zombie wakes up and publishes (a duplicate), then tries to mark.
	close(g.open)
	relaytest.Eventually(t, 10*time.Second, "zombie mark fenced", func() bool {
		return testutilCounter(zombie.m, "outbox_mark_fenced_total") >= 1
	})
	var st, owner2 string
	_ = db.QueryRow(`SELECT status, owner_token FROM outbox_event`).Scan(&st, &owner2)
	if st != "SENT" || owner2 != owner {
		t.Fatalf("zombie overwrote the row: %s %s", st, owner2)
	}
}

// deadlineSpy records the publish context's deadline.
type deadlineSpy struct {
	inner    relay.Publisher
	mu       sync.Mutex
	deadline time.Time
	had      bool
}

func (d *deadlineSpy) Publish(ctx context.Context, msgs []kafka.Message) []publish.Result {
	d.mu.Lock()
	d.deadline, d.had = ctx.Deadline()
	d.mu.Unlock()
	return d.inner.Publish(ctx, msgs)
}

// Pitfall: a worker must stop publishing before its lease ends. The publish context
// carries a deadline before lease end.
func TestPublishBoundedByLease(t *testing.T) {
	dsn, db := relaytest.NewDB(t)
	tp := topic(t)
	relaytest.Insert(t, db, relaytest.Many("e", tp, 5)...)
	spy := &deadlineSpy{}
	before := time.Now()
	newWorker(t, dsn, db, "w", opts{lease: 4 * time.Second, pub: func(p relay.Publisher) relay.Publisher { spy.inner = p; return spy }}).start(t)
	waitStatus(t, db, "SENT", 5, 10*time.Second)
	spy.mu.Lock()
	defer spy.mu.Unlock()
	if !spy.had {
		t.Fatal("publish has no deadline: a paused worker could publish long after its lease")
	}
	if spy.deadline.After(before.Add(4 * time.Second)) {
		t.Fatalf("publish deadline %s after lease end", spy.deadline.Sub(before))
	}
}

// Pitfall: a timeout after send is an unknown outcome: RETRY (duplicate allowed and
// counted), never DEAD. The broker stores the batch but answers after the deadline.
func TestTimeoutAfterSendIsUnknownOutcomeNotDead(t *testing.T) {
	dsn, db := relaytest.NewDB(t)
	tp := topic(t)
	relaytest.Insert(t, db, relaytest.Ev{ID: "slow", AggID: "a", Version: 1, Topic: tp})
	var slowed atomic.Bool
	broker.Cluster.ControlKey(0, func(req kmsg.Request) (kmsg.Response, error, bool) {
		pr := req.(*kmsg.ProduceRequest)
		if len(pr.Topics) == 0 || pr.Topics[0].Topic != tp || !slowed.CompareAndSwap(false, true) {
			broker.Cluster.KeepControl()
			return nil, nil, false
		}
		broker.Cluster.SleepControl(func() { time.Sleep(2500 * time.Millisecond) })
		broker.Cluster.DropControl()
		return nil, nil, false // now store it and answer, too late for the worker
	})
	w := newWorker(t, dsn, db, "w", opts{lease: 2 * time.Second, minBackoff: 200 * time.Millisecond}).start(t)
	relaytest.Eventually(t, 10*time.Second, "RETRY with unknown outcome", func() bool {
		var code sql.NullString
		_ = db.QueryRow(`SELECT last_error_code FROM outbox_event WHERE status IN ('RETRY','SENT') AND retry_count >= 1`).Scan(&code)
		return code.String == publish.CodeSendTimeoutUnknown || code.Valid == false && relaytest.CountStatus(t, db)["SENT"] == 1
	})
	waitStatus(t, db, "SENT", 1, 15*time.Second)
	if relaytest.CountStatus(t, db)["DEAD"] != 0 {
		t.Fatal("timeout made the event DEAD")
	}
	if testutilCounter(w.m, "outbox_send_unknown_total") < 1 {
		t.Fatal("unknown outcome not counted")
	}
	relaytest.Eventually(t, 10*time.Second, "duplicate stored", func() bool { return broker.Count(tp) == 2 })
}

// Pitfall: lost NOTIFY. Polling alone delivers everything, and a dropped LISTEN
// connection does not stop delivery.
func TestLostNotifyPollingSafetyNet(t *testing.T) {
	dsn, db := relaytest.NewDB(t)
	tp := topic(t)
	newWorker(t, dsn, db, "w", opts{poll: 200 * time.Millisecond}).start(t)
	// Kill the LISTEN connection: notifications sent meanwhile are lost.
	relaytest.Eventually(t, 10*time.Second, "listener connected", func() bool {
		var n int
		_ = db.QueryRow(`SELECT count(*) FROM pg_stat_activity WHERE query ILIKE 'listen%'`).Scan(&n)
		return n == 1
	})
	if _, err := db.Exec(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query ILIKE 'listen%'`); err != nil {
		t.Fatal(err)
	}
	relaytest.Insert(t, db, relaytest.Many("e", tp, 20)...) // plain SQL: no NOTIFY at all
	waitStatus(t, db, "SENT", 20, 10*time.Second)
}

// NOTIFY wakes the worker long before its (here: 1h) poll interval.
func TestNotifyWakesWorker(t *testing.T) {
	dsn, db := relaytest.NewDB(t)
	tp := topic(t)
	newWorker(t, dsn, db, "w", opts{poll: time.Hour, lease: 2 * time.Hour}).start(t)
	relaytest.Eventually(t, 10*time.Second, "listener connected", func() bool {
		var n int
		_ = db.QueryRow(`SELECT count(*) FROM pg_stat_activity WHERE query ILIKE 'listen%'`).Scan(&n)
		return n == 1
	})
	time.Sleep(100 * time.Millisecond) // let the first (empty) poll pass
	tx, _ := db.Begin()
	if _, err := tx.Exec(`INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, destination, message_key, payload) VALUES ('n', 'o', 'a', 1, 't', $1, 'a', '{}')`, tp); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`SELECT pg_notify('outbox_event', '')`); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, db, "SENT", 1, 10*time.Second)
}

// Pitfall: hot standby. The relay refuses to start on a standby, and stops claiming
// (not ready) when the server turns into one. (The probe is injected: a real
// streaming standby is not started in unit tests.)
func TestHotStandbyRefused(t *testing.T) {
	dsn, db := relaytest.NewDB(t)
	tp := topic(t)
	standby := func(context.Context) (bool, error) { return false, nil }
	w := newWorker(t, dsn, db, "w", opts{probe: standby})
	if err := w.r.Run(context.Background()); !errors.Is(err, store.ErrHotStandby) {
		t.Fatalf("Run on a standby returned %v", err)
	}
	relaytest.Insert(t, db, relaytest.Many("e", tp, 3)...)
	if c := relaytest.CountStatus(t, db); c["PENDING"] != 3 {
		t.Fatalf("standby worker touched rows: %v", c)
	}
}

// Pitfall: DB-clock leases. Leases are set and compared with now() on the database;
// the worker never sends timestamps, so a worker clock an hour off changes nothing.
// (Checked in the store tests too; here end to end with take-over.)
func TestLeaseTakeOverUsesDatabaseClock(t *testing.T) {
	dsn, db := relaytest.NewDB(t)
	tp := topic(t)
	relaytest.Insert(t, db, relaytest.Ev{ID: "x", AggID: "a", Version: 1, Topic: tp})
	// A crashed worker left the row SENDING with a lease that ended 1s ago (DB clock).
	if _, err := db.Exec(`UPDATE outbox_event SET status='SENDING', owner_token='dead/1', lease_until=now()-interval '1s', next_retry_at=now()-interval '1s'`); err != nil {
		t.Fatal(err)
	}
	w := newWorker(t, dsn, db, "w", opts{}).start(t)
	waitStatus(t, db, "SENT", 1, 10*time.Second)
	if testutilCounter(w.m, "outbox_lease_expired_total") != 1 {
		t.Fatal("expired lease not counted")
	}
	// And a lease still running on the DB clock is not taken.
	relaytest.Insert(t, db, relaytest.Ev{ID: "y", AggID: "b", Version: 1, Topic: tp})
	if _, err := db.Exec(`UPDATE outbox_event SET status='SENDING', owner_token='alive/1', lease_until=now()+interval '1h', next_retry_at=now()+interval '1h' WHERE event_id='y'`); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	var owner string
	_ = db.QueryRow(`SELECT owner_token FROM outbox_event WHERE event_id='y'`).Scan(&owner)
	if owner != "alive/1" {
		t.Fatal("a live lease was taken over")
	}
}

// Metrics are exposed with the names docs/worker-contract.md ("Endpoints") lists, and
// without event ids as labels.
func TestMetricsNamesAndLabels(t *testing.T) {
	dsn, db := relaytest.NewDB(t)
	tp := topic(t)
	relaytest.Insert(t, db, relaytest.Many("e", tp, 3)...)
	w := newWorker(t, dsn, db, "w", opts{}).start(t)
	waitStatus(t, db, "SENT", 3, 10*time.Second)
	relaytest.Eventually(t, 5*time.Second, "gauges refreshed", func() bool {
		return testutilCounter(w.m, "outbox_pending_count") == 0 && testutilCounter(w.m, "outbox_send_success_total") == 3
	})
	mfs, _ := w.m.Registry.Gather()
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "pipeline", "destination", "code", "stage":
				default:
					if mf.GetName()[:6] == "outbox" {
						t.Errorf("%s has unexpected label %s", mf.GetName(), l.GetName())
					}
				}
			}
		}
	}
	for _, n := range []string{"outbox_pending_count", "outbox_oldest_pending_age_seconds", "outbox_claim_latency_seconds", "outbox_send_success_total"} {
		if !names[n] {
			t.Errorf("metric %s missing", n)
		}
	}
	if ok, _ := w.h.Ready(); !ok {
		t.Error("not ready while relaying")
	}
}
