package controller

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
)

func TestSetKstatusConditions(t *testing.T) {
	for _, tc := range []struct {
		name                         string
		readyStatus                  metav1.ConditionStatus
		readyReason                  string
		reconciling                  bool
		wantStalled, wantReconciling bool
	}{
		{"healthy", metav1.ConditionTrue, outboxv1.ReasonReady, false, false, false},
		{"rolling out", metav1.ConditionTrue, outboxv1.ReasonReady, true, false, true},
		{"workers starting: wait", metav1.ConditionFalse, outboxv1.ReasonWorkersNotReady, true, false, true},
		{"database down: wait", metav1.ConditionFalse, outboxv1.ReasonDatabaseUnreachable, false, false, false},
		{"missing Secret: act", metav1.ConditionFalse, outboxv1.ReasonSecretNotFound, false, true, false},
		{"stalled wins over reconciling", metav1.ConditionFalse, outboxv1.ReasonPipelineNotFound, true, true, false},
		{"replay failed", metav1.ConditionFalse, outboxv1.ReasonJobFailed, false, true, false},
		{"nobody took the request", metav1.ConditionFalse, outboxv1.ReasonNoConsumer, false, true, false},
		{"unsupported PostgreSQL: act", metav1.ConditionFalse, outboxv1.ReasonPostgresVersionUnsupported, false, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conds := []metav1.Condition{
				{Type: outboxv1.ConditionReady, Status: tc.readyStatus, Reason: tc.readyReason, Message: "m"},
				// Left over from an earlier pass: both must follow this pass's facts.
				{Type: outboxv1.ConditionStalled, Status: metav1.ConditionTrue, Reason: "Old"},
				{Type: outboxv1.ConditionReconciling, Status: metav1.ConditionTrue, Reason: "Old"},
			}
			setKstatusConditions(&conds, 3, tc.reconciling, "RollingOut", "rolling", "")
			stalled := meta.FindStatusCondition(conds, outboxv1.ConditionStalled)
			rec := meta.FindStatusCondition(conds, outboxv1.ConditionReconciling)
			if (stalled != nil) != tc.wantStalled || (rec != nil) != tc.wantReconciling {
				t.Fatalf("stalled %v reconciling %v, want %v %v", stalled, rec, tc.wantStalled, tc.wantReconciling)
			}
			if stalled != nil && (stalled.Reason != tc.readyReason || stalled.Message != "m" || stalled.ObservedGeneration != 3) {
				t.Errorf("Stalled %+v does not repeat Ready", stalled)
			}
			if rec != nil && rec.Reason != "RollingOut" {
				t.Errorf("Reconciling reason %q", rec.Reason)
			}
		})
	}
}

// TestMissingTableIsNotStalledWhenThePipelineMigratesIt: the migrate init container
// creates the table as the pods start, so a new pipeline is Reconciling, not Failed.
func TestMissingTableIsNotStalledWhenThePipelineMigratesIt(t *testing.T) {
	for _, migrates := range []bool{true, false} {
		st := &outboxv1.OutboxPipelineStatus{Conditions: []metav1.Condition{
			{Type: outboxv1.ConditionReady, Status: metav1.ConditionFalse, Reason: outboxv1.ReasonTableMissing},
			{Type: outboxv1.ConditionProgressing, Status: metav1.ConditionTrue, Reason: outboxv1.ReasonRollingOut},
		}}
		setPipelineKstatus(st, 1, migrates)
		stalled := meta.FindStatusCondition(st.Conditions, outboxv1.ConditionStalled) != nil
		rec := meta.FindStatusCondition(st.Conditions, outboxv1.ConditionReconciling) != nil
		if stalled == migrates || rec != migrates {
			t.Errorf("migrates=%v: stalled %v reconciling %v", migrates, stalled, rec)
		}
	}
}
