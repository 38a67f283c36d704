/*
Copyright 2026 The outbox-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package controllers

// The Job of a DeadLetterReplay and the CronJob of a RetentionPolicy, with the worker
// arguments they run. Pure functions, tested in builders_test.go.

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

// jobPodSpec is the restricted pod spec shared by replay and retention Jobs.
func jobPodSpec(p *outboxv1.OutboxPipeline, image string, args []string, envs []corev1.EnvVar) corev1.PodSpec {
	tv, tm := tmpVolume()
	vols, mounts := kafkaVolumes(p)
	vols = append(vols, tv)
	mounts = append(mounts, tm)
	resources := defaultResources()
	if p.Spec.Resources != nil {
		resources = *p.Spec.Resources.DeepCopy()
	}
	return corev1.PodSpec{
		RestartPolicy:                corev1.RestartPolicyNever,
		ServiceAccountName:           RelayName(p),
		AutomountServiceAccountToken: ptr.To(false),
		EnableServiceLinks:           ptr.To(false),
		SecurityContext:              PodSecurityContext(),
		NodeSelector:                 p.Spec.NodeSelector,
		Tolerations:                  p.Spec.Tolerations,
		PriorityClassName:            p.Spec.PriorityClassName,
		ImagePullSecrets:             p.Spec.ImagePullSecrets,
		Volumes:                      vols,
		Containers: []corev1.Container{{
			Name:                     args[0],
			Image:                    image,
			ImagePullPolicy:          p.Spec.ImagePullPolicy,
			Command:                  []string{RelayBinary},
			Args:                     args,
			Env:                      envs,
			Resources:                resources,
			SecurityContext:          ContainerSecurityContext(),
			VolumeMounts:             mounts,
			TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		}},
	}
}

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
	if sel.CreatedAfter != nil {
		args = append(args, contract.Arg(contract.FlagCreatedAfter, sel.CreatedAfter.UTC().Format(time.RFC3339)))
	}
	if sel.CreatedBefore != nil {
		args = append(args, contract.Arg(contract.FlagCreatedBefore, sel.CreatedBefore.UTC().Format(time.RFC3339)))
	}
	return args
}

// DesiredReplayJob renders the Job of a replay. Both arguments must carry defaults.
// `relayworker replay` hands DEAD rows back to the relay (original event_id) at the
// given rate and watches them settle; it never talks to Kafka, so its container gets
// only the database part of the worker contract (sourceEnv: the DSN as a
// secretKeyRef, schema, table, pipeline name, log level) and no broker env. The rest
// of the pod is the pipeline's, shared with the archive Job (jobPodSpec): its
// ServiceAccount, resources, scheduling and pull secrets, and, when
// spec.sink.tls.caSecretRef is set, the Kafka CA volume, which replay does not read.
func DesiredReplayJob(r *outboxv1.DeadLetterReplay, p *outboxv1.OutboxPipeline, defaultImage string) *batchv1.Job {
	labels := commonLabels(p.Name, "replay")
	labels["outbox.dev/replay"] = r.Name
	envs := sourceEnv(p)
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: ReplayJobName(r), Namespace: r.Namespace, Labels: labels},
		Spec: batchv1.JobSpec{
			// The worker is idempotent per replay id (audit row), so a retry resumes.
			BackoffLimit: ptr.To[int32](3),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       jobPodSpec(p, imageFor(p, defaultImage), ReplayArgs(r), envs),
			},
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
						Spec:       jobPodSpec(p, imageFor(p, defaultImage), ArchiveArgs(rp), sourceEnv(p)),
					},
				},
			},
		},
	}
}
