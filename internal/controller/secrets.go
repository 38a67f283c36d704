/*
Copyright 2026 The outbox-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package controller

// The Secret keys a pipeline references: which they are, reading them (only from the
// referencing object's own namespace, one by one, through the secretCache that reads
// a Secret again only when it changed), and the fingerprint of their values that
// rolls the workers when a credential changes.

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
)

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

// secretReader is how a reconciler reads Secrets: the shared secretCache SetupAll made,
// or, for a reconciler built by hand (tests), the uncached reader.
func secretReader(c *secretCache, api client.Reader) client.Reader {
	if c != nil {
		return c
	}
	return api
}

// readSecretRefs fetches every referenced Secret key from the object's OWN namespace
// with reader (secretReader). A missing or forbidden Secret, or a missing or empty
// key, is a *refProblem; other API errors are errors.
func readSecretRefs(ctx context.Context, reader client.Reader, namespace string, refs []NamedRef) (SecretValues, error) {
	secrets := map[string]*corev1.Secret{}
	values := SecretValues{Data: map[outboxv1.SecretKeyRef][]byte{}, UIDs: map[string]string{}}
	for _, nr := range refs {
		s, ok := secrets[nr.Ref.Name]
		if !ok {
			var err error
			if s, err = getSecret(ctx, reader, namespace, nr); err != nil {
				return values, err
			}
			secrets[nr.Ref.Name] = s
			values.UIDs[nr.Ref.Name] = string(s.UID)
		}
		v, ok := s.Data[nr.Ref.Key]
		if !ok || len(v) == 0 {
			return values, missingKey(s, nr, ok)
		}
		values.Data[nr.Ref] = v
	}
	return values, nil
}

func getSecret(ctx context.Context, reader client.Reader, namespace string, nr NamedRef) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	err := reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: nr.Ref.Name}, s)
	switch {
	case apierrors.IsNotFound(err):
		return nil, &refProblem{outboxv1.ReasonSecretNotFound, fmt.Sprintf(
			"Secret %q referenced by %s was not found in namespace %q; create it there (Secrets of other namespaces cannot be referenced)",
			nr.Ref.Name, nr.Path, namespace)}
	case apierrors.IsForbidden(err):
		return nil, &refProblem{outboxv1.ReasonSecretForbidden, fmt.Sprintf(
			"the operator may not read Secret %q referenced by %s in namespace %q; check the operator's RBAC",
			nr.Ref.Name, nr.Path, namespace)}
	case err != nil:
		return nil, fmt.Errorf("get Secret %s/%s: %w", namespace, nr.Ref.Name, err)
	}
	return s, nil
}

// missingKey names the keys the Secret does have, which is usually the fix.
func missingKey(s *corev1.Secret, nr NamedRef, present bool) *refProblem {
	keys := make([]string, 0, len(s.Data))
	for k := range s.Data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	what := "has no key"
	if present {
		what = "has an empty key"
	}
	return &refProblem{outboxv1.ReasonSecretKeyNotFound, fmt.Sprintf(
		"Secret %q %s %q (referenced by %s); keys present: [%s]",
		nr.Ref.Name, what, nr.Ref.Key, nr.Path, strings.Join(keys, ", "))}
}
