package gitops

import (
	"context"
	"testing"

	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
)

const ()

// TestOutboxPipelineHealth walks a pipeline through its states with the real
// reconciler: created, rolled out, changed, broken in several ways, paused.
func TestOutboxPipelineHealth(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	db, table := migratedDB(t, ns)
	p := newPipeline(ns, "db")
	must(t, kube.Create(ctx, p))

	created := waitFor(t, p, "a new pipeline rolls out", func() bool {
		return is(p.Status.Conditions, "Progressing", "True/RollingOut") && is(p.Status.Conditions, "Ready", "False/WorkersNotReady")
	})
	rollOut(t, ns, "orders-relay", 2)
	healthy := waitFor(t, p, "rolled out", func() bool {
		return is(p.Status.Conditions, "Ready", "True/Ready") && is(p.Status.Conditions, "Progressing", "False/RolloutComplete") &&
			is(p.Status.Conditions, "Degraded", "False/Healthy")
	})
	p.Spec.Relay.Replicas = ptr(int32(3))
	must(t, kube.Update(ctx, p))
	changing := waitFor(t, p, "a spec change rolls out while the old workers serve", func() bool {
		return p.Status.ObservedGeneration == p.Generation && is(p.Status.Conditions, "Progressing", "True/RollingOut")
	})
	rollOut(t, ns, "orders-relay", 3)
	reportBrokerDown(t, db, table)
	brokerDown := waitFor(t, p, "the workers lose their brokers", func() bool {
		return is(p.Status.Conditions, "Degraded", "True/BrokerUnavailable")
	})

	runCases(t, []healthCase{
		{name: "new, rolling out", obj: created, kstatus: status.InProgressStatus, today: status.InProgressStatus,
			argo: "Progressing", argoMsg: "RollingOut: rolling out Deployment orders-relay"},
		{name: "rolled out and ready", obj: healthy, kstatus: status.CurrentStatus, today: status.CurrentStatus,
			argo: "Healthy", argoMsg: "Ready: 2/2 relay workers ready"},
		{name: "rolled out, slot replaced recently (informational)", obj: withSlotReplaced(t, healthy), kstatus: status.CurrentStatus,
			today: status.CurrentStatus, argo: "Healthy", argoMsg: "Ready: 2/2 relay workers ready"},
		{name: "change not yet observed", obj: unobserved(healthy), kstatus: status.InProgressStatus, today: status.InProgressStatus,
			argo: "Progressing", argoMsg: "Waiting for the operator to observe generation 2"},
		{name: "change rolling out", obj: changing, kstatus: status.InProgressStatus, today: status.InProgressStatus,
			argo: "Progressing", argoMsg: "RollingOut"},
		{name: "brokers unreachable", obj: brokerDown, kstatus: status.CurrentStatus, today: status.CurrentStatus,
			argo: "Degraded", argoMsg: "BrokerUnavailable: 1 of 1 workers cannot write to any Kafka broker"},
	})
}

// TestOutboxPipelineBroken covers the states that need a human, each in its own
// namespace.
func TestOutboxPipelineBroken(t *testing.T) {
	ctx := context.Background()

	ns := newNamespace(t)
	p := newPipeline(ns, "absent")
	must(t, kube.Create(ctx, p))
	noSecret := waitFor(t, p, "Secret missing", func() bool { return is(p.Status.Conditions, "Ready", "False/SecretNotFound") })

	ns = newNamespace(t)
	dsn, _ := pgSrv.OpenDatabase(t) // never migrated
	must(t, kube.Create(ctx, secret(ns, "db", dsn)))
	p = newPipeline(ns, "db")
	must(t, kube.Create(ctx, p))
	noTable := waitFor(t, p, "table missing", func() bool { return is(p.Status.Conditions, "Ready", "False/TableMissing") })

	ns = newNamespace(t)
	migratedDB(t, ns)
	p = newPipeline(ns, "db")
	must(t, kube.Create(ctx, p))
	rollOut(t, ns, "orders-relay", 0)
	notReady := waitFor(t, p, "rolled out, no worker ready", func() bool {
		return is(p.Status.Conditions, "Progressing", "False/RolloutComplete") && is(p.Status.Conditions, "Ready", "False/WorkersNotReady")
	})
	p.Spec.Paused = true
	must(t, kube.Update(ctx, p))
	waitFor(t, p, "pausing", func() bool { return p.Status.ObservedGeneration == p.Generation })
	rollOut(t, ns, "orders-relay", 0) // the scale-down to 0 has completed
	paused := waitFor(t, p, "paused", func() bool {
		return is(p.Status.Conditions, "Ready", "False/Paused") && is(p.Status.Conditions, "Progressing", "False/RolloutComplete")
	})

	runCases(t, []healthCase{
		{name: "Secret missing", obj: noSecret, kstatus: status.FailedStatus, today: status.FailedStatus,
			argo: "Degraded", argoMsg: `SecretNotFound: Secret "absent" referenced by spec.source.dsnSecretRef was not found`},
		{name: "table missing", obj: noTable, kstatus: status.FailedStatus, today: status.FailedStatus,
			argo: "Degraded", argoMsg: "TableMissing"},
		{name: "rolled out, no worker ready", obj: notReady, kstatus: status.InProgressStatus, today: status.InProgressStatus,
			argo: "Progressing", argoMsg: "WorkersNotReady: 0/2 relay workers ready"},
		{name: "paused", obj: paused, kstatus: status.CurrentStatus, today: status.InProgressStatus,
			gap:  "spec.paused is the desired state, but Ready=False (reason Paused) reads as InProgress forever",
			argo: "Suspended", argoMsg: "Paused: spec.paused is true"},
	})
}

// Condition reasons the cases rely on are API: a rename must fail here.
var _ = []string{outboxv1.ReasonRollingOut, outboxv1.ReasonBrokerUnavailable, outboxv1.ReasonPaused, outboxv1.ReasonTableMissing}
