package gitops

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "gitops-"}}
	must(t, kube.Create(context.Background(), ns))
	return ns.Name
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// migratedDB is a fresh database with the outbox table, its DSN in Secret "db" of ns.
func migratedDB(t *testing.T, ns string) (*sql.DB, pgident.Table) {
	t.Helper()
	dsn, db := pgSrv.OpenDatabase(t)
	table, err := pgident.NewTable("public", "outbox_event")
	must(t, err)
	must(t, schema.Migrate(context.Background(), db, table, schema.Options{}))
	must(t, kube.Create(context.Background(), secret(ns, "db", dsn)))
	return db, table
}

func secret(ns, name, dsn string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, StringData: map[string]string{"dsn": dsn}}
}

// newPipeline is a pipeline "orders" reading Secret secret; the operator rereads the
// table every 5 s. Contract v1 is pinned: migratedDB's table is v1 (the CRD's
// default is v2).
func newPipeline(ns, secret string) *outboxv1.OutboxPipeline {
	return &outboxv1.OutboxPipeline{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orders"},
		Spec: outboxv1.OutboxPipelineSpec{
			Source:     outboxv1.PostgresSource{DSNSecretRef: outboxv1.SecretKeyRef{Name: secret, Key: "dsn"}, Contract: outboxv1.ContractV1},
			Sink:       outboxv1.KafkaSink{Brokers: []string{"kafka-0.kafka:9092"}},
			Monitoring: outboxv1.MonitoringSettings{StatusInterval: &metav1.Duration{Duration: 5 * time.Second}},
		},
	}
}

// snapshot reads obj as stored, untyped: what kstatus and Argo CD see.
func snapshot(t *testing.T, obj client.Object) *unstructured.Unstructured {
	t.Helper()
	gvk, err := kube.GroupVersionKindFor(obj)
	must(t, err)
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	must(t, kube.Get(context.Background(), client.ObjectKeyFromObject(obj), u))
	return u
}

// waitFor polls obj until ok is true (up to 30 s), then returns its snapshot.
func waitFor(t *testing.T, obj client.Object, what string, ok func() bool) *unstructured.Unstructured {
	t.Helper()
	snap, done := poll(t, obj, 30*time.Second, ok)
	if !done {
		t.Fatalf("%s: not reached in 30s; status: %+v", what, statusOf(obj))
	}
	return snap
}

// poll rereads obj until ok is true or d has passed.
func poll(t *testing.T, obj client.Object, d time.Duration, ok func() bool) (*unstructured.Unstructured, bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		must(t, kube.Get(context.Background(), client.ObjectKeyFromObject(obj), obj))
		if ok() {
			return snapshot(t, obj), true
		}
		if time.Now().After(deadline) {
			return nil, false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func statusOf(obj client.Object) any {
	switch o := obj.(type) {
	case *outboxv1.OutboxPipeline:
		return o.Status
	case *outboxv1.DeadLetterReplay:
		return o.Status
	case *outboxv1.RetentionPolicy:
		return o.Status
	}
	return obj
}

// is reports whether conds has typ with status/reason.
func is(conds []metav1.Condition, typ, statusReason string) bool {
	c := meta.FindStatusCondition(conds, typ)
	return c != nil && string(c.Status)+"/"+c.Reason == statusReason
}

// rollOut plays the Deployment controller: every desired replica runs the current
// template, ready of them pass their readiness probe.
func rollOut(t *testing.T, ns, name string, ready int32) {
	t.Helper()
	var dep appsv1.Deployment
	key := client.ObjectKey{Namespace: ns, Name: name}
	deadline := time.Now().Add(30 * time.Second)
	for kube.Get(context.Background(), key, &dep) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("Deployment %s not created", key)
		}
		time.Sleep(100 * time.Millisecond)
	}
	n := *dep.Spec.Replicas
	dep.Status = appsv1.DeploymentStatus{ObservedGeneration: dep.Generation, Replicas: n, UpdatedReplicas: n,
		ReadyReplicas: ready, AvailableReplicas: ready}
	must(t, kube.Status().Update(context.Background(), &dep))
}

// finishJob plays the Job controller ending a Job (the API server checks the order of
// the terminal conditions).
func finishJob(t *testing.T, ns, name string, complete bool) {
	t.Helper()
	var job batchv1.Job
	must(t, kube.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &job))
	now := metav1.Now()
	if job.Status.StartTime == nil { // immutable once set
		job.Status.StartTime = &now
	}
	job.Status.Active = 0
	first, last := batchv1.JobFailureTarget, batchv1.JobFailed
	if complete {
		first, last = batchv1.JobSuccessCriteriaMet, batchv1.JobComplete
		job.Status.CompletionTime, job.Status.Succeeded = &now, 1
	} else {
		job.Status.Failed = 4
	}
	for _, typ := range []batchv1.JobConditionType{first, last} {
		job.Status.Conditions = append(job.Status.Conditions, batchv1.JobCondition{Type: typ, Status: corev1.ConditionTrue,
			LastProbeTime: now, LastTransitionTime: now, Reason: "Test", Message: "set by the test"})
	}
	must(t, kube.Status().Update(context.Background(), &job))
}

// startJob plays the Job controller starting a Job's pod.
func startJob(t *testing.T, ns, name string) {
	t.Helper()
	var job batchv1.Job
	key := client.ObjectKey{Namespace: ns, Name: name}
	deadline := time.Now().Add(30 * time.Second)
	for kube.Get(context.Background(), key, &job) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("Job %s not created", key)
		}
		time.Sleep(100 * time.Millisecond)
	}
	now := metav1.Now()
	job.Status.StartTime, job.Status.Active = &now, 1
	must(t, kube.Status().Update(context.Background(), &job))
}

// reportBrokerDown plays a relay worker that lost every broker (its row in
// <table>_workers, fresh heartbeat).
func reportBrokerDown(t *testing.T, db *sql.DB, table pgident.Table) {
	t.Helper()
	_, err := db.Exec(`INSERT INTO ` + table.WithSuffix(schema.WorkersSuffix).Qualified() +
		` (worker_id, broker_up, broker_down_since, broker_error_code) VALUES ('orders-relay-0', false, now(), 'BROKER_UNAVAILABLE')`)
	must(t, err)
}

// unobserved is snap as it looks right after a spec change the operator has not
// reconciled yet: the generation moved on, the status did not.
func unobserved(snap *unstructured.Unstructured) *unstructured.Unstructured {
	u := snap.DeepCopy()
	u.SetGeneration(u.GetGeneration() + 1)
	return u
}

// withSlotReplaced is snap with the informational SlotReplaced condition the operator
// shows for a while after it replaced a LogicalReplication pipeline's slot (the
// controllers suite makes that happen against a real PostgreSQL; here it is what
// GitOps tools make of it).
func withSlotReplaced(t *testing.T, snap *unstructured.Unstructured) *unstructured.Unstructured {
	u := snap.DeepCopy()
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	conds = append(conds, map[string]any{"type": outboxv1.ConditionSlotReplaced, "status": "True",
		"reason": outboxv1.ReasonSlotInvalidated, "message": "the operator replaced replication slot s", "lastTransitionTime": "2026-12-01T10:00:00Z"})
	must(t, unstructured.SetNestedSlice(u.Object, conds, "status", "conditions"))
	return u
}

func describe(u *unstructured.Unstructured) string {
	return fmt.Sprintf("%s %s/%s", u.GetKind(), u.GetNamespace(), u.GetName())
}
