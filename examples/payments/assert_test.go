package payments_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outbox-operator/outbox-operator/examples/payments"
	"github.com/outbox-operator/outbox-operator/inbox"
)

func reconcile(t *testing.T, s *stack, gw *payments.FakeGateway) payments.Report {
	t.Helper()
	rep, err := payments.Reconcile(context.Background(), s.db, payments.ReconcileOptions{Deliveries: gw})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// mismatches is "" when Reconcile finds nothing wrong in the given checks (all if
// none given), else the first few mismatches.
func mismatches(t *testing.T, s *stack, gw *payments.FakeGateway, checks ...string) string {
	t.Helper()
	var out []string
	for _, m := range reconcile(t, s, gw).Mismatches {
		if len(checks) == 0 || contains(checks, m.Check) {
			out = append(out, fmt.Sprintf("%s %s: %s", m.Check, m.OrderID, m.Detail))
		}
	}
	if len(out) > 5 {
		out = append(out[:5], fmt.Sprintf("and %d more", len(out)-5))
	}
	return strings.Join(out, "; ")
}

// caughtUp is "" once every group's committed offset is the end of every partition:
// each message, first delivery or redelivery, was handled and committed.
func caughtUp(t *testing.T, s *stack) string {
	t.Helper()
	cl := &kafka.Client{Addr: kafka.TCP(s.broker.Addrs()...)}
	var behind []string
	for _, g := range payments.AllGroups {
		resp, err := cl.OffsetFetch(context.Background(), &kafka.OffsetFetchRequest{GroupID: g, Topics: map[string][]int{topic: {0, 1, 2}}})
		if err != nil {
			return fmt.Sprintf("offsets of %s: %v", g, err)
		}
		committed := map[int]int64{}
		for _, p := range resp.Topics[topic] {
			committed[p.Partition] = p.CommittedOffset
		}
		for _, p := range s.broker.Cluster.PartitionInfos(topic) {
			if c := committed[int(p.Partition)]; c != p.HighWatermark {
				behind = append(behind, fmt.Sprintf("%s/%d at %d of %d", g, p.Partition, c, p.HighWatermark))
			}
		}
	}
	return strings.Join(behind, "; ")
}

// redeliveriesWereDuplicates: each group saw a Duplicate for every redelivered
// message (at least: commit crashes add their own), except the points group for the
// poison, which it parked again.
func redeliveriesWereDuplicates(t *testing.T, seen *outcomes, dups []*kgo.Record) {
	t.Helper()
	for _, g := range payments.AllGroups {
		want := len(dups)
		if g == payments.GroupPoints {
			want--
		}
		if got := seen.get(g, inbox.Duplicate); got < want {
			t.Errorf("group %s: %d duplicates, want at least %d", g, got, want)
		}
	}
}

// onlyThePoisonIsParked: the poison event is parked in the points group as one row
// (its redelivery at another offset merges into it), as permanent; nothing else is
// parked anywhere.
func onlyThePoisonIsParked(t *testing.T, s *stack, rep payments.Report, poisonID string) {
	t.Helper()
	want := payments.ParkedResult{Group: payments.GroupPoints, OrderID: order(0).OrderID, EventID: poisonID, Code: inbox.CodePermanent, Messages: 1}
	if len(rep.Parked) != 1 || rep.Parked[0] != want {
		t.Errorf("parked results %+v, want only %+v", rep.Parked, want)
	}
	for _, g := range payments.AllGroups {
		st, err := inbox.New(s.db, payments.Schema, g)
		if err != nil {
			t.Fatal(err)
		}
		n, err := st.ParkedCount(context.Background())
		if wantN := map[string]int{payments.GroupPoints: 1}[g]; err != nil || n != wantN {
			t.Errorf("group %s: ParkedCount %d (%v), want %d", g, n, err, wantN)
		}
	}
	rows := count(t, s, `SELECT count(*) FROM payments.message_consume_parked
WHERE NOT (consumer_group = 'points' AND event_id = $1 AND error_code = 'permanent' AND status = 'PARKED')`, poisonID)
	if rows != 0 {
		t.Errorf("%d other rows in message_consume_parked", rows)
	}
}

// oneSMSPerPayment: each PAID order's key has exactly one DONE command and one SMS
// sent; the gateway saw a second call for a key only after failing the first.
func oneSMSPerPayment(t *testing.T, s *stack, gw *payments.FakeGateway) {
	t.Helper()
	if n := count(t, s, `SELECT count(*) FROM payments.message_command WHERE consumer_group = 'notification' AND status = 'DONE'`); n != paidOrders {
		t.Errorf("%d DONE commands, want %d", n, paidOrders)
	}
	failures := 0
	for i := range paidOrders {
		key := payments.PaymentSucceededID(order(i).OrderID, paymentID(i))
		r := gw.Record(key)
		if r.Sent != 1 || r.Accepted != 1 || r.Calls != r.Failures+1 {
			t.Errorf("order %d: gateway record %+v: want one SMS, one accepted call, retries only after failures", i, r)
		}
		failures += r.Failures
	}
	if keys := len(gw.Keys()); keys != paidOrders {
		t.Errorf("the gateway was called with %d keys, want %d", keys, paidOrders)
	}
	if failures == 0 {
		t.Error("the gateway never failed: the retries were not exercised")
	}
}

func count(t *testing.T, s *stack, query string, args ...any) int {
	t.Helper()
	var n int
	if err := s.db.QueryRow(query, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
