/*
Copyright 2026 The outbox-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package controller

// The DeadLetterReplay's status: its phase and Ready condition, from the Job it runs
// (deadletterreplay_consumer.go adds what the consumer group's record says).

import (
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
)

// replayFinished: a finished replay is never reconciled again.
func replayFinished(st *outboxv1.DeadLetterReplayStatus) bool {
	return st.Phase == outboxv1.ReplaySucceeded || st.Phase == outboxv1.ReplayFailed
}

// markStarted records the Job; from status.startTime on the spec is immutable.
func markStarted(rp *outboxv1.DeadLetterReplay, st *outboxv1.DeadLetterReplayStatus, jobName string) {
	now := metav1.Now()
	st.StartTime = &now
	st.JobName = jobName
	st.ReplayID = ReplayID(rp)
	setCondition(&st.Conditions, rp.Generation, outboxv1.ConditionReady, metav1.ConditionTrue, outboxv1.ReasonJobCreated,
		fmt.Sprintf("Job %s started; the spec is now frozen", jobName))
}

// markJobMissing fails a replay whose Job was deleted before it finished.
func markJobMissing(rp *outboxv1.DeadLetterReplay, st *outboxv1.DeadLetterReplayStatus) {
	st.Phase = outboxv1.ReplayFailed
	now := metav1.Now()
	st.CompletionTime = &now
	setCondition(&st.Conditions, rp.Generation, outboxv1.ConditionReady, metav1.ConditionFalse, outboxv1.ReasonJobMissing,
		fmt.Sprintf("Job %s disappeared before it finished; check %s and create a new DeadLetterReplay if needed",
			st.JobName, replayRecord(rp, st)))
}

// mirrorJob sets the phase from the Job's conditions and activity.
func mirrorJob(rp *outboxv1.DeadLetterReplay, job *batchv1.Job, st *outboxv1.DeadLetterReplayStatus) {
	switch {
	case jobCondition(job, batchv1.JobComplete):
		st.Phase = outboxv1.ReplaySucceeded
		st.CompletionTime = job.Status.CompletionTime
		setCondition(&st.Conditions, rp.Generation, outboxv1.ConditionReady, metav1.ConditionTrue, outboxv1.ReasonCompleted, "replay finished")
	case jobCondition(job, batchv1.JobFailed):
		st.Phase = outboxv1.ReplayFailed
		now := metav1.Now()
		st.CompletionTime = &now
		setCondition(&st.Conditions, rp.Generation, outboxv1.ConditionReady, metav1.ConditionFalse, outboxv1.ReasonJobFailed,
			fmt.Sprintf("Job %s failed; see `kubectl logs job/%s` and %s", job.Name, job.Name, replayRecord(rp, st)))
	case job.Status.Active > 0 || job.Status.StartTime != nil:
		st.Phase = outboxv1.ReplayRunning
	}
}

// replayRecord says where the replay's record is, for messages.
func replayRecord(rp *outboxv1.DeadLetterReplay, st *outboxv1.DeadLetterReplayStatus) string {
	if rp.Spec.Consumer != nil {
		return fmt.Sprintf("the consumer database's message_consume_replay row with request_key %s", st.ReplayID)
	}
	return "the audit row " + st.ReplayID
}

func jobCondition(j *batchv1.Job, t batchv1.JobConditionType) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// setProgress derives the pace and the time left from the counts: replayed events per
// second since the start, and the rest of the matched events at that pace. Both are
// cleared once the replay has finished or before anything was replayed.
func setProgress(st *outboxv1.DeadLetterReplayStatus, replayedBefore int64, now time.Time) {
	if st.Replayed == replayedBefore && st.Replayed > 0 && !replayFinished(st) {
		return // no progress since the last pass: keep the figures, do not rewrite the status for the clock
	}
	st.ReplayedPerSecond, st.EstimatedTimeRemaining = 0, ""
	if st.StartTime == nil || st.Replayed <= 0 {
		return
	}
	elapsed := now.Sub(st.StartTime.Time).Seconds()
	if elapsed < 1 {
		return
	}
	rate := float64(st.Replayed) / elapsed
	st.ReplayedPerSecond = int64(rate + 0.5)
	if replayFinished(st) || st.Matched <= st.Replayed {
		return
	}
	left := time.Duration(float64(st.Matched-st.Replayed) / rate * float64(time.Second))
	st.EstimatedTimeRemaining = left.Round(time.Second).String()
}
