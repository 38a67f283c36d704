package replslot

import (
	"context"
	"database/sql"
	"reflect"
	"testing"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/testenv/pgtest"
)

// TestSetPublicationTable: the publication follows the pipeline's table and keeps
// publishing inserts only; the slot stays where it was.
func TestSetPublicationTable(t *testing.T) {
	srv, err := pgtest.Start(pgtest.Options{Settings: pgtest.LogicalReplication})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	db, err := sql.Open("postgres", srv.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := db.ExecContext(ctx, `CREATE TABLE outbox_a (event_id text); CREATE SCHEMA billing; CREATE TABLE billing.outbox_b (event_id text)`); err != nil {
		t.Fatal(err)
	}
	a, b := pgident.Table{Schema: "public", Name: "outbox_a"}, pgident.Table{Schema: "billing", Name: "outbox_b"}
	const slot = "outbox_t_pub"

	if _, found, err := published(ctx, db, slot); err != nil || found {
		t.Fatalf("before Create: found %t, %v; want no publication", found, err)
	}
	if err := CreatePublication(ctx, db, slot, a); err != nil {
		t.Fatal(err)
	}
	if _, err := CreateSlot(ctx, db, slot); err != nil {
		t.Fatal(err)
	}
	seen, err := Read(ctx, db, slot, slot)
	if err != nil {
		t.Fatal(err)
	}
	before := seen.Slot
	tables, found, err := published(ctx, db, slot)
	if err != nil || !found || !reflect.DeepEqual(tables, []string{"public.outbox_a"}) || !CoversExactly(tables, a) || CoversExactly(tables, b) {
		t.Fatalf("after Create: %v %t %v; want exactly public.outbox_a", tables, found, err)
	}

	if err := SetPublicationTable(ctx, db, slot, b); err != nil {
		t.Fatal(err)
	}
	tables, _, err = published(ctx, db, slot)
	if err != nil || !reflect.DeepEqual(tables, []string{"billing.outbox_b"}) || !CoversExactly(tables, b) {
		t.Fatalf("after the move: %v %v; want exactly billing.outbox_b", tables, err)
	}
	var ins, upd, del bool
	if err := db.QueryRowContext(ctx, `SELECT pubinsert, pubupdate, pubdelete FROM pg_publication WHERE pubname = $1`, slot).Scan(&ins, &upd, &del); err != nil {
		t.Fatal(err)
	}
	if !ins || upd || del {
		t.Errorf("publish after the move: insert %t update %t delete %t; want inserts only", ins, upd, del)
	}
	seen, err = Read(ctx, db, slot, slot)
	after, found := seen.Slot, seen.SlotFound
	if err != nil || !found || after.ConfirmedLSN != before.ConfirmedLSN {
		t.Errorf("the slot moved or went: before %+v, after %+v (found %t, %v)", before, after, found, err)
	}

	if err := SetPublicationTable(ctx, db, slot, pgident.Table{Schema: "public", Name: "missing"}); err == nil {
		t.Error("moving to a table that does not exist succeeded")
	}
	if err := Drop(ctx, db, slot, slot); err != nil {
		t.Fatal(err)
	}
	if _, found, err := published(ctx, db, slot); err != nil || found {
		t.Fatalf("after Drop: found %t, %v", found, err)
	}
}

// published is what Read says of the publication (of the slot's name).
func published(ctx context.Context, db *sql.DB, name string) (tables []string, found bool, err error) {
	s, err := Read(ctx, db, name, name)
	return s.Tables, s.PublicationFound, err
}
