package controller

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

func newNamespace() string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "t-"}}
	Expect(k8sClient.Create(suiteCtx, ns)).To(Succeed())
	return ns.Name
}

func createSecret(ns, name string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, StringData: data}
	Expect(k8sClient.Create(suiteCtx, s)).To(Succeed())
	return s
}

// newPipeline is a valid pipeline reading dsn from Secret secretName key "dsn".
func newPipeline(ns, name, secretName string, mut ...func(*outboxv1.OutboxPipeline)) *outboxv1.OutboxPipeline {
	p := &outboxv1.OutboxPipeline{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: outboxv1.OutboxPipelineSpec{
			// Contract v1 pinned: the tables of these specs are v1 (migratedDB), and the
			// CRD's default is v2. A spec of a v2 table sets v2 (or "" for the default).
			Source: outboxv1.PostgresSource{DSNSecretRef: outboxv1.SecretKeyRef{Name: secretName, Key: "dsn"}, Contract: outboxv1.ContractV1},
			Sink:   outboxv1.KafkaSink{Brokers: []string{"127.0.0.1:9092"}},
			Monitoring: outboxv1.MonitoringSettings{
				StatusInterval: &metav1.Duration{Duration: 5 * time.Second},
			},
		},
	}
	for _, m := range mut {
		m(p)
	}
	return p
}

// migratedDB creates a fresh database with the outbox table; returns DSN and handle.
func migratedDB() (string, *sql.DB, pgident.Table) {
	ctx, cancel := context.WithTimeout(suiteCtx, 20*time.Second)
	defer cancel()
	dsn, err := pgSrv.CreateDatabase(ctx, "ctrl")
	Expect(err).NotTo(HaveOccurred())
	db := openDB(dsn)
	t, err := pgident.NewTable("public", "outbox_event")
	Expect(err).NotTo(HaveOccurred())
	Expect(schema.Migrate(ctx, db, t, schema.Options{})).To(Succeed())
	return dsn, db, t
}

var rowSeq int

// insertRow writes one outbox row with plain SQL; extraSet is a SET clause applied after.
func insertRow(db *sql.DB, t pgident.Table, status, extraSet string) {
	rowSeq++
	id := fmt.Sprintf("ev-%d", rowSeq)
	_, err := db.Exec(`INSERT INTO `+t.Qualified()+` (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, destination, message_key, payload, status)
VALUES ($1, 'order', $1, 1, 'OrderPlaced', 'orders', $1, '{}', $2)`, id, status)
	Expect(err).NotTo(HaveOccurred())
	if extraSet != "" {
		_, err = db.Exec(`UPDATE `+t.Qualified()+` SET `+extraSet+` WHERE event_id = $1`, id)
		Expect(err).NotTo(HaveOccurred())
	}
}

func condition(conds []metav1.Condition, typ string) metav1.Condition {
	if c := meta.FindStatusCondition(conds, typ); c != nil {
		return *c
	}
	return metav1.Condition{}
}

func getPipeline(ns, name string) func() *outboxv1.OutboxPipeline {
	return func() *outboxv1.OutboxPipeline {
		var p outboxv1.OutboxPipeline
		Expect(k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: ns, Name: name}, &p)).To(Succeed())
		return &p
	}
}

// conditionOf extracts "Status/Reason" of a condition type for concise matchers.
func conditionOf(typ string) func(*outboxv1.OutboxPipeline) string {
	return func(p *outboxv1.OutboxPipeline) string {
		c := condition(p.Status.Conditions, typ)
		return string(c.Status) + "/" + c.Reason
	}
}

var _ = GinkgoWriter
