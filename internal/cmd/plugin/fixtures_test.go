package plugin

import (
	"context"
	"database/sql"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// outboxDB is a fresh database with a migrated outbox table.
type outboxDB struct {
	dsn   string
	db    *sql.DB
	table pgident.Table
}

func newOutboxDB(t *testing.T, table string) outboxDB {
	t.Helper()
	dsn, db := pgSrv.OpenDatabase(t)
	tb, err := pgident.NewTable("public", table)
	if err != nil {
		t.Fatal(err)
	}
	if err := schema.Migrate(context.Background(), db, tb, schema.Options{}); err != nil {
		t.Fatal(err)
	}
	return outboxDB{dsn: dsn, db: db, table: tb}
}

// insert writes one event row, then applies set (a SET clause) to it.
func (o outboxDB) insert(t *testing.T, id, aggID string, version int, set string) {
	t.Helper()
	_, err := o.db.Exec(`INSERT INTO `+o.table.Qualified()+` (event_id, aggregate_type, aggregate_id, aggregate_version,
		event_type, destination, message_key, payload) VALUES ($1, 'order', $2, $3, 'OrderPlaced', 'orders', $2, '{"secret":"payload"}')`,
		id, aggID, version)
	if err != nil {
		t.Fatal(err)
	}
	if set != "" {
		o.exec(t, `UPDATE `+o.table.Qualified()+` SET `+set+` WHERE event_id = $1`, id)
	}
}

func (o outboxDB) exec(t *testing.T, q string, args ...any) {
	t.Helper()
	if _, err := o.db.Exec(q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// pipeline creates an OutboxPipeline reading its DSN from Secret secret key "dsn",
// contract v1 pinned (newOutboxDB's tables are v1; the CRD's default is v2).
func pipeline(t *testing.T, ns, name, secret, table string) *outboxv1.OutboxPipeline {
	t.Helper()
	return pipelineOf(t, ns, name, secret, table, outboxv1.ContractV1)
}

// pipelineOf is pipeline with spec.source.contract c.
func pipelineOf(t *testing.T, ns, name, secret, table string, c outboxv1.TableContract) *outboxv1.OutboxPipeline {
	t.Helper()
	p := &outboxv1.OutboxPipeline{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: outboxv1.OutboxPipelineSpec{
			Source: outboxv1.PostgresSource{DSNSecretRef: outboxv1.SecretKeyRef{Name: secret, Key: "dsn"}, Table: table, Contract: c},
			Sink:   outboxv1.KafkaSink{Brokers: []string{"kafka:9092"}},
		},
	}
	create(t, p)
	return p
}

// pipelineWithDB is a namespace, a database with rows table outbox_event, its DSN
// Secret "db" and pipeline "orders".
func pipelineWithDB(t *testing.T) (string, outboxDB) {
	t.Helper()
	ns := newNamespace(t)
	o := newOutboxDB(t, "outbox_event")
	createSecret(t, ns, "db", map[string]string{"dsn": o.dsn})
	pipeline(t, ns, "orders", "db", "")
	return ns, o
}

func mtime(t time.Time) *metav1.Time { m := metav1.NewTime(t); return &m }

func ptr[T any](v T) *T { return &v }
