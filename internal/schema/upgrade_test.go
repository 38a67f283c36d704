package schema

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
)

// insertV1 writes one v1 row in a given state: $1 id, $2 aggregate, $3 version,
// $4 status, $5 retry_count, $6 next_retry_at, $7 lease_until, $8 error code.
const insertV1 = `INSERT INTO %s (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, destination,
    message_key, payload, status, retry_count, next_retry_at, lease_until, last_error_code, last_error_message)
VALUES ($1, 'order', $2, $3, 'order.changed', 'orders', $2, '{"a":1}', $4, $5, $6, $7, NULLIF($8, ''), NULLIF($8, ''))`

// insert8 is a producer's plain INSERT of the eight required columns.
const insert8 = `INSERT INTO %s (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, destination, message_key, payload)
VALUES ($1, 'order', $2, $3, 'order.changed', 'orders', $2, '{"a":1}')`

type v1Row struct {
	id, agg   string
	version   int
	status    string
	retries   int
	nextRetry time.Time
	lease     *time.Time
	code      string
}

// v1Table makes a v1 table (with the NOTIFY trigger) holding rows.
func v1Table(t *testing.T, db *sql.DB, tb pgident.Table, rows []v1Row) {
	t.Helper()
	if err := Migrate(context.Background(), db, tb, Options{NotifyTrigger: true}); err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if _, err := db.Exec(fmt.Sprintf(insertV1, tb.Qualified()), r.id, r.agg, r.version, r.status, r.retries, r.nextRetry, r.lease, r.code); err != nil {
			t.Fatal(err)
		}
	}
}

type holdRow struct {
	State    string
	Attempts int
	Next     time.Time
	Code     sql.NullString
	Shard    int
}

