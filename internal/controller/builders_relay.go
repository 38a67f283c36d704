/*
Copyright 2026 The outbox-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package controller

// The relay workers' objects: ServiceAccount, metrics Service, PodDisruptionBudget and
// Deployment. Pure functions, tested in builders_test.go.

import (
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
	"github.com/outbox-operator/outbox-operator/internal/contract"
)

// DesiredServiceAccount is the pipeline's own ServiceAccount. Its token is never
// mounted: relay pods do not talk to the Kubernetes API.
func DesiredServiceAccount(p *outboxv1.OutboxPipeline) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{
			Name: RelayName(p), Namespace: p.Namespace, Labels: relayLabels(p),
		},
		AutomountServiceAccountToken: ptr.To(false),
	}
}

// DesiredService exposes the workers' /metrics for Prometheus. It is headless: a
// ServiceMonitor scrapes the endpoints behind it, never a virtual IP, and a cluster
// IP per pipeline would take one address of the cluster's Service range each (a /24,
// as envtest and small clusters have, is full after 253 pipelines, and the Service
// of the 254th is refused) and a set of kube-proxy rules on every node.
func DesiredService(p *outboxv1.OutboxPipeline) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name: RelayName(p), Namespace: p.Namespace, Labels: relayLabels(p),
		},
		Spec: corev1.ServiceSpec{
			Type:      corev1.ServiceTypeClusterIP,
			ClusterIP: corev1.ClusterIPNone,
			Selector:  workerSelector(p),
			Ports: []corev1.ServicePort{{
				Name: "metrics", Port: metricsPort, Protocol: corev1.ProtocolTCP,
				TargetPort: intstr.FromString("metrics"),
			}},
		},
	}
}

// DesiredPDB keeps at most one worker voluntarily evicted at a time. Unhealthy pods
// may always be evicted, so a crash-looping worker never blocks a node drain.
func DesiredPDB(p *outboxv1.OutboxPipeline) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{
			Name: RelayName(p), Namespace: p.Namespace, Labels: relayLabels(p),
		},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable:             ptr.To(intstr.FromInt32(1)),
			Selector:                   &metav1.LabelSelector{MatchLabels: workerSelector(p)},
			UnhealthyPodEvictionPolicy: ptr.To(policyv1.AlwaysAllow),
		},
	}
}

// DesiredDeployment renders the relay workers. p must carry defaults
// (OutboxPipeline.WithDefaults); secretHash fingerprints the referenced Secret keys.
func DesiredDeployment(p *outboxv1.OutboxPipeline, defaultImage, secretHash string) *appsv1.Deployment {
	wp := pipelinePod(p, defaultImage)
	pod := wp.podSpec(relayContainer(p, wp))
	if p.Spec.Source.Migrate {
		pod.InitContainers = []corev1.Container{migrateContainer(p, wp)}
	}
	pod.TerminationGracePeriodSeconds = ptr.To(int64(contract.TerminationGrace(p.Spec.Relay.Lease.Duration) / time.Second))
	pod.TopologySpreadConstraints = spreadOverNodes(p)
	replicas := *p.Spec.Relay.Replicas
	if p.Spec.Paused {
		replicas = 0
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Name: RelayName(p), Namespace: p.Namespace, Labels: relayLabels(p),
		},
		Spec: appsv1.DeploymentSpec{
			Replicas:             &replicas,
			RevisionHistoryLimit: ptr.To[int32](3),
			Selector:             &metav1.LabelSelector{MatchLabels: selectorLabels(p)},
			Strategy: appsv1.DeploymentStrategy{
				Type: appsv1.RollingUpdateDeploymentStrategyType,
				// Workers are stateless (claims are leases in the table): surge a new
				// one before stopping an old one, never drop below the desired count.
				RollingUpdate: &appsv1.RollingUpdateDeployment{
					MaxUnavailable: ptr.To(intstr.FromInt32(0)),
					MaxSurge:       ptr.To(intstr.FromInt32(1)),
				},
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: relayLabels(p), Annotations: relayPodAnnotations(p, secretHash)},
				Spec:       pod,
			},
		},
	}
}

// spreadOverNodes spreads the workers so one node failure does not stop the pipeline.
func spreadOverNodes(p *outboxv1.OutboxPipeline) []corev1.TopologySpreadConstraint {
	return []corev1.TopologySpreadConstraint{{
		MaxSkew:           1,
		TopologyKey:       "kubernetes.io/hostname",
		WhenUnsatisfiable: corev1.ScheduleAnyway,
		LabelSelector:     &metav1.LabelSelector{MatchLabels: workerSelector(p)},
	}}
}

// relayPodAnnotations are the user's pod annotations plus the Secret fingerprint that
// rolls the pods when a referenced credential changes.
func relayPodAnnotations(p *outboxv1.OutboxPipeline, secretHash string) map[string]string {
	ann := map[string]string{}
	for k, v := range p.Spec.PodAnnotations {
		ann[k] = v
	}
	ann[AnnotationSecretHash] = secretHash
	ann["kubectl.kubernetes.io/default-container"] = "relay"
	return ann
}

// relayEnv is the relay container's configuration, in the names of the worker
// contract (internal/contract).
func relayEnv(p *outboxv1.OutboxPipeline, resources corev1.ResourceRequirements) []corev1.EnvVar {
	r := p.Spec.Relay
	envs := sourceEnv(p)
	envs = append(envs, kafkaEnv(p)...)
	envs = append(envs,
		env(contract.EnvBatchSize, strconv.Itoa(int(r.BatchSize))),
		env(contract.EnvLease, goDuration(r.Lease)),
		env(contract.EnvPollInterval, goDuration(r.PollInterval)),
		env(contract.EnvMaxAttempts, strconv.Itoa(int(r.MaxAttempts))),
		env(contract.EnvMinBackoff, goDuration(r.MinBackoff)),
		env(contract.EnvMaxBackoff, goDuration(r.MaxBackoff)),
		env(contract.EnvUnknownTopicGrace, goDuration(r.UnknownTopicGrace)),
		corev1.EnvVar{Name: contract.EnvWorkerID, ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"},
		}},
		env(contract.EnvMetricsAddr, ":"+strconv.Itoa(metricsPort)),
		env(contract.EnvHealthAddr, ":"+strconv.Itoa(healthPort)),
	)
	envs = append(envs, sourceModeEnv(p)...)
	envs = append(envs, messageFormatEnv(p)...)
	envs = append(envs, tracingEnv(p)...)
	if _, limited := resources.Limits[corev1.ResourceMemory]; limited {
		// The relay runs with a high GOGC; the memory limit makes the collector work
		// harder near the container's limit instead of letting the pod be OOM-killed.
		envs = append(envs, corev1.EnvVar{Name: contract.EnvGoMemLimit, ValueFrom: &corev1.EnvVarSource{
			ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "relay", Resource: "limits.memory"},
		}})
	}
	return envs
}

// messageFormatEnv configures the CloudEvents format, with a ce_source naming the
// pipeline; nothing in the Native format (the worker's default), so upgrading the
// operator does not roll the pods of existing pipelines.
func messageFormatEnv(p *outboxv1.OutboxPipeline) []corev1.EnvVar {
	if p.Spec.Message.Format != outboxv1.MessageCloudEvents {
		return nil
	}
	return []corev1.EnvVar{
		env(contract.EnvMessageFormat, contract.FormatCloudEvents),
		env(contract.EnvCloudEventsSource, contract.CloudEventsSourceFor(p.Namespace, p.Name)),
	}
}

// tracingEnv points the relay's OTLP exporter at spec.monitoring.tracing.otlpEndpoint
// (docs/monitoring.md, "Tracing"); nothing when it is empty, so the worker installs
// no tracer and existing pods are not rolled.
func tracingEnv(p *outboxv1.OutboxPipeline) []corev1.EnvVar {
	endpoint := p.Spec.Monitoring.Tracing.OTLPEndpoint
	if endpoint == "" {
		return nil
	}
	return []corev1.EnvVar{
		env(contract.EnvOTLPEndpoint, endpoint),
		env(contract.EnvOTLPProtocol, contract.OTLPProtocol),
	}
}

// sourceModeEnv configures logical-replication mode; nothing in Polling mode (the
// worker's default).
func sourceModeEnv(p *outboxv1.OutboxPipeline) []corev1.EnvVar {
	if !p.Spec.LogicalReplication() {
		return nil
	}
	slot := ReplicationSlot(p)
	return []corev1.EnvVar{
		env(contract.EnvSourceMode, contract.SourceLogicalReplication),
		env(contract.EnvSlot, slot),
		env(contract.EnvPublication, slot),
		env(contract.EnvHandoverAfter, goDuration(p.Spec.Relay.CDCHandoverAfter)),
		env(contract.EnvCreateSlot, "false"), // the operator makes and drops it (outboxpipeline_slot.go)
	}
}

// ReplicationSlot names a pipeline's replication slot and publication: derived from
// namespace and name, so two pipelines on one PostgreSQL server never share one.
func ReplicationSlot(p *outboxv1.OutboxPipeline) string {
	return contract.ReplicationName(p.Namespace, p.Name)
}

// relayContainer runs `relayworker relay` with its metrics and health ports.
func relayContainer(p *outboxv1.OutboxPipeline, wp workerPod) corev1.Container {
	probe := func(path string, period int32) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromString("health")}},
			PeriodSeconds: period, TimeoutSeconds: 3, FailureThreshold: 3,
		}
	}
	c := wp.container("relay", []string{"relay"}, relayEnv(p, wp.resources))
	c.Ports = []corev1.ContainerPort{
		{Name: "metrics", ContainerPort: metricsPort, Protocol: corev1.ProtocolTCP},
		{Name: "health", ContainerPort: healthPort, Protocol: corev1.ProtocolTCP},
	}
	c.LivenessProbe, c.ReadinessProbe = probe("/healthz", 10), probe("/readyz", 5)
	return c
}

// migrateContainer runs `relayworker migrate` before the relay (spec.source.migrate).
// It talks to the database only, so it mounts /tmp alone, not the Kafka CA.
func migrateContainer(p *outboxv1.OutboxPipeline, wp workerPod) corev1.Container {
	c := wp.container("migrate", migrateArgs(p.Spec.Source), sourceEnv(p))
	_, tmp := tmpVolume()
	c.VolumeMounts = []corev1.VolumeMount{tmp}
	return c
}

// migrateArgs are the migrate command's arguments. They always name the contract, so
// a missing table is created as the spec says (migrate's own default is v2): v1 gets
// --contract=v1 (creates or keeps a v1 table, refuses a v2 one with one line the init
// container exits with); v2 gets the spec's shard count when it names one (creates a
// v2 table or upgrades a v1 one, and refuses a shard count change on a table with
// rows). Without one the migrate keeps an existing table's count: a default rendered
// here would tell a table made with an older default to change, and be refused.
func migrateArgs(s outboxv1.PostgresSource) []string {
	if !s.V2() {
		return []string{contract.CommandMigrate, contract.Arg(contract.FlagContract, string(outboxv1.ContractV1))}
	}
	args := []string{contract.CommandMigrate, contract.Arg(contract.FlagContract, string(outboxv1.ContractV2))}
	if s.Shards == 0 {
		return args
	}
	return append(args, contract.Arg(contract.FlagShards, strconv.Itoa(int(s.Shards))))
}
