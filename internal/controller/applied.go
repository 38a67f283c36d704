/*
Copyright 2026 The outbox-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package controller

// appliedCache remembers, per child, what the operator last applied (a hash of the
// apply content) and the resourceVersion the API server answered with. A pass whose
// desired child hashes the same and whose live child (from the manager's cache) still
// has that resourceVersion has nothing to apply: skipping it saves a write request per
// child and pass (authentication, admission, audit) for hundreds of idle pipelines.
// Any change of the live object (a hand edit, a deletion, the Deployment controller's
// status) moves its resourceVersion, and the children are watched, so the edit queues
// the pass that applies again. The cache lives in memory: after a restart the first
// pass applies every child once and fills it.

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

type appliedCache struct {
	mu      sync.Mutex
	entries map[appliedKey]appliedEntry
}

// appliedKey names a child by kind, namespace and name.
type appliedKey struct {
	gvk       schema.GroupVersionKind
	namespace string
	name      string
}

type appliedEntry struct {
	owner           client.ObjectKey
	contentHash     string
	resourceVersion string
}

func newAppliedCache() *appliedCache { return &appliedCache{entries: map[appliedKey]appliedEntry{}} }

func keyOf(gvk schema.GroupVersionKind, obj client.Object) appliedKey {
	return appliedKey{gvk: gvk, namespace: obj.GetNamespace(), name: obj.GetName()}
}

// unchanged reports whether content was applied last and live is still what the
// server answered then.
func (c *appliedCache) unchanged(k appliedKey, contentHash string, live client.Object) bool {
	if c == nil || live == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[k]
	return ok && e.contentHash == contentHash && e.resourceVersion == live.GetResourceVersion()
}

// record notes an apply of content by owner and the resourceVersion it produced.
func (c *appliedCache) record(k appliedKey, owner client.ObjectKey, contentHash, resourceVersion string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries[k] = appliedEntry{owner: owner, contentHash: contentHash, resourceVersion: resourceVersion}
}

// forgetOwner drops the entries of a deleted owner's children.
func (c *appliedCache) forgetOwner(owner client.ObjectKey) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.entries {
		if e.owner == owner {
			delete(c.entries, k)
		}
	}
}

// contentHash fingerprints what is applied (encoding/json sorts map keys, so equal
// content hashes equal).
func contentHash(u *unstructured.Unstructured) (string, error) {
	b, err := json.Marshal(u.Object)
	if err != nil {
		return "", fmt.Errorf("hash %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}
