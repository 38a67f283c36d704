package fault

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/outbox-operator/outbox-operator/internal/testenv/relaytest"
)

// holdFirstProduce holds the first Produce request for topic inside the broker until
// release is closed (held is closed when it arrives); every other request passes.
// The control is dropped at test end.
func holdFirstProduce(t *testing.T, topic string) (held <-chan struct{}, release func()) {
	h, r := make(chan struct{}), make(chan struct{})
	var first, releaseOnce sync.Once
	var finished atomic.Bool
	broker.Cluster.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if finished.Load() {
			broker.Cluster.DropControl()
			return nil, nil, false
		}
		broker.Cluster.KeepControl()
		pr := req.(*kmsg.ProduceRequest)
		for _, pt := range pr.Topics {
			if pt.Topic == topic {
				hold := false
				first.Do(func() { hold = true })
				if hold {
					close(h)
					broker.Cluster.SleepControl(func() { <-r })
				}
				break
			}
		}
		return nil, nil, false
	})
	release = func() { releaseOnce.Do(func() { close(r) }) }
	t.Cleanup(func() { finished.Store(true); release() })
	return h, release
}

// processState is the state letter of /proc/<pid>/stat ("T" when stopped).
func processState(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2 : i+3]
	}
	return ""
}

// Worker A claims a batch and its produce request is held in the broker; A is then
// SIGSTOPped (a GC pause, a frozen VM) beyond its lease. Worker B takes the expired
// rows over, publishes and marks them SENT. The broker then lets A's old request
// through and A continues: its late mark is fenced by the owner token and changes no
// row, every event is delivered, and the duplicates are at most A's batch.
func TestSIGSTOPPastLeaseIsFenced(t *testing.T) {
	dsn, db := relaytest.NewDB(t)
	tp := newTopic(t, "sigstop")
	const n = 100
	relaytest.Insert(t, db, relaytest.Many(tp, tp, n)...)
	held, release := holdFirstProduce(t, tp)

	a := startWorker(t, "sigstop-A", dsn, "--lease=3s", "--batch-size=500")
	select {
	case <-held:
	case <-time.After(20 * time.Second):
		t.Fatalf("worker A never published; stderr:\n%s", a.Stderr())
	}
	if err := a.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	relaytest.Eventually(t, 5*time.Second, "worker A stopped", func() bool { return processState(a.Cmd.Process.Pid) == "T" })
	byA := `SELECT count(*) FROM public.outbox_event WHERE status = 'SENDING' AND owner_token LIKE 'sigstop-A/%'`
	if got := mustCount(t, db, byA); got != n {
		t.Fatalf("%d rows SENDING under A's token, want the whole batch of %d", got, n)
	}
	relaytest.Eventually(t, 10*time.Second, "A's lease expired (database clock)", func() bool {
		return mustCount(t, db, byA+` AND lease_until < now()`) == n
	})

	b := startWorker(t, "sigstop-B", dsn, "--lease=2s")
	byB := `SELECT count(*) FROM public.outbox_event WHERE status = 'SENT' AND owner_token LIKE 'sigstop-B/%'`
	relaytest.Eventually(t, 20*time.Second, "B took the rows over and marked them SENT", func() bool { return mustCount(t, db, byB) == n })
	relaytest.Eventually(t, 10*time.Second, "B counted the take-over", func() bool { return b.metric("outbox_lease_expired_total") == n })

	// The broker answers A's old request (stored late: duplicates), then A wakes up
	// with its publish deadline long gone and marks what it believes it sent.
	release()
	if err := a.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	relaytest.Eventually(t, 20*time.Second, "A's late marks fenced", func() bool { return a.metric("outbox_mark_fenced_total") == n })
	if got := mustCount(t, db, byB); got != n {
		t.Fatalf("after A's late marks only %d rows are SENT under B's token, want %d (A overwrote B)", got, n)
	}
	// Which mark A wrote depends on what it sees first on waking: the expired publish
	// deadline (unknown outcome for the whole batch: a release, and A pauses for the
	// brokers) or the broker's late answer (a SENT mark). Both are fenced alike.
	path := "SENT"
	if a.metric("outbox_send_unknown_total") > 0 {
		path = "release (unknown outcome)"
	}
	d := verifyDelivery(t, db, tp)
	t.Logf("events %d, records %d, duplicates %d; A's late %s marks fenced: %d", d.events, d.records, d.duplicates, path, n)
	if d.duplicates > n {
		t.Errorf("%d duplicates, more than A's batch of %d", d.duplicates, n)
	}
	checkSurvived(t, 2, a, b)
	a.Stop(t)
	b.Stop(t)
}
