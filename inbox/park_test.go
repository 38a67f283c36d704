package inbox_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/outbox-operator/outbox-operator/inbox"
)

// TestParkRefusedEndsRunNamingTheMessage: the parking table refuses every row (a
// constraint an operator added). A message that must be parked is tried a bounded
// number of times, then Run returns an error naming it (event id, topic, partition,
// offset, never its payload) instead of spinning; its offset is not committed, so once
// the table takes rows again the next Run parks it and the messages behind it flow.
func TestParkRefusedEndsRunNamingTheMessage(t *testing.T) {
	db, s := setup(t)
	b := topicWith(t, 1, event{"poison", "u1", 1, `{"card":"4242-secret"}`}.kafka(""), event{"after", "u2", 1, `{}`}.kafka(""))
	if _, err := db.Exec(`ALTER TABLE message_consume_parked ADD CONSTRAINT no_parking CHECK (false) NOT VALID`); err != nil {
		t.Fatal(err)
	}
	fn := func(ctx context.Context, tx *sql.Tx, m inbox.Message) (string, error) {
		if m.EventID == "poison" {
			return "", inbox.Permanent(errors.New("unknown card scheme"))
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO points VALUES ($1, 10)`, m.AggregateID)
		return "", err
	}
	tl := newTally(2)
	c, err := inbox.NewConsumer(s, fn, fastOptions(tl))
	if err != nil {
		t.Fatal(err)
	}
	r := reader(b, "points")
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = c.Run(ctx, r)
	if err == nil || ctx.Err() != nil {
		t.Fatalf("Run = %v (ctx %v), want an error about the park", err, ctx.Err())
	}
	for _, want := range []string{`"poison"`, "topic payments", "partition 0", "offset 0", "no_parking"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Run's error %q does not say %s", err, want)
		}
	}
	if strings.Contains(err.Error(), "4242") {
		t.Errorf("Run's error quotes the payload: %q", err)
	}
	if _, err := db.Exec(`ALTER TABLE message_consume_parked DROP CONSTRAINT no_parking`); err != nil {
		t.Fatal(err)
	}
	runUntil(t, c, r, tl)
	if got := parkedRows(t, db, "points"); got["poison"] != inbox.CodePermanent || tl.get(inbox.Applied) != 1 {
		t.Fatalf("parked %v, outcomes %v: want poison parked and the next one applied", got, tl.by)
	}
	nothingLeft(t, b, "points")
}
