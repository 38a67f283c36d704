package plugin

import (
	"fmt"
	"io"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
	"github.com/outbox-operator/outbox-operator/internal/redact"
)

// view renders an inventory: one block per kind, each an aligned table; -A adds a
// NAMESPACE column.
type view struct {
	out   io.Writer
	all   bool
	now   time.Time
	where string
}

func (v view) render(inv inventory) error {
	for i, block := range []func(inventory) error{v.pipelines, v.replays, v.policies} {
		if i > 0 {
			fmt.Fprintln(v.out)
		}
		if err := block(inv); err != nil {
			return err
		}
	}
	return nil
}

// cols prefixes NAMESPACE under -A.
func (v view) cols(ns string, cells ...string) []string {
	if v.all {
		return append([]string{ns}, cells...)
	}
	return cells
}

func (v view) pipelines(inv inventory) error {
	if len(inv.pipelines) == 0 {
		fmt.Fprintf(v.out, "No OutboxPipelines in %s.\n", v.where)
		return nil
	}
	fmt.Fprintln(v.out, "PIPELINES")
	t := newTable(v.out, v.cols("NAMESPACE", "NAME", "READY", "WORKERS", "PENDING", "OLDEST", "RETRYING", "DEAD", "BROKER DOWN", "DEGRADED", "TABLE")...)
	for _, p := range inv.pipelines {
		st := p.Status
		pd := p.WithDefaults()
		t.row(v.cols(p.Namespace, p.Name, readiness(st.Conditions)+stale(p.Generation, st.ObservedGeneration), st.Workers,
			itoa(st.Pending), age(st.OldestPendingTime, v.now), itoa(st.Retrying), itoa(st.Dead),
			brokerDown(st, v.now), degraded(st.Conditions), pd.Spec.Source.Schema+"."+pd.Spec.Source.Table)...)
	}
	return t.flush()
}

// brokerDown is "2 for 5m" while workers report no reachable broker.
func brokerDown(st outboxv1.OutboxPipelineStatus, now time.Time) string {
	if st.BrokerUnavailableWorkers == 0 {
		return none
	}
	return fmt.Sprintf("%d for %s", st.BrokerUnavailableWorkers, age(st.BrokerUnavailableSince, now))
}

// degraded is the Degraded reason while it is True (or Unknown), else "False".
func degraded(conds []metav1.Condition) string {
	c := meta.FindStatusCondition(conds, outboxv1.ConditionDegraded)
	switch {
	case c == nil:
		return none
	case c.Status == metav1.ConditionFalse:
		return "False"
	}
	return c.Reason
}

func (v view) replays(inv inventory) error {
	if len(inv.replays) == 0 {
		fmt.Fprintf(v.out, "No DeadLetterReplays in %s.\n", v.where)
		return nil
	}
	fmt.Fprintln(v.out, "REPLAYS")
	t := newTable(v.out, v.cols("NAMESPACE", "NAME", "TARGET", "PHASE", "DRY RUN", "MATCHED", "REPLAYED", "SUCCEEDED", "DEAD AGAIN", "READY", "AGE")...)
	for _, r := range inv.replays {
		st := r.Status
		t.row(v.cols(r.Namespace, r.Name, replayTarget(&r), st.Phase, fmt.Sprint(r.Spec.DryRun),
			itoa(st.Matched), itoa(st.Replayed), itoa(st.Succeeded), itoa(st.DeadAgain),
			readiness(st.Conditions)+stale(r.Generation, st.ObservedGeneration), age(&r.CreationTimestamp, v.now))...)
	}
	return t.flush()
}

// replayTarget is the pipeline whose DEAD events are replayed, or "consumer GROUP"
// for a replay of a consumer group's parked messages.
func replayTarget(r *outboxv1.DeadLetterReplay) string {
	if r.Spec.Consumer != nil {
		return "consumer " + r.Spec.Consumer.Group
	}
	return r.Spec.PipelineRef.Name
}

func (v view) policies(inv inventory) error {
	if len(inv.policies) == 0 {
		fmt.Fprintf(v.out, "No RetentionPolicies in %s.\n", v.where)
		return nil
	}
	fmt.Fprintln(v.out, "RETENTION")
	t := newTable(v.out, v.cols("NAMESPACE", "NAME", "PIPELINE", "READY", "SCHEDULE", "LAST RUN", "NEXT RUN", "LAST ARCHIVED", "LAST ERROR")...)
	for _, rp := range inv.policies {
		st := rp.Status
		t.row(v.cols(rp.Namespace, rp.Name, rp.Spec.PipelineRef.Name, readiness(st.Conditions)+stale(rp.Generation, st.ObservedGeneration),
			rp.WithDefaults().Spec.Schedule, agoOrNone(st.LastRunTime, v.now), until(st.NextRunTime, v.now),
			archived(st), redact.Truncate(oneLine(st.LastRunError), 60))...)
	}
	return t.flush()
}

// agoOrNone is "5m ago".
func agoOrNone(t *metav1.Time, now time.Time) string {
	if a := age(t, now); a != none {
		return a + " ago"
	}
	return none
}

// archived is what the newest recorded run removed: "sent 10, dead 2".
func archived(st outboxv1.RetentionPolicyStatus) string {
	var parts []string
	if st.LastSentArchived != nil {
		parts = append(parts, fmt.Sprintf("sent %d", *st.LastSentArchived))
	}
	if st.LastDeadArchived != nil {
		parts = append(parts, fmt.Sprintf("dead %d", *st.LastDeadArchived))
	}
	return strings.Join(parts, ", ")
}
