/*
Copyright 2026 The outbox-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package controller

// The one pod shape of every worker the operator runs: the relay Deployment's pods
// (and their migrate init container), the replay Jobs and the retention CronJob's
// Jobs. A workerPod is built once per object from what the worker works for (a
// pipeline, or the manager's defaults for a consumer replay); container and podSpec
// write the restricted security context, the command, the termination-message policy,
// the resources and the image in one place.

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
)

// workerPod is what a worker's pod takes from what it works for.
type workerPod struct {
	serviceAccount string // "" runs as the namespace's default ServiceAccount (no token either way)
	image          string
	pullPolicy     corev1.PullPolicy
	resources      corev1.ResourceRequirements
	nodeSelector   map[string]string
	tolerations    []corev1.Toleration
	priorityClass  string
	pullSecrets    []corev1.LocalObjectReference
	// volumes and mounts are the worker's own; podSpec and container add the
	// writable /tmp (tmpVolume: the root filesystem is read-only).
	volumes []corev1.Volume
	mounts  []corev1.VolumeMount
}

// pipelinePod: the pipeline's ServiceAccount, image (else defaultImage), resources
// (else defaultResources), scheduling and pull secrets, and its Kafka CA volume when
// it has one.
func pipelinePod(p *outboxv1.OutboxPipeline, defaultImage string) workerPod {
	resources := defaultResources()
	if p.Spec.Resources != nil {
		resources = *p.Spec.Resources.DeepCopy()
	}
	vols, mounts := kafkaVolumes(p)
	return workerPod{
		serviceAccount: RelayName(p), image: workerImage(p.Spec.Image, defaultImage), pullPolicy: p.Spec.ImagePullPolicy,
		resources: resources, nodeSelector: p.Spec.NodeSelector, tolerations: p.Spec.Tolerations,
		priorityClass: p.Spec.PriorityClassName, pullSecrets: p.Spec.ImagePullSecrets, volumes: vols, mounts: mounts,
	}
}

// consumerPod: the manager's relay image and the default resources. A consumer replay
// only talks to the consumer's database, so it needs nothing of a pipeline.
func consumerPod(defaultImage string) workerPod {
	return workerPod{image: workerImage("", defaultImage), resources: defaultResources()}
}

// container runs `relayworker <args>` as name, with the pod's image, resources and
// mounts, restricted.
func (wp workerPod) container(name string, args []string, env []corev1.EnvVar) corev1.Container {
	_, tmp := tmpVolume()
	return corev1.Container{
		Name:                     name,
		Image:                    wp.image,
		ImagePullPolicy:          wp.pullPolicy,
		Command:                  []string{RelayBinary},
		Args:                     args,
		Env:                      env,
		Resources:                wp.resources,
		SecurityContext:          ContainerSecurityContext(),
		VolumeMounts:             append(slices.Clone(wp.mounts), tmp),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
}

// podSpec is the restricted pod spec running containers: no service-account token,
// no service links, UID 65532 with seccomp RuntimeDefault.
func (wp workerPod) podSpec(containers ...corev1.Container) corev1.PodSpec {
	tmp, _ := tmpVolume()
	return corev1.PodSpec{
		ServiceAccountName:           wp.serviceAccount,
		AutomountServiceAccountToken: ptr.To(false),
		EnableServiceLinks:           ptr.To(false),
		SecurityContext:              PodSecurityContext(),
		Containers:                   containers,
		Volumes:                      append(slices.Clone(wp.volumes), tmp),
		NodeSelector:                 wp.nodeSelector,
		Tolerations:                  wp.tolerations,
		PriorityClassName:            wp.priorityClass,
		ImagePullSecrets:             wp.pullSecrets,
	}
}

// jobPodSpec is the pod spec of a Job running `relayworker <args>`: never restarted in
// place (the Job's backoffLimit retries with a new pod), its container named after
// the command.
func (wp workerPod) jobPodSpec(args []string, env []corev1.EnvVar) corev1.PodSpec {
	spec := wp.podSpec(wp.container(args[0], args, env))
	spec.RestartPolicy = corev1.RestartPolicyNever
	return spec
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

// tmpVolume is the writable /tmp of every worker pod, and its mount.
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

// workerImage is the spec's image, else the manager's (--relay-image), else
// DefaultRelayImage.
func workerImage(specImage, defaultImage string) string {
	for _, img := range []string{specImage, defaultImage} {
		if img != "" {
			return img
		}
	}
	return DefaultRelayImage
}
