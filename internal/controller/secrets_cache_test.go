package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The cache transform keeps a Secret's identity and drops everything that could carry
// its data: kubectl's last-applied-configuration annotation, labels, managedFields,
// and (for a full Secret, never cached) the data itself.
func TestKeepSecretIdentity(t *testing.T) {
	meta := metav1.ObjectMeta{
		Namespace: "shop", Name: "db", UID: "u-1", ResourceVersion: "42",
		Labels:        map[string]string{"team": "orders"},
		Annotations:   map[string]string{"kubectl.kubernetes.io/last-applied-configuration": `{"data":{"dsn":"c2VjcmV0"}}`},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
	}
	want := metav1.ObjectMeta{Namespace: "shop", Name: "db", UID: "u-1", ResourceVersion: "42"}
	for _, tc := range []struct {
		name string
		in   any
		meta func(any) metav1.ObjectMeta
	}{
		{"metadata", &metav1.PartialObjectMetadata{ObjectMeta: meta}, func(o any) metav1.ObjectMeta {
			return o.(*metav1.PartialObjectMetadata).ObjectMeta
		}},
		{"full Secret", &corev1.Secret{ObjectMeta: meta, Data: map[string][]byte{"dsn": []byte("secret")}}, func(o any) metav1.ObjectMeta {
			if d := o.(*corev1.Secret).Data; d != nil {
				t.Errorf("full Secret: data kept: %v", d)
			}
			return o.(*corev1.Secret).ObjectMeta
		}},
	} {
		out, err := keepSecretIdentity(tc.in)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got := tc.meta(out)
		if got.Namespace != want.Namespace || got.Name != want.Name || got.UID != want.UID || got.ResourceVersion != want.ResourceVersion ||
			got.Labels != nil || got.Annotations != nil || got.ManagedFields != nil {
			t.Errorf("%s: kept %+v, want only %+v", tc.name, got, want)
		}
	}
	other := &corev1.ConfigMap{ObjectMeta: meta}
	if out, _ := keepSecretIdentity(other); out != other {
		t.Errorf("another kind is passed through unchanged")
	}
}
