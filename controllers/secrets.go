/*
Copyright 2026 The outbox-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package controllers

// Which Secret keys a pipeline references, and the fingerprint of their values that
// rolls the workers when a credential changes.

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"sort"

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
