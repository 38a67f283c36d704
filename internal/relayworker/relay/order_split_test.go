package relay_test

import (
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/outbox-operator/outbox-operator/internal/testenv/relaytest"
)

// Several versions of one aggregate whose bytes exceed one produce request: if the
// first request fails and a later one succeeds, a newer version would reach Kafka
// before the retried older one. The publisher sends a topic's share of a batch in
// sequential chunks that kafka-go never splits further, and stops at the first
// failed chunk, so the partition still sees every version in order.
func TestLargeVersionsFailingMidBatchKeepOrder(t *testing.T) {
	dsn, db := relaytest.NewDB(t)
	tp := fmt.Sprintf("split%d", topicSeq.Add(1))
	// One partition and a broker limit far above kafka-go's 4 MiB batch, so nothing
	// but the relay's own chunking keeps the writes apart.
	maxBytes := strconv.Itoa(64 << 20)
	if err := broker.Cluster.CreateTopic(tp, 1, map[string]string{"max.message.bytes": maxBytes}); err != nil {
		t.Fatal(err)
	}
	const versions = 6
	pad := strings.Repeat("x", 900<<10) // 6 x 900 KiB: over 4 MiB in one claim
	var evs []relaytest.Ev
	for v := 1; v <= versions; v++ {
		evs = append(evs, relaytest.Ev{ID: fmt.Sprintf("big-v%d", v), AggID: "big", Version: int64(v), Topic: tp,
			Payload: `{"pad":"` + pad + `"}`})
	}
	relaytest.Insert(t, db, evs...)

	// The first produce request for the topic fails with an error kafka-go does not
	// retry internally and the relay treats as transient; later ones pass.
	var produces atomic.Int64
	broker.Cluster.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		pr := req.(*kmsg.ProduceRequest)
		if len(pr.Topics) == 0 || pr.Topics[0].Topic != tp {
			broker.Cluster.KeepControl()
			return nil, nil, false
		}
		if produces.Add(1) > 1 {
			broker.Cluster.DropControl()
			return nil, nil, false
		}
		broker.Cluster.KeepControl()
		return kfakeProduceError(tp, 44)(req) // POLICY_VIOLATION
	})

	newWorker(t, dsn, db, "w", opts{batch: 50, minBackoff: 50 * time.Millisecond}).start(t)
	waitStatus(t, db, "SENT", versions, 60*time.Second)
	if produces.Load() < 2 {
		t.Fatal("the failing produce request never happened")
	}
	recs, err := broker.ReadAllWithin(30*time.Second, tp, versions)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		got = append(got, header(r, "aggregate_version"))
	}
	if want := "1 2 3 4 5 6"; strings.Join(got, " ") != want {
		t.Fatalf("partition holds versions %v; want %s (in order, each once)", got, want)
	}
}
