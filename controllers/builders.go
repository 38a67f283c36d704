/*
Copyright 2026 The outbox-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package controllers

// Pure functions that turn the custom resources into the Kubernetes objects the
// operator owns. They read nothing but their arguments, so they are tested alone
// (builders_test.go); the reconcilers only fetch inputs and apply the results.

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sort"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
)

const (
	// RelayBinary is the worker binary's path inside the relay image (see Dockerfile).
	RelayBinary = "/relayworker"
	// DefaultRelayImage is used when neither --relay-image/RELAY_IMAGE nor spec.image is set.
	DefaultRelayImage = "outbox-relayworker:dev"

	metricsPort = 8080
	healthPort  = 8081

	// Labels and annotations.
	LabelName      = "app.kubernetes.io/name"
	LabelInstance  = "app.kubernetes.io/instance"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelComponent = "app.kubernetes.io/component"
	LabelPartOf    = "app.kubernetes.io/part-of"
	ManagedBy      = "outbox-operator"
	RelayAppName   = "outbox-relay"

	// AnnotationSecretHash on a pod template changes when a referenced Secret key
	// changes, which rolls the pods.
	AnnotationSecretHash = "outbox.dev/secret-hash"
	// AnnotationDesiredHash on an owned object fingerprints what the operator last
	// applied; an equal hash means there is nothing to write.
	AnnotationDesiredHash = "outbox.dev/desired-hash"

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

func selectorLabels(p *outboxv1.OutboxPipeline) map[string]string {
	return map[string]string{LabelName: RelayAppName, LabelInstance: p.Name}
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

// PodSecurityContext is the restricted pod-level security context used for every pod.
func PodSecurityContext() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		RunAsUser:      ptr.To[int64](nonRootUID),
		RunAsGroup:     ptr.To[int64](nonRootUID),
		FSGroup:        ptr.To[int64](nonRootUID),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// ContainerSecurityContext is the restricted container-level security context.
func ContainerSecurityContext() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		RunAsNonRoot:             ptr.To(true),
		ReadOnlyRootFilesystem:   ptr.To(true),
		AllowPrivilegeEscalation: ptr.To(false),
		Privileged:               ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
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
		secretEnv("OUTBOX_DSN", p.Spec.Source.DSNSecretRef),
		env("OUTBOX_SCHEMA", p.Spec.Source.Schema),
		env("OUTBOX_TABLE", p.Spec.Source.Table),
		env("RELAY_PIPELINE", p.Name),
		env("RELAY_LOG_LEVEL", p.Spec.Relay.LogLevel),
	}
}

// kafkaEnv is the broker part of the worker contract.
func kafkaEnv(p *outboxv1.OutboxPipeline) []corev1.EnvVar {
	s := p.Spec.Sink
	out := []corev1.EnvVar{env("KAFKA_BROKERS", strings.Join(s.Brokers, ","))}
	if s.TLS != nil && s.TLS.Enabled {
		out = append(out, env("KAFKA_TLS", "true"))
		if s.TLS.CASecretRef != nil {
			out = append(out, env("KAFKA_TLS_CA_FILE", kafkaCADir+"/"+kafkaCAFile))
		}
	}
	if s.SASL != nil {
		out = append(out,
			env("KAFKA_SASL_MECHANISM", s.SASL.Mechanism),
			secretEnv("KAFKA_SASL_USERNAME", s.SASL.UsernameSecretRef),
			secretEnv("KAFKA_SASL_PASSWORD", s.SASL.PasswordSecretRef),
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

func tmpVolume() (corev1.Volume, corev1.VolumeMount) {
	return corev1.Volume{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
			SizeLimit: ptr.To(resource.MustParse("64Mi")),
		}}},
		corev1.VolumeMount{Name: "tmp", MountPath: "/tmp"}
}

func defaultResources() corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("50m"),
			corev1.ResourceMemory: resource.MustParse("64Mi"),
		},
		Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
	}
}

func imageFor(p *outboxv1.OutboxPipeline, defaultImage string) string {
	if p.Spec.Image != "" {
		return p.Spec.Image
	}
	if defaultImage != "" {
		return defaultImage
	}
	return DefaultRelayImage
}

// goDuration prints a duration the way the worker's flag package parses it.
func goDuration(d *metav1.Duration) string { return d.Duration.String() }

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

// DesiredService exposes the workers' /metrics for Prometheus.
func DesiredService(p *outboxv1.OutboxPipeline) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name: RelayName(p), Namespace: p.Namespace, Labels: relayLabels(p),
		},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: selectorLabels(p),
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
			Selector:                   &metav1.LabelSelector{MatchLabels: selectorLabels(p)},
			UnhealthyPodEvictionPolicy: ptr.To(policyv1.AlwaysAllow),
		},
	}
}

// DesiredDeployment renders the relay workers. p must carry defaults
// (OutboxPipeline.WithDefaults); secretHash fingerprints the referenced Secret keys.
func DesiredDeployment(p *outboxv1.OutboxPipeline, defaultImage, secretHash string) *appsv1.Deployment {
	r := p.Spec.Relay
	replicas := *r.Replicas
	if p.Spec.Paused {
		replicas = 0
	}
	podAnn := map[string]string{}
	for k, v := range p.Spec.PodAnnotations {
		podAnn[k] = v
	}
	podAnn[AnnotationSecretHash] = secretHash
	podAnn["kubectl.kubernetes.io/default-container"] = "relay"

	resources := defaultResources()
	if p.Spec.Resources != nil {
		resources = *p.Spec.Resources.DeepCopy()
	}
	vols, mounts := kafkaVolumes(p)
	tv, tm := tmpVolume()
	vols = append(vols, tv)
	mounts = append(mounts, tm)

	envs := sourceEnv(p)
	envs = append(envs, kafkaEnv(p)...)
	envs = append(envs,
		env("RELAY_BATCH_SIZE", strconv.Itoa(int(r.BatchSize))),
		env("RELAY_LEASE", goDuration(r.Lease)),
		env("RELAY_POLL_INTERVAL", goDuration(r.PollInterval)),
		env("RELAY_MAX_ATTEMPTS", strconv.Itoa(int(r.MaxAttempts))),
		env("RELAY_MIN_BACKOFF", goDuration(r.MinBackoff)),
		env("RELAY_MAX_BACKOFF", goDuration(r.MaxBackoff)),
		env("RELAY_UNKNOWN_TOPIC_GRACE", goDuration(r.UnknownTopicGrace)),
		corev1.EnvVar{Name: "RELAY_WORKER_ID", ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"},
		}},
		env("RELAY_METRICS_ADDR", ":"+strconv.Itoa(metricsPort)),
		env("RELAY_HEALTH_ADDR", ":"+strconv.Itoa(healthPort)),
	)
	image := imageFor(p, defaultImage)

	// A worker stops claiming on SIGTERM and finishes or releases its batch; give it
	// the lease plus slack so in-flight rows are marked rather than left to expire.
	grace := int64(r.Lease.Duration/time.Second) + 15
	if grace < 30 {
		grace = 30
	}

	relay := corev1.Container{
		Name:            "relay",
		Image:           image,
		ImagePullPolicy: p.Spec.ImagePullPolicy,
		Command:         []string{RelayBinary},
		Args:            []string{"relay"},
		Env:             envs,
		Ports: []corev1.ContainerPort{
			{Name: "metrics", ContainerPort: metricsPort, Protocol: corev1.ProtocolTCP},
			{Name: "health", ContainerPort: healthPort, Protocol: corev1.ProtocolTCP},
		},
		LivenessProbe: &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("health")}},
			PeriodSeconds:    10,
			TimeoutSeconds:   3,
			FailureThreshold: 3,
		},
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromString("health")}},
			PeriodSeconds:    5,
			TimeoutSeconds:   3,
			FailureThreshold: 3,
		},
		Resources:                resources,
		SecurityContext:          ContainerSecurityContext(),
		VolumeMounts:             mounts,
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
	var inits []corev1.Container
	if p.Spec.Source.Migrate {
		inits = append(inits, corev1.Container{
			Name:                     "migrate",
			Image:                    image,
			ImagePullPolicy:          p.Spec.ImagePullPolicy,
			Command:                  []string{RelayBinary},
			Args:                     []string{"migrate"},
			Env:                      sourceEnv(p),
			Resources:                resources,
			SecurityContext:          ContainerSecurityContext(),
			VolumeMounts:             []corev1.VolumeMount{tm},
			TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		})
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
				ObjectMeta: metav1.ObjectMeta{Labels: relayLabels(p), Annotations: podAnn},
				Spec: corev1.PodSpec{
					ServiceAccountName:            RelayName(p),
					AutomountServiceAccountToken:  ptr.To(false),
					EnableServiceLinks:            ptr.To(false),
					SecurityContext:               PodSecurityContext(),
					TerminationGracePeriodSeconds: &grace,
					InitContainers:                inits,
					Containers:                    []corev1.Container{relay},
					Volumes:                       vols,
					NodeSelector:                  p.Spec.NodeSelector,
					Tolerations:                   p.Spec.Tolerations,
					PriorityClassName:             p.Spec.PriorityClassName,
					ImagePullSecrets:              p.Spec.ImagePullSecrets,
					// Spread workers so one node failure does not stop the pipeline.
					TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
						MaxSkew:           1,
						TopologyKey:       "kubernetes.io/hostname",
						WhenUnsatisfiable: corev1.ScheduleAnyway,
						LabelSelector:     &metav1.LabelSelector{MatchLabels: selectorLabels(p)},
					}},
				},
			},
		},
	}
}

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
		"--replay-id=" + ReplayID(r),
		"--reason=" + s.Reason,
		"--rate=" + strconv.Itoa(int(s.Rate)),
		"--canary-size=" + strconv.Itoa(int(*s.CanarySize)),
		"--max-new-dead-percent=" + strconv.Itoa(int(*s.MaxNewDeadPercent)),
	}
	if s.RequestedBy != "" {
		args = append(args, "--requested-by="+s.RequestedBy)
	}
	if s.DryRun {
		args = append(args, "--dry-run")
	}
	sel := s.Selector
	if len(sel.EventIDs) > 0 {
		args = append(args, "--event-ids="+strings.Join(sel.EventIDs, ","))
	}
	for _, kv := range [][2]string{
		{"--event-type", sel.EventType}, {"--aggregate-type", sel.AggregateType},
		{"--aggregate-id", sel.AggregateID}, {"--error-code", sel.ErrorCode},
		{"--destination", sel.Destination},
	} {
		if kv[1] != "" {
			args = append(args, kv[0]+"="+kv[1])
		}
	}
	if sel.CreatedAfter != nil {
		args = append(args, "--created-after="+sel.CreatedAfter.UTC().Format(time.RFC3339))
	}
	if sel.CreatedBefore != nil {
		args = append(args, "--created-before="+sel.CreatedBefore.UTC().Format(time.RFC3339))
	}
	return args
}

// DesiredReplayJob renders the Job of a replay. Both arguments must carry defaults.
// `relayworker replay` hands DEAD rows back to the relay (original event_id) at the
// given rate and watches them settle; it never talks to Kafka, so the Job gets the
// database settings only.
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
		"--policy=" + ArchivePolicyKey(rp),
		"--sent-retention=" + goDuration(s.SentRetention),
		"--dead-retention=" + goDuration(s.DeadRetention),
		"--mode=" + strings.ToLower(s.Mode),
		"--batch-size=" + strconv.Itoa(int(s.BatchSize)),
	}
	if s.ConsumerLogRetention != nil {
		args = append(args, "--consumer-log-retention="+goDuration(s.ConsumerLogRetention))
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

// SecretRefs lists every Secret key a pipeline references, with the spec path used in
// messages.
func SecretRefs(p *outboxv1.OutboxPipeline) []NamedRef {
	refs := []NamedRef{{Path: "spec.source.dsnSecretRef", Ref: p.Spec.Source.DSNSecretRef}}
	if tls := p.Spec.Sink.TLS; tls != nil && tls.Enabled && tls.CASecretRef != nil {
		refs = append(refs, NamedRef{Path: "spec.sink.tls.caSecretRef", Ref: *tls.CASecretRef})
	}
	if s := p.Spec.Sink.SASL; s != nil {
		refs = append(refs,
			NamedRef{Path: "spec.sink.sasl.usernameSecretRef", Ref: s.UsernameSecretRef},
			NamedRef{Path: "spec.sink.sasl.passwordSecretRef", Ref: s.PasswordSecretRef})
	}
	return refs
}

// NamedRef is a Secret key reference with the spec path it came from.
type NamedRef struct {
	Path string
	Ref  outboxv1.SecretKeyRef
}

// SecretValues are the referenced Secret keys' values, with the UID of each Secret.
type SecretValues struct {
	Data map[outboxv1.SecretKeyRef][]byte
	// UIDs by Secret name: the keys of the fingerprint (see SecretHash).
	UIDs map[string]string
}

// SecretHash fingerprints the referenced values (name/key -> value) for the pod
// template annotation that rolls the workers when a credential changes. Only
// referenced keys count, so an unrelated key in a shared Secret does not roll them.
// Each value is an HMAC keyed with its Secret's UID: someone who can read Deployments
// but not Secrets cannot test password guesses against the annotation.
func SecretHash(v SecretValues) string {
	keys := make([]outboxv1.SecretKeyRef, 0, len(v.Data))
	for k := range v.Data {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].Name != keys[j].Name {
			return keys[i].Name < keys[j].Name
		}
		return keys[i].Key < keys[j].Key
	})
	h := sha256.New()
	for _, k := range keys {
		mac := hmac.New(sha256.New, []byte(v.UIDs[k.Name]))
		mac.Write(v.Data[k])
		h.Write([]byte(k.Name + "\x00" + k.Key + "\x00"))
		h.Write(mac.Sum(nil))
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// desiredHash fingerprints what the operator applies to an object (labels,
// annotations and spec-like content), ignoring server-side defaults.
func desiredHash(parts ...any) string {
	b, err := json.Marshal(parts)
	if err != nil {
		panic(err) // only plain API types are hashed
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:16]
}
