package payments_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/outbox-operator/outbox-operator/examples/payments"
	"github.com/outbox-operator/outbox-operator/inbox"
)

// TestSearchRowNeverMovesBack: the Store's version guard is per consumer group, so a
// second group writing the same projection (a rebuild replaying the topic from the
// start) runs the handler for version 1 after the row is at version 2; the row's own
// guard makes that a no-op.
func TestSearchRowNeverMovesBack(t *testing.T) {
	_, db := srv.OpenDatabase(t)
	ctx := context.Background()
	if err := payments.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	v1, v2 := stateEvent(t, 1, "PENDING"), stateEvent(t, 2, "PAID")
	live, _ := inbox.New(db, payments.Schema, payments.GroupSearch)
	rebuild, _ := inbox.New(db, payments.Schema, payments.GroupSearch+"-rebuild")
	for _, step := range []struct {
		s    *inbox.Store
		m    inbox.Message
		want inbox.Outcome
	}{
		{live, v1, inbox.Applied}, {live, v2, inbox.Applied},
		{live, v1, inbox.Duplicate},  // the Store: this group has it
		{rebuild, v1, inbox.Applied}, // the Store lets it through, the row guard stops it
	} {
		if got, err := step.s.Handle(ctx, step.m, payments.HandleSearch); err != nil || got != step.want {
			t.Fatalf("group %s, version %d: %v, %v; want %v", step.s.Group(), step.m.AggregateVersion, got, err, step.want)
		}
	}
	var status string
	var version int64
	if err := db.QueryRow(`SELECT status, last_applied_version FROM payments.order_search WHERE order_id = 'o-1'`).Scan(&status, &version); err != nil {
		t.Fatal(err)
	}
	if status != "PAID" || version != 2 {
		t.Fatalf("search row %s at version %d, want PAID at 2", status, version)
	}
	var ref string
	if err := db.QueryRow(`SELECT result_ref FROM payments.message_consume WHERE consumer_group = $1`, rebuild.Group()).Scan(&ref); err != nil || ref != "stale-row" {
		t.Fatalf("the rebuild's result %q (%v), want stale-row: the row guard did not stop it", ref, err)
	}
}

func stateEvent(t *testing.T, version int64, status string) inbox.Message {
	t.Helper()
	typ := payments.EventOrderPlaced
	if version == 2 {
		typ = payments.EventPaymentSucceeded
	}
	b, err := json.Marshal(payments.OrderState{OrderID: "o-1", UserID: "u-1", AmountCents: 1000, Currency: "EUR", Status: status})
	if err != nil {
		t.Fatal(err)
	}
	return inbox.Message{EventID: typ + "-o-1", EventType: typ, EventVersion: 1, AggregateType: payments.AggregateOrder,
		AggregateID: "o-1", AggregateVersion: version, Payload: b}
}
