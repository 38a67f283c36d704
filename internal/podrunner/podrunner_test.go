package podrunner

import (
	"context"
	"io"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestCommandResolvesEnvLikeTheKubelet(t *testing.T) {
	c := fake.NewClientBuilder().WithObjects(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db"}, Data: map[string][]byte{"dsn": []byte("postgres://x")}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "kafka"}, Data: map[string][]byte{"pw": []byte("p")}},
	).Build()
	pod := Pod{Name: "relay-0", Namespace: "ns"}
	ctr := corev1.Container{
		Name:    "relay",
		Command: []string{"/relayworker", "relay"},
		Args:    []string{"--batch-size", "10"},
		Env: []corev1.EnvVar{
			{Name: "OUTBOX_TABLE", Value: "outbox_event"},
			{Name: "OUTBOX_DSN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "dsn"}}},
			{Name: "RELAY_WORKER_ID", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		},
	}
	cmd, err := Command(context.Background(), c, pod, ctr, "/tmp/bin", io.Discard, "RELAY_HEALTH_ADDR=127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if cmd.Path != "/tmp/bin/relayworker" || !slices.Equal(cmd.Args[1:], []string{"relay", "--batch-size", "10"}) {
		t.Fatalf("argv = %s %v", cmd.Path, cmd.Args)
	}
	for _, want := range []string{"OUTBOX_TABLE=outbox_event", "OUTBOX_DSN=postgres://x", "RELAY_WORKER_ID=relay-0", "RELAY_HEALTH_ADDR=127.0.0.1:0"} {
		if !slices.Contains(cmd.Env, want) {
			t.Errorf("env lacks %s", want)
		}
	}

	// A secret of the same name in another namespace is not visible to this pod.
	ctr.Env = []corev1.EnvVar{{Name: "KAFKA_SASL_PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: "kafka"}, Key: "pw"}}}}
	if _, err := Command(context.Background(), c, pod, ctr, "/tmp/bin", io.Discard); err == nil || !strings.Contains(err.Error(), "KAFKA_SASL_PASSWORD") {
		t.Fatalf("cross-namespace secret: err = %v", err)
	}
}

func TestResourceFieldRefIsTheContainersOwnResource(t *testing.T) {
	ctr := corev1.Container{Name: "relay", Resources: corev1.ResourceRequirements{
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m")},
	}}
	ref := func(res, div string) *corev1.ResourceFieldSelector {
		s := &corev1.ResourceFieldSelector{ContainerName: "relay", Resource: res}
		if div != "" {
			s.Divisor = resource.MustParse(div)
		}
		return s
	}
	for _, c := range []struct {
		ref  *corev1.ResourceFieldSelector
		want string
	}{
		{ref("limits.memory", ""), "268435456"},
		{ref("limits.memory", "1Mi"), "256"},
		{ref("requests.cpu", "1m"), "50"},
		{ref("requests.cpu", ""), "1"}, // rounded up, as the kubelet does
	} {
		got, err := resourceValue(ctr, c.ref)
		if err != nil || got != c.want {
			t.Errorf("%s/%s = %q, %v; want %s", c.ref.Resource, c.ref.Divisor.String(), got, err, c.want)
		}
	}
	if _, err := resourceValue(ctr, ref("limits.cpu", "")); err == nil {
		t.Error("an unset limit resolved to a value")
	}
	if _, err := resourceValue(ctr, &corev1.ResourceFieldSelector{ContainerName: "other", Resource: "limits.memory"}); err == nil {
		t.Error("another container's resource resolved")
	}
}
