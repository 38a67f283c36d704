package plugin

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
)

func cond(typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: "m", LastTransitionTime: metav1.Now()}
}

// statusFixture creates a healthy-but-degraded pipeline, a broken one, a running
// replay and a retention policy, with the statuses the operator would write.
func statusFixture(t *testing.T, ns string) {
	now := time.Now()
	ok := pipeline(t, ns, "orders", "db", "")
	ok.Status = outboxv1.OutboxPipelineStatus{
		ObservedGeneration: ok.Generation, Workers: "2/2", Replicas: 2, ReadyWorkers: 2,
		Pending: 7, Retrying: 3, Dead: 1, OldestPendingTime: mtime(now.Add(-30*time.Minute - 30*time.Second)),
		BrokerUnavailableWorkers: 2, BrokerUnavailableSince: mtime(now.Add(-5*time.Hour - 30*time.Second)),
		Conditions: []metav1.Condition{cond("Ready", "True", "Ready"), cond("Degraded", "True", "BrokerUnavailable")},
	}
	setStatus(t, ok)
	bad := pipeline(t, ns, "billing", "missing", "billing_outbox")
	bad.Status = outboxv1.OutboxPipelineStatus{
		ObservedGeneration: bad.Generation,
		Conditions:         []metav1.Condition{cond("Ready", "False", "SecretNotFound"), cond("Degraded", "True", "SecretNotFound")},
	}
	setStatus(t, bad)

	rp := &outboxv1.DeadLetterReplay{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fix-size"},
		Spec: outboxv1.DeadLetterReplaySpec{PipelineRef: outboxv1.PipelineReference{Name: "orders"},
			Selector: outboxv1.ReplaySelector{ErrorCode: "MESSAGE_TOO_LARGE"}, Reason: "INC-1: limit raised"},
	}
	create(t, rp)
	rp.Status = outboxv1.DeadLetterReplayStatus{ObservedGeneration: rp.Generation, Phase: "Running",
		Matched: 5, Replayed: 3, Succeeded: 2, DeadAgain: 1, Conditions: []metav1.Condition{cond("Ready", "True", "JobCreated")}}
	setStatus(t, rp)

	create(t, &outboxv1.DeadLetterReplay{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "unpark"},
		Spec: outboxv1.DeadLetterReplaySpec{Consumer: &outboxv1.ConsumerTarget{Group: "billing",
			DatabaseSecretRef: outboxv1.SecretKeyRef{Name: "billing-db", Key: "dsn"}},
			Selector: outboxv1.ReplaySelector{ErrorCode: "retries_exhausted"}, Reason: "INC-2: handler fixed"},
	})

	pol := &outboxv1.RetentionPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hourly"},
		Spec:       outboxv1.RetentionPolicySpec{PipelineRef: outboxv1.PipelineReference{Name: "orders"}},
	}
	create(t, pol)
	pol.Status = outboxv1.RetentionPolicyStatus{ObservedGeneration: pol.Generation,
		LastRunTime: mtime(now.Add(-30*time.Minute - 30*time.Second)), NextRunTime: mtime(now.Add(45*time.Minute + 30*time.Second)),
		LastSentArchived: ptr(int64(10)), LastDeadArchived: ptr(int64(2)), LastRunError: "",
		Conditions: []metav1.Condition{cond("Ready", "True", "Scheduled"), cond("Degraded", "False", "LastRunSucceeded")}}
	setStatus(t, pol)
}

// rows folds each output line's whitespace, so assertions do not depend on padding.
func rows(out string) []string {
	var rs []string
	for _, l := range strings.Split(out, "\n") {
		rs = append(rs, strings.Join(strings.Fields(l), " "))
	}
	return rs
}

func hasRow(t *testing.T, out, want string) {
	t.Helper()
	for _, r := range rows(out) {
		if r == want {
			return
		}
	}
	t.Errorf("no output line reads %q; output:\n%s", want, out)
}

func TestStatusTable(t *testing.T) {
	ns := newNamespace(t)
	statusFixture(t, ns)
	out := plugin(t, "status", "-n", ns).mustSucceed(t).stdout

	hasRow(t, out, "PIPELINES")
	hasRow(t, out, "NAME READY WORKERS PENDING OLDEST RETRYING DEAD BROKER DOWN DEGRADED TABLE")
	hasRow(t, out, "billing False (SecretNotFound) - 0 - 0 0 - SecretNotFound public.billing_outbox")
	hasRow(t, out, "orders True 2/2 7 30m 3 1 2 for 5h BrokerUnavailable public.outbox_event")
	hasRow(t, out, "NAME TARGET PHASE DRY RUN MATCHED REPLAYED SUCCEEDED DEAD AGAIN READY AGE")
	if !strings.Contains(strings.Join(rows(out), "\n"), "fix-size orders Running false 5 3 2 1 True") {
		t.Errorf("replay row missing:\n%s", out)
	}
	if !strings.Contains(strings.Join(rows(out), "\n"), "unpark consumer billing - false 0 0 0 0 Unknown") {
		t.Errorf("consumer replay row missing:\n%s", out)
	}
	hasRow(t, out, "NAME PIPELINE READY SCHEDULE LAST RUN NEXT RUN LAST ARCHIVED LAST ERROR")
	hasRow(t, out, "hourly orders True 15 * * * * 30m ago in 45m sent 10, dead 2 -")
}

func TestStatusAllNamespacesAndEmpty(t *testing.T) {
	ns := newNamespace(t)
	statusFixture(t, ns)
	out := plugin(t, "status", "-A").mustSucceed(t).stdout
	hasRow(t, out, "NAMESPACE NAME READY WORKERS PENDING OLDEST RETRYING DEAD BROKER DOWN DEGRADED TABLE")
	hasRow(t, out, ns+" orders True 2/2 7 30m 3 1 2 for 5h BrokerUnavailable public.outbox_event")

	empty := newNamespace(t)
	out = plugin(t, "status", "-n", empty).mustSucceed(t).stdout
	for _, kind := range []string{"OutboxPipelines", "DeadLetterReplays", "RetentionPolicies"} {
		hasRow(t, out, "No "+kind+" in namespace "+empty+".")
	}
}

func TestStatusMarksStaleStatus(t *testing.T) {
	ns := newNamespace(t)
	p := pipeline(t, ns, "orders", "db", "")
	p.Status = outboxv1.OutboxPipelineStatus{ObservedGeneration: p.Generation, Conditions: []metav1.Condition{cond("Ready", "True", "Ready")}}
	setStatus(t, p)
	p.Spec.Paused = true // a new generation the operator has not seen
	if err := kube.Update(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	out := plugin(t, "status", "-n", ns).mustSucceed(t).stdout
	if !strings.Contains(out, "True (stale)") {
		t.Errorf("a status older than the spec is not marked:\n%s", out)
	}
}