func holdRows(t *testing.T, db *sql.DB, tb pgident.Table) map[string]holdRow {
	t.Helper()
	rows, err := db.Query(`SELECT event_id, state, attempts, next_attempt_at, last_error_code, shard FROM ` + tb.WithSuffix(HoldSuffix).Qualified())
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]holdRow{}
	for rows.Next() {
		var id string
		var h holdRow
		if err := rows.Scan(&id, &h.State, &h.Attempts, &h.Next, &h.Code, &h.Shard); err != nil {
			t.Fatal(err)
		}
		out[id] = h
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Every v1 row with work goes to the hold table in the state the v2 relay gives such
// a row, SENT rows stay aside, and producers' plain INSERTs land in the v2 table.
func TestUpgradeV1CopiesWorkToHold(t *testing.T) {
	db := open(t)
	ctx := context.Background()
	tb, _ := pgident.NewTable("app", "events")
	later := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	lease := time.Now().Add(time.Minute).Truncate(time.Millisecond)
	v1Table(t, db, tb, []v1Row{
		{id: "a1", agg: "a", version: 1, status: StatusSent},
		{id: "a2", agg: "a", version: 2, status: StatusRetry, retries: 2, nextRetry: later, code: "KAFKA_TIMEOUT"},
		{id: "a3", agg: "a", version: 3, status: StatusPending},
		{id: "b1", agg: "b", version: 1, status: StatusDead, retries: 5, code: "MESSAGE_TOO_LARGE"},
		{id: "b2", agg: "b", version: 2, status: StatusSending, retries: 1, lease: &lease},
		{id: "c1", agg: "c", version: 1, status: StatusPending},
		{id: "d1", agg: "d", version: 1, status: StatusSent},
	})
	start := time.Now()
	if err := MigrateV2(ctx, db, tb, V2Options{Shards: 16, UpgradeChunk: 2}); err != nil {
		t.Fatal(err)
	}
	if c, err := VerifyV2(ctx, db, tb, 16); err != nil || c.Version != ContractV2 {
		t.Fatalf("VerifyV2 after the upgrade = %+v, %v", c, err)
	}
	// v1's archive went aside with the table; v2 retention's archive has v2's shape.
	var v1Archive, v2Archive bool
	if err := db.QueryRow(`SELECT to_regclass('app.events_v1_archive') IS NOT NULL,
       EXISTS (SELECT FROM information_schema.columns WHERE table_schema = 'app' AND table_name = 'events_archive' AND column_name = 'shard')`).Scan(&v1Archive, &v2Archive); err != nil {
		t.Fatal(err)
	}
	if !v1Archive || !v2Archive {
		t.Fatalf("after the upgrade: v1 archive aside = %v, v2-shaped events_archive = %v; want both", v1Archive, v2Archive)
	}
	u, err := UpgradeState(ctx, db, tb)
	if err != nil {
		t.Fatal(err)
	}
	if u != (Upgrade{State: UpgradeDone, From: "app.events_v1", Copied: 5, Dead: 1}) {
		t.Fatalf("upgrade state %+v", u)
	}
	got := holdRows(t, db, tb)
	want := map[string]string{"a2": StatusRetry, "a3": StatusHeld, "b1": StatusDead, "b2": StatusRetry, "c1": StatusRetry}
	if len(got) != len(want) {
		t.Fatalf("hold rows %v, want %v", got, want)
	}
	for id, st := range want {
		if got[id].State != st {
			t.Errorf("hold row %s is %q, want %q", id, got[id].State, st)
		}
	}
	if h := got["a2"]; h.Attempts != 2 || !h.Next.Equal(later) || h.Code.String != "KAFKA_TIMEOUT" {
		t.Errorf("RETRY row a2 = %+v: attempts, next retry and error not kept", h)
	}
	if h := got["b1"]; h.Attempts != 5 || h.Code.String != "MESSAGE_TOO_LARGE" {
		t.Errorf("DEAD row b1 = %+v: attempts and error not kept", h)
	}
	if h := got["b2"]; !h.Next.Equal(lease) {
		t.Errorf("SENDING row b2 due at %v, want its lease end %v", h.Next, lease)
	}
	if h := got["c1"]; h.Attempts != 0 || h.Next.Before(start.Add(-time.Minute)) || h.Next.After(time.Now().Add(time.Minute)) {
		t.Errorf("PENDING row c1 = %+v, want due now with no attempt", h)
	}

	// Producers: a plain INSERT of the eight required columns is an event of the v2
	// table, in the shard the hold rows of its aggregate were given.
	if _, err := db.Exec(fmt.Sprintf(insert8, tb.Qualified()), "a4", "a", 4); err != nil {
		t.Fatalf("plain INSERT after the upgrade: %v", err)
	}
	var shard int
	if err := db.QueryRow(`SELECT shard FROM app.events WHERE event_id = 'a4'`).Scan(&shard); err != nil {
		t.Fatal(err)
	}
	if shard != got["a2"].Shard {
		t.Fatalf("new event of aggregate a in shard %d, its hold rows in %d", shard, got["a2"].Shard)
	}
	var aside, trigger int
	if err := db.QueryRow(`SELECT (SELECT count(*) FROM app.events_v1),
        (SELECT count(*) FROM pg_trigger WHERE tgrelid = 'app.events'::regclass AND tgname = 'events_notify_trg')`).Scan(&aside, &trigger); err != nil {
		t.Fatal(err)
	}
	if aside != 7 || trigger != 1 {
		t.Fatalf("aside table has %d rows (want 7), v2 table %d notify triggers (want 1)", aside, trigger)
	}

	// A producer writing a v1 column gets PostgreSQL's error naming it.
	_, err = db.Exec(`INSERT INTO app.events (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, destination, message_key, payload, status)
VALUES ('x', 'order', 'x', 1, 'order.changed', 'orders', 'x', '{}', 'PENDING')`)
	if err == nil || !strings.Contains(err.Error(), `column "status" of relation "events" does not exist`) {
		t.Fatalf("INSERT naming status = %v, want the error naming the column", err)
	}

	// A second migrate is a no-op.
	if err := MigrateV2(ctx, db, tb, V2Options{Shards: 16}); err != nil {
		t.Fatalf("migrate after the upgrade: %v", err)
	}
	if n := len(holdRows(t, db, tb)); n != 5 {
		t.Fatalf("%d hold rows after a second migrate, want 5", n)
	}
}

// A migrate stopped between chunks leaves the upgrade in progress; the next one
// resumes it, and a chunk copied again (its cursor lost) copies nothing twice.
func TestUpgradeResumesAfterInterruption(t *testing.T) {
	db := open(t)
	ctx := context.Background()
	tb, _ := pgident.NewTable("public", "ob")
	var rows []v1Row
	for i := range 10 {
		rows = append(rows, v1Row{id: fmt.Sprintf("e%02d", i), agg: fmt.Sprintf("g%d", i%3), version: i, status: StatusPending})
	}
	v1Table(t, db, tb, rows)

	// The first transaction alone, then one chunk: what a migrate killed after its
	// first chunk leaves.
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := startUpgrade(ctx, tx, tb, 8, DefaultUpgradeLockTimeout); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if n, err := copyChunk(ctx, db, tb, 8, 4); err != nil || n != 4 {
		t.Fatalf("first chunk scanned %d, %v; want 4", n, err)
	}
	u, err := UpgradeState(ctx, db, tb)
	if err != nil || !u.InProgress() || u.Copied != 4 {
		t.Fatalf("after one chunk: %+v, %v; want in progress with 4 copied", u, err)
	}
	if c, err := DetectContract(ctx, db, tb); err != nil || c.Version != ContractV2 {
		t.Fatalf("contract while copying = %+v, %v; want v2", c, err)
	}
	if _, err := db.Exec(fmt.Sprintf(insert8, tb.Qualified()), "new", "g0", 100); err != nil {
		t.Fatalf("producer INSERT while copying: %v", err)
	}

	// The cursor lost: the first chunk is scanned again and copies nothing.
	if _, err := db.Exec(`UPDATE public.ob_upgrade SET last_event_id = ''`); err != nil {
		t.Fatal(err)
	}
	if err := MigrateV2(ctx, db, tb, V2Options{Shards: 8, UpgradeChunk: 3}); err != nil {
		t.Fatal(err)
	}
	u, err = UpgradeState(ctx, db, tb)
	if err != nil || u.State != UpgradeDone || u.Copied != 10 {
		t.Fatalf("after the resumed migrate: %+v, %v; want done with 10 copied", u, err)
	}
	got := holdRows(t, db, tb)
	retry := 0
	for _, h := range got {
		if h.State == StatusRetry {
			retry++
		}
	}
	if len(got) != 10 || retry != 3 {
		t.Fatalf("%d hold rows, %d RETRY; want 10 with one RETRY per aggregate (3)", len(got), retry)
	}
}

// Refusals, each one line: a contract version this build does not know, a shard count
// change once the upgrade put rows in the hold table, and a lock the upgrade cannot get.
func TestUpgradeRefusals(t *testing.T) {
	db := open(t)
	ctx := context.Background()
	tb, _ := pgident.NewTable("public", "ob")
	v1Table(t, db, tb, []v1Row{{id: "e1", agg: "a", version: 1, status: StatusPending}})

	// The v1 table is in use: a producer's transaction is open on it.
	busy, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := busy.Exec(fmt.Sprintf(insertV1, tb.Qualified()), "e2", "a", 2, StatusPending, 0, time.Now(), nil, ""); err != nil {
		t.Fatal(err)
	}
	err = MigrateV2(ctx, db, tb, V2Options{Shards: 8})
	if err == nil || !strings.Contains(err.Error(), "no ACCESS EXCLUSIVE lock on the table within 5s") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("upgrade while a transaction holds the table = %v, want the lock refusal in one line", err)
	}
	// UpgradeLockTimeout (--upgrade-lock-timeout) is the wait: 300ms is waited, and named.
	began := time.Now()
	err = MigrateV2(ctx, db, tb, V2Options{Shards: 8, UpgradeLockTimeout: 300 * time.Millisecond})
	if waited := time.Since(began); err == nil || !strings.Contains(err.Error(), "no ACCESS EXCLUSIVE lock on the table within 300ms") || waited >= 5*time.Second {
		t.Fatalf("upgrade with a 300ms lock timeout = %v after %s, want the refusal naming 300ms, before the 5s default", err, waited)
	}
	for _, o := range []V2Options{{Shards: 8, UpgradeLockTimeout: time.Microsecond}, {Shards: 8, UpgradeChunk: MaxUpgradeChunk + 1}} {
		if err := MigrateV2(ctx, db, tb, o); err == nil || !strings.Contains(err.Error(), "upgrade ") || strings.Contains(err.Error(), "\n") {
			t.Fatalf("MigrateV2(%+v) = %v, want the knob refused in one line", o, err)
		}
	}
	if c, err := DetectContract(ctx, db, tb); err != nil || c.Version != ContractV1 {
		t.Fatalf("after a refused upgrade the table is %+v, %v; want v1 untouched", c, err)
	}
	if err := busy.Commit(); err != nil {
		t.Fatal(err)
	}
	// A payload the relay cannot send is refused before anything moves.
	if _, err := db.Exec(`ALTER TABLE public.ob ALTER payload TYPE xml USING '<a/>'`); err != nil {
		t.Fatal(err)
	}
	err = MigrateV2(ctx, db, tb, V2Options{Shards: 8})
	if err == nil || !strings.Contains(err.Error(), `payload column type "xml" is not supported (json, jsonb, text or bytea)`) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("upgrade of an xml payload = %v, want the refusal in one line", err)
	}
	if c, err := DetectContract(ctx, db, tb); err != nil || c.Version != ContractV1 {
		t.Fatalf("after a refused upgrade the table is %+v, %v; want v1 untouched", c, err)
	}
	if _, err := db.Exec(`ALTER TABLE public.ob ALTER payload TYPE jsonb USING '{}'`); err != nil {
		t.Fatal(err)
	}

	if err := MigrateV2(ctx, db, tb, V2Options{Shards: 8}); err != nil {
		t.Fatal(err)
	}
	err = MigrateV2(ctx, db, tb, V2Options{Shards: 16})
	if err == nil || !strings.Contains(err.Error(), "has 8 shards and holds events") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("shard change after the upgrade = %v, want the refusal in one line", err)
	}
	if _, err := db.Exec(`UPDATE public.ob_contract SET version = 7`); err != nil {
		t.Fatal(err)
	}
	err = MigrateV2(ctx, db, tb, V2Options{Shards: 8})
	if err == nil || !strings.Contains(err.Error(), "table contract version 7 is unknown") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("migrate of an unknown contract = %v, want the refusal in one line", err)
	}
}
