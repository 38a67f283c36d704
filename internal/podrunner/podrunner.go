// Package podrunner starts a container of a pod template as a local process. There is
// no kubelet in the demo stack or the end-to-end tests, so this is how the relay
// Deployment that the operator rendered actually runs: same command, args and env,
// with secretKeyRef / configMapKeyRef / fieldRef values resolved from the API server
// and resourceFieldRef values from the container's own resources.
package podrunner

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Pod identifies the pod the process pretends to be (for fieldRef env vars).
type Pod struct {
	Name      string
	Namespace string
}

// Env resolves a container's environment the way the kubelet would for the subset the
// operator uses: literal values, secretKeyRef, configMapKeyRef, fieldRef
// metadata.name / metadata.namespace, and resourceFieldRef to the container's own
// requests and limits. Anything else is an error, never a silent gap.
func Env(ctx context.Context, c client.Reader, pod Pod, ctr corev1.Container) ([]string, error) {
	var env []string
	for _, e := range ctr.Env {
		v, err := value(ctx, c, pod, ctr, e)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		env = append(env, e.Name+"="+v)
	}
	return env, nil
}

func value(ctx context.Context, c client.Reader, pod Pod, ctr corev1.Container, e corev1.EnvVar) (string, error) {
	src := e.ValueFrom
	switch {
	case src == nil:
		return e.Value, nil
	case src.SecretKeyRef != nil:
		var s corev1.Secret
		if err := c.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: src.SecretKeyRef.Name}, &s); err != nil {
			return "", fmt.Errorf("secret %s: %w", src.SecretKeyRef.Name, err)
		}
		v, ok := s.Data[src.SecretKeyRef.Key]
		if !ok {
			return "", fmt.Errorf("secret %s has no key %s", src.SecretKeyRef.Name, src.SecretKeyRef.Key)
		}
		return string(v), nil
	case src.ConfigMapKeyRef != nil:
		var cm corev1.ConfigMap
		if err := c.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: src.ConfigMapKeyRef.Name}, &cm); err != nil {
			return "", fmt.Errorf("configmap %s: %w", src.ConfigMapKeyRef.Name, err)
		}
		v, ok := cm.Data[src.ConfigMapKeyRef.Key]
		if !ok {
			return "", fmt.Errorf("configmap %s has no key %s", src.ConfigMapKeyRef.Name, src.ConfigMapKeyRef.Key)
		}
		return v, nil
	case src.FieldRef != nil:
		switch src.FieldRef.FieldPath {
		case "metadata.name":
			return pod.Name, nil
		case "metadata.namespace":
			return pod.Namespace, nil
		}
		return "", fmt.Errorf("fieldRef %s is not supported locally", src.FieldRef.FieldPath)
	case src.ResourceFieldRef != nil:
		return resourceValue(ctr, src.ResourceFieldRef)
	}
	return "", fmt.Errorf("unsupported valueFrom")
}

// resourceValue is a resourceFieldRef to the container's own requests or limits, in
// units of the divisor rounded up, as the kubelet computes it. An unset resource is an
// error here (the kubelet would substitute the node's allocatable amount).
func resourceValue(ctr corev1.Container, ref *corev1.ResourceFieldSelector) (string, error) {
	if ref.ContainerName != "" && ref.ContainerName != ctr.Name {
		return "", fmt.Errorf("resourceFieldRef to container %s is not supported locally", ref.ContainerName)
	}
	list, name, ok := ctr.Resources.Limits, ref.Resource, false
	if r, found := strings.CutPrefix(ref.Resource, "requests."); found {
		list, name = ctr.Resources.Requests, r
	} else {
		name, ok = strings.CutPrefix(ref.Resource, "limits.")
		if !ok {
			return "", fmt.Errorf("resourceFieldRef %s is not supported locally", ref.Resource)
		}
	}
	q, set := list[corev1.ResourceName(name)]
	if !set {
		return "", fmt.Errorf("resourceFieldRef %s: the container sets no %s", ref.Resource, ref.Resource)
	}
	div := ref.Divisor
	if div.IsZero() {
		div = resource.MustParse("1")
	}
	return strconv.FormatInt(int64(math.Ceil(float64(q.MilliValue())/float64(div.MilliValue()))), 10), nil
}

// Command builds the process for ctr: the image's binary (command[0], e.g.
// "/relayworker") is replaced by binDir/<basename>, args are kept, env is resolved.
// Extra env entries (e.g. local port overrides) are appended last and win.
func Command(ctx context.Context, c client.Reader, pod Pod, ctr corev1.Container, binDir string, out io.Writer, extraEnv ...string) (*exec.Cmd, error) {
	argv := append(append([]string{}, ctr.Command...), ctr.Args...)
	if len(argv) == 0 {
		return nil, fmt.Errorf("container %s has no command", ctr.Name)
	}
	env, err := Env(ctx, c, pod, ctr)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path.Join(binDir, path.Base(argv[0])), argv[1:]...)
	cmd.Env = append(append(os.Environ(), env...), extraEnv...)
	cmd.Stdout, cmd.Stderr = out, out
	return cmd, nil
}
