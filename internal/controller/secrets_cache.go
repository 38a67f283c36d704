/*
Copyright 2026 The outbox-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package controller

// secretCache reads a referenced Secret only when it changed. The manager watches the
// metadata of Secrets (never their data: see keepSecretIdentity), and the values the
// operator last read are kept in memory with the resourceVersion they had. A read
// whose Secret still has that resourceVersion in the watch is answered from memory;
// any other (a changed Secret, one the watch has not seen yet, a missing one) is a GET
// from the API server, as every read was before. An idle pipeline then costs no
// Secret request, and a rotated Secret is read by the pass its watch event queues
// (secrets_watch.go). See docs/operations.md ("RBAC and Secrets") for what the watch
// needs and shows.

import (
	"context"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

type secretCache struct {
	// meta is the manager's cache, which holds Secrets as metadata only.
	meta client.Reader
	// api reads a Secret's data from the API server, uncached.
	api client.Reader

	mu     sync.Mutex
	values map[client.ObjectKey]*corev1.Secret
}

func newSecretCache(meta, api client.Reader) *secretCache {
	return &secretCache{meta: meta, api: api, values: map[client.ObjectKey]*corev1.Secret{}}
}

// Get reads the Secret at key into obj (a *corev1.Secret): from memory when the
// watched metadata still has the resourceVersion of the last read, else from the API
// server. Errors are the API server's (NotFound, Forbidden), as for an uncached read.
func (c *secretCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	s, ok := obj.(*corev1.Secret)
	if !ok {
		return fmt.Errorf("the Secret cache reads Secrets, not %T", obj)
	}
	if rv, watched := c.watchedVersion(ctx, key); watched {
		if kept := c.kept(key, rv); kept != nil {
			kept.DeepCopyInto(s)
			return nil
		}
	}
	if err := c.api.Get(ctx, key, s); err != nil {
		if apierrors.IsNotFound(err) {
			c.forget(key)
		}
		return err
	}
	c.keep(key, s)
	return nil
}

// List is not offered: the operator reads Secrets one by one, by reference.
func (c *secretCache) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("the Secret cache reads single Secrets only")
}

// watchedVersion is the Secret's resourceVersion in the metadata watch; false when the
// watch does not have it (not created, or created so recently that its event is still
// on the way: the GET then decides).
func (c *secretCache) watchedVersion(ctx context.Context, key client.ObjectKey) (string, bool) {
	m := secretMetadata()
	if err := c.meta.Get(ctx, key, m); err != nil {
		return "", false
	}
	return m.ResourceVersion, true
}

func (c *secretCache) kept(key client.ObjectKey, resourceVersion string) *corev1.Secret {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.values[key]; ok && s.ResourceVersion == resourceVersion {
		return s
	}
	return nil
}

// keep remembers what the reads need (UID, resourceVersion, data), nothing else.
func (c *secretCache) keep(key client.ObjectKey, s *corev1.Secret) {
	kept := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name, UID: s.UID,
		ResourceVersion: s.ResourceVersion}}
	kept.Data = make(map[string][]byte, len(s.Data))
	for k, v := range s.Data {
		kept.Data[k] = append([]byte(nil), v...)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.values[key] = kept
}

// forget drops a deleted Secret's values.
func (c *secretCache) forget(key client.ObjectKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.values, key)
}

// forgetIfGone drops the values of a Secret the watch no longer has (it was deleted).
func (c *secretCache) forgetIfGone(ctx context.Context, key client.ObjectKey) {
	if err := c.meta.Get(ctx, key, secretMetadata()); apierrors.IsNotFound(err) {
		c.forget(key)
	}
}

// secretMetadata is an empty Secret metadata object, as the metadata watch holds it.
func secretMetadata() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	return m
}

// keepSecretIdentity is the manager cache's transform for Secrets: an informer keeps a
// Secret's name, namespace, UID and resourceVersion and nothing else. Labels and
// annotations go too, because kubectl apply's last-applied-configuration annotation
// holds the whole Secret, data included. A full Secret would lose its data here as
// well (none is ever cached: NeverCached), so no informer ever holds a value.
func keepSecretIdentity(in any) (any, error) {
	switch o := in.(type) {
	case *metav1.PartialObjectMetadata:
		return &metav1.PartialObjectMetadata{TypeMeta: o.TypeMeta, ObjectMeta: identity(o.ObjectMeta)}, nil
	case *corev1.Secret:
		return &corev1.Secret{TypeMeta: o.TypeMeta, ObjectMeta: identity(o.ObjectMeta), Type: o.Type}, nil
	}
	return in, nil
}

func identity(m metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: m.Namespace, Name: m.Name, UID: m.UID, ResourceVersion: m.ResourceVersion,
		DeletionTimestamp: m.DeletionTimestamp}
}
