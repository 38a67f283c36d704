/*
Copyright 2026 The outbox-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package controller

// Pure functions that turn the custom resources into the Kubernetes objects the
// operator owns. They read nothing but their arguments, so they are tested alone
// (builders_test.go); the reconcilers only fetch inputs and apply the results
// (apply.go, which also sets apiVersion/kind and the owner reference).

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
	"github.com/outbox-operator/outbox-operator/internal/contract"
)

const (
	// RelayBinary is the worker binary's path inside the relay image (see Dockerfile).
	RelayBinary = contract.Binary
	// DefaultRelayImage is used when neither --relay-image/RELAY_IMAGE nor spec.image is set.
	DefaultRelayImage = "outbox-relayworker:dev"

	metricsPort = contract.MetricsPort
	healthPort  = contract.HealthPort

	// Labels and annotations.
	LabelName      = "app.kubernetes.io/name"
	LabelInstance  = "app.kubernetes.io/instance"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelComponent = "app.kubernetes.io/component"
	LabelPartOf    = "app.kubernetes.io/part-of"
	ManagedBy      = "outbox-operator"
	RelayAppName   = "outbox-relay"

	// AnnotationSecretHash on a pod template changes when a referenced Secret key
	// changes, which rolls the pods (SecretHash).
	AnnotationSecretHash = "outbox.dev/secret-hash"

	kafkaCAVolume = "kafka-ca"
	kafkaCADir    = "/etc/outbox/kafka-ca"
	kafkaCAFile   = "ca.crt"
	nonRootUID    = 65532
)

// RelayName names the Deployment, ServiceAccount, Service and PodDisruptionBudget of a
// pipeline.
func RelayName(p *outboxv1.OutboxPipeline) string { return p.Name + "-relay" }

// ReplayJobName names the Job of a replay.
func ReplayJobName(r *outboxv1.DeadLetterReplay) string { return r.Name + "-replay" }

// RetentionCronJobName names the CronJob of a retention policy.
func RetentionCronJobName(r *outboxv1.RetentionPolicy) string { return r.Name + "-retention" }

// ReplayID is the id of a replay in the audit table: readable and unique across
// deletions and re-creations of the same name.
func ReplayID(r *outboxv1.DeadLetterReplay) string {
	return r.Namespace + "/" + r.Name + "/" + string(r.UID)
}

// selectorLabels is the relay Deployment's selector. It is immutable, and the replay
// and retention Job pods of the pipeline match it too (a ReplicaSet never adopts a
// pod another controller owns); whatever counts or routes to workers uses
// workerSelector instead.
func selectorLabels(p *outboxv1.OutboxPipeline) map[string]string {
	return map[string]string{LabelName: RelayAppName, LabelInstance: p.Name}
}

// workerSelector selects the relay worker pods only: the metrics Service, the
// PodDisruptionBudget and the topology spread would otherwise count a running replay
// or retention Job pod as a worker.
func workerSelector(p *outboxv1.OutboxPipeline) map[string]string {
	m := selectorLabels(p)
	m[LabelComponent] = "relay"
	return m
}

func commonLabels(instance, component string) map[string]string {
	return map[string]string{
		LabelName:      RelayAppName,
		LabelInstance:  instance,
		LabelManagedBy: ManagedBy,
		LabelComponent: component,
		LabelPartOf:    "outbox-operator",
	}
}

func relayLabels(p *outboxv1.OutboxPipeline) map[string]string {
	return commonLabels(p.Name, "relay")
}

func secretEnv(name string, ref outboxv1.SecretKeyRef) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: ref.Name},
		Key:                  ref.Key,
	}}}
}

func env(name, value string) corev1.EnvVar { return corev1.EnvVar{Name: name, Value: value} }

// sourceEnv is the database part of the worker contract (docs/worker-contract.md).
// The DSN only ever travels as a secretKeyRef.
func sourceEnv(p *outboxv1.OutboxPipeline) []corev1.EnvVar {
	return []corev1.EnvVar{
		secretEnv(contract.EnvDSN, p.Spec.Source.DSNSecretRef),
		env(contract.EnvSchema, p.Spec.Source.Schema),
		env(contract.EnvTable, p.Spec.Source.Table),
		env(contract.EnvPipeline, p.Name),
		env(contract.EnvLogLevel, p.Spec.Relay.LogLevel),
	}
}

// kafkaEnv is the broker part of the worker contract.
func kafkaEnv(p *outboxv1.OutboxPipeline) []corev1.EnvVar {
	s := p.Spec.Sink
	out := []corev1.EnvVar{env(contract.EnvBrokers, strings.Join(s.Brokers, ","))}
	if s.TLS != nil && s.TLS.Enabled {
		out = append(out, env(contract.EnvKafkaTLS, "true"))
		if s.TLS.CASecretRef != nil {
			out = append(out, env(contract.EnvKafkaTLSCAFile, kafkaCADir+"/"+kafkaCAFile))
		}
	}
	if s.SASL != nil {
		out = append(out,
			env(contract.EnvKafkaSASLMechanism, s.SASL.Mechanism),
			secretEnv(contract.EnvKafkaSASLUsername, s.SASL.UsernameSecretRef),
			secretEnv(contract.EnvKafkaSASLPassword, s.SASL.PasswordSecretRef),
		)
	}
	return out
}

func kafkaVolumes(p *outboxv1.OutboxPipeline) ([]corev1.Volume, []corev1.VolumeMount) {
	tls := p.Spec.Sink.TLS
	if tls == nil || !tls.Enabled || tls.CASecretRef == nil {
		return nil, nil
	}
	return []corev1.Volume{{
			Name: kafkaCAVolume,
			VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
				SecretName:  tls.CASecretRef.Name,
				Items:       []corev1.KeyToPath{{Key: tls.CASecretRef.Key, Path: kafkaCAFile}},
				DefaultMode: ptr.To[int32](0o440),
			}},
		}}, []corev1.VolumeMount{{
			Name: kafkaCAVolume, MountPath: kafkaCADir, ReadOnly: true,
		}}
}

// goDuration prints a duration the way the worker's flag package parses it.
func goDuration(d *metav1.Duration) string { return d.Duration.String() }
