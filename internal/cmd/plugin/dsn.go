package plugin

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
)

// dsnSource names where a DSN comes from, for messages: who references it ("pipeline
// orders (spec.source.dsnSecretRef)", "--consumer-db") and the Secret key. Messages
// name the Secret and key, never the value.
type dsnSource struct {
	owner string
	ns    string
	ref   outboxv1.SecretKeyRef
}

func (d dsnSource) String() string {
	return fmt.Sprintf("Secret %q key %q", d.ref.Name, d.ref.Key)
}

// readDSN reads the DSN with the user's own credentials: the plugin can see what the
// user may see, no more (the operator's RBAC is never borrowed).
func readDSN(ctx context.Context, c client.Reader, d dsnSource) (string, error) {
	var s corev1.Secret
	err := c.Get(ctx, client.ObjectKey{Namespace: d.ns, Name: d.ref.Name}, &s)
	switch {
	case apierrors.IsNotFound(err):
		return "", fmt.Errorf("%s: Secret %q not found in namespace %q", d.owner, d.ref.Name, d.ns)
	case apierrors.IsForbidden(err):
		return "", fmt.Errorf("%s: you may not read Secret %q in namespace %q (kubectl outbox reads it with your own credentials; it needs \"get\" on that Secret)",
			d.owner, d.ref.Name, d.ns)
	case err != nil:
		return "", fmt.Errorf("%s: read Secret %q in namespace %q: %w", d.owner, d.ref.Name, d.ns, err)
	}
	v, ok := s.Data[d.ref.Key]
	if !ok || len(v) == 0 {
		state := "has no key"
		if ok {
			state = "has an empty key"
		}
		return "", fmt.Errorf("%s: Secret %q %s %q (its keys: %s)", d.owner, d.ref.Name, state, d.ref.Key, keysOf(s.Data))
	}
	return string(v), nil
}

// keysOf lists a Secret's key names (never values) to show what was meant.
func keysOf(data map[string][]byte) string {
	if len(data) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return strings.Join(keys, ", ")
}

// parseSecretKey reads "SECRET/KEY" (the --consumer-db form).
func parseSecretKey(flag, v string) (outboxv1.SecretKeyRef, error) {
	name, key, ok := strings.Cut(v, "/")
	if !ok || name == "" || key == "" || strings.Contains(key, "/") {
		return outboxv1.SecretKeyRef{}, usagef("%s %q: want SECRET/KEY, e.g. billing-db/dsn", flag, v)
	}
	return outboxv1.SecretKeyRef{Name: name, Key: key}, nil
}
