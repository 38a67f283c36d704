/*
Copyright 2026 The outbox-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package controller

// The Job of a DeadLetterReplay and the CronJob of a RetentionPolicy, with the worker
// arguments they run. Pure functions, tested in builders_test.go and builders_jobs_test.go.

import (
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
	"github.com/outbox-operator/outbox-operator/internal/contract"
)

// ReplayArgs are the `relayworker replay` arguments for a (defaulted) replay. Values
// use --flag=value so a value starting with '-' is never read as a flag.
func ReplayArgs(r *outboxv1.DeadLetterReplay) []string {
	s := r.Spec
	args := []string{"replay",
		contract.Arg(contract.FlagReplayID, ReplayID(r)),
		contract.Arg(contract.FlagReason, s.Reason),
		contract.Arg(contract.FlagRate, strconv.Itoa(int(s.Rate))),
		contract.Arg(contract.FlagCanarySize, strconv.Itoa(int(*s.CanarySize))),
		contract.Arg(contract.FlagMaxNewDeadPercent, strconv.Itoa(int(*s.MaxNewDeadPercent))),
	}
	if s.RequestedBy != "" {
		args = append(args, contract.Arg(contract.FlagRequestedBy, s.RequestedBy))
	}
	if s.DryRun {
		args = append(args, "--"+contract.FlagDryRun)
	}
	sel := s.Selector
	if len(sel.EventIDs) > 0 {
		args = append(args, contract.Arg(contract.FlagEventIDs, strings.Join(sel.EventIDs, ",")))
	}
	for _, kv := range [][2]string{
		{contract.FlagEventType, sel.EventType}, {contract.FlagAggregateType, sel.AggregateType},
		{contract.FlagAggregateID, sel.AggregateID}, {contract.FlagErrorCode, sel.ErrorCode},
		{contract.FlagDestination, sel.Destination},
	} {
		if kv[1] != "" {
			args = append(args, contract.Arg(kv[0], kv[1]))
		}
	}
	return append(args, timeArgs(sel, contract.FlagCreatedAfter, contract.FlagCreatedBefore)...)
}

// timeArgs renders the selector's time window (RFC 3339, UTC) under the given flags.
func timeArgs(sel outboxv1.ReplaySelector, afterFlag, beforeFlag string) []string {
	var args []string
	if sel.CreatedAfter != nil {
		args = append(args, contract.Arg(afterFlag, sel.CreatedAfter.UTC().Format(time.RFC3339)))
	}
	if sel.CreatedBefore != nil {
		args = append(args, contract.Arg(beforeFlag, sel.CreatedBefore.UTC().Format(time.RFC3339)))
	}
	return args
}

// ConsumerReplayArgs are the `relayworker inbox-replay` arguments for a (defaulted)
// replay with spec.consumer. The selector's time window becomes the parked-time
// window (first_seen_at); the replay id lets a retried pod find its request.
func ConsumerReplayArgs(r *outboxv1.DeadLetterReplay) []string {
	s, c := r.Spec, r.Spec.Consumer
	args := []string{contract.CommandInboxReplay,
		contract.Arg(contract.FlagGroup, c.Group),
		contract.Arg(contract.FlagSchema, c.Schema),
		contract.Arg(contract.FlagReplayID, ReplayID(r)),
		contract.Arg(contract.FlagReason, s.Reason),
		contract.Arg(contract.FlagRate, strconv.Itoa(int(s.Rate))),
		contract.Arg(contract.FlagLimit, strconv.Itoa(int(c.Limit))),
	}
	if s.RequestedBy != "" {
		args = append(args, contract.Arg(contract.FlagRequestedBy, s.RequestedBy))
	}
	sel := s.Selector
	if len(sel.EventIDs) > 0 {
		args = append(args, contract.Arg(contract.FlagEventIDs, strings.Join(sel.EventIDs, ",")))
	}
	for _, kv := range [][2]string{{contract.FlagEventType, sel.EventType}, {contract.FlagErrorCode, sel.ErrorCode}} {
		if kv[1] != "" {
			args = append(args, contract.Arg(kv[0], kv[1]))
		}
	}
	return append(args, timeArgs(sel, contract.FlagParkedAfter, contract.FlagParkedBefore)...)
}

// DesiredReplayJob renders the Job of a replay. Both arguments must carry defaults.
// `relayworker replay` hands DEAD rows back to the relay (original event_id) at the
// given rate and watches them settle; it never talks to Kafka, so its container gets
// only the database part of the worker contract (sourceEnv: the DSN as a
// secretKeyRef, schema, table, pipeline name, log level) and no broker env. The rest
// of the pod is the pipeline's, shared with the archive Job (pipelinePod): its
// ServiceAccount, resources, scheduling and pull secrets, and, when
// spec.sink.tls.caSecretRef is set, the Kafka CA volume, which replay does not read.
func DesiredReplayJob(r *outboxv1.DeadLetterReplay, p *outboxv1.OutboxPipeline, defaultImage string) *batchv1.Job {
	return replayJob(r, p.Name, pipelinePod(p, defaultImage).jobPodSpec(ReplayArgs(r), sourceEnv(p)))
}

// DesiredConsumerReplayJob renders the Job of a replay with spec.consumer (r must
// carry defaults). `relayworker inbox-replay` records a replay request in the
// consumer's database and waits for a running consumer of the group to serve it; its
// container gets only the consumer database's DSN, as a secretKeyRef (INBOX_DSN).
// There is no pipeline, so the pod runs with the manager's relay image, the default
// resources and the namespace's default ServiceAccount (without a token).
func DesiredConsumerReplayJob(r *outboxv1.DeadLetterReplay, defaultImage string) *batchv1.Job {
	envs := []corev1.EnvVar{secretEnv(contract.EnvInboxDSN, r.Spec.Consumer.DatabaseSecretRef)}
	return replayJob(r, r.Name, consumerPod(defaultImage).jobPodSpec(ConsumerReplayArgs(r), envs))
}

// replayJob is the Job of replay r running pod, labelled as a replay of instance (its
// pipeline, or the replay itself when it has none). A retry resumes: the workers are
// idempotent per replay id (`replay` by its audit row; a retried `inbox-replay` pod
// finds the request of the first and waits for it again, it never asks twice).
func replayJob(r *outboxv1.DeadLetterReplay, instance string, pod corev1.PodSpec) *batchv1.Job {
	labels := commonLabels(instance, "replay")
	labels["outbox.dev/replay"] = r.Name
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: ReplayJobName(r), Namespace: r.Namespace, Labels: labels},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](3),
			Template:     corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod},
		},
	}
}

// ArchivePolicyKey names a policy in the worker's run history (<table>_archive_runs):
// namespace/name, unique in the cluster even when policies share one database.
func ArchivePolicyKey(rp *outboxv1.RetentionPolicy) string { return rp.Namespace + "/" + rp.Name }

// ArchiveArgs are the `relayworker archive` arguments for a (defaulted) policy.
func ArchiveArgs(rp *outboxv1.RetentionPolicy) []string {
	s := rp.Spec
	args := []string{"archive",
		contract.Arg(contract.FlagPolicy, ArchivePolicyKey(rp)),
		contract.Arg(contract.FlagSentRetention, goDuration(s.SentRetention)),
		contract.Arg(contract.FlagDeadRetention, goDuration(s.DeadRetention)),
		contract.Arg(contract.FlagMode, strings.ToLower(s.Mode)),
		contract.Arg(contract.FlagBatchSize, strconv.Itoa(int(s.BatchSize))),
	}
	if s.ConsumerLogRetention != nil {
		args = append(args, contract.Arg(contract.FlagConsumerLogRetention, goDuration(s.ConsumerLogRetention)))
	}
	return args
}

// DesiredRetentionCronJob renders the CronJob of a retention policy. Both arguments
// must carry defaults.
func DesiredRetentionCronJob(rp *outboxv1.RetentionPolicy, p *outboxv1.OutboxPipeline, defaultImage string) *batchv1.CronJob {
	labels := commonLabels(p.Name, "retention")
	labels["outbox.dev/retention-policy"] = rp.Name
	return &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: RetentionCronJobName(rp), Namespace: rp.Namespace, Labels: labels},
		Spec: batchv1.CronJobSpec{
			Schedule:                   rp.Spec.Schedule,
			TimeZone:                   rp.Spec.TimeZone,
			Suspend:                    ptr.To(rp.Spec.Suspend),
			ConcurrencyPolicy:          batchv1.ForbidConcurrent,
			StartingDeadlineSeconds:    ptr.To[int64](300),
			SuccessfulJobsHistoryLimit: ptr.To[int32](3),
			FailedJobsHistoryLimit:     ptr.To[int32](3),
			JobTemplate: batchv1.JobTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: batchv1.JobSpec{
					BackoffLimit: ptr.To[int32](2),
					Template: corev1.PodTemplateSpec{
						ObjectMeta: metav1.ObjectMeta{Labels: labels},
						Spec:       pipelinePod(p, defaultImage).jobPodSpec(ArchiveArgs(rp), sourceEnv(p)),
					},
				},
			},
		},
	}
}
