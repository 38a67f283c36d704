/*
Copyright 2026 The outbox-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package controller

// Applying the objects a custom resource owns. Every child goes through one loop:
// server-side apply under one field owner, forced, so after each pass a child holds
// what the builders say. A hand edit (replicas, image) or a deleted child is put back
// on the next pass, and every child kind is Owned(), so the edit itself queues that
// pass. An apply that changes nothing is a no-op on the API server (no write, no new
// resourceVersion), but still a request; with an appliedCache (applied.go) a child
// whose desired content and live resourceVersion are what the last apply left is not
// sent at all, so a steady state costs no requests.

import (
	"context"
	"fmt"
	"reflect"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/csaupgrade"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
)

// FieldOwner is the field manager of every write of the operator: the applies of
// children and the status updates of its own kinds.
const FieldOwner = "outbox-operator"

// childApplier applies the children of one owner.
type childApplier struct {
	// c writes, and reads owned kinds from the cache, which holds only objects
	// labelled managed-by=outbox-operator (CacheByObject).
	c client.Client
	// api reads what the cache cannot see: a same-named object without the label.
	api    client.Reader
	scheme *runtime.Scheme
	// applied, when set, skips applies that would change nothing (applied.go).
	applied *appliedCache
}

// apply server-side applies each desired child of owner, in order. On return each
// holds the object as the API server now has it, status included.
func (a childApplier) apply(ctx context.Context, owner client.Object, desired ...client.Object) error {
	for _, obj := range desired {
		if err := a.applyOne(ctx, owner, obj, false); err != nil {
			return err
		}
	}
	return nil
}

// createOnce applies desired only when it does not exist yet, and otherwise leaves
// the existing object as it is (desired then holds it). This is for Jobs: their pod
// template is immutable, and a replay's Job, once created, is the replay.
func (a childApplier) createOnce(ctx context.Context, owner, desired client.Object) error {
	return a.applyOne(ctx, owner, desired, true)
}

func (a childApplier) applyOne(ctx context.Context, owner, desired client.Object, keepExisting bool) error {
	gvk, err := apiutil.GVKForObject(desired, a.scheme)
	if err != nil {
		return fmt.Errorf("kind of %T: %w", desired, err)
	}
	if err := controllerutil.SetControllerReference(owner, desired, a.scheme); err != nil {
		return fmt.Errorf("set the owner of %s %s: %w", gvk.Kind, desired.GetName(), err)
	}
	live, err := a.lookup(ctx, gvk, client.ObjectKeyFromObject(desired))
	if err != nil {
		return err
	}
	if live != nil {
		if err := a.checkControlled(owner, live, gvk.Kind); err != nil {
			return err
		}
		if keepExisting {
			return copyObject(live, desired)
		}
		if mustReplace(desired, live) {
			if err := a.deleteForReplace(ctx, live, gvk.Kind); err != nil {
				return err
			}
			live = nil
		} else if err := a.upgradeFromUpdate(ctx, live, gvk.Kind); err != nil {
			return err
		}
	}
	return a.serverSideApply(ctx, gvk, desired, live)
}

// lookup returns the live object at key, or nil when there is none. A cache miss is
// asked of the API server: the object may exist without the managed-by label, which
// makes it someone else's.
func (a childApplier) lookup(ctx context.Context, gvk schema.GroupVersionKind, key client.ObjectKey) (client.Object, error) {
	o, err := a.scheme.New(gvk)
	if err != nil {
		return nil, fmt.Errorf("new %s: %w", gvk.Kind, err)
	}
	live, ok := o.(client.Object)
	if !ok {
		return nil, fmt.Errorf("%s is not an object with metadata", gvk.Kind)
	}
	err = a.c.Get(ctx, key, live)
	if apierrors.IsNotFound(err) {
		err = a.api.Get(ctx, key, live)
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("get %s %s: %w", gvk.Kind, key.Name, err)
	}
	return live, nil
}

// checkControlled refuses to take over an object that owner does not control: a
// forced apply would silently make it ours.
func (a childApplier) checkControlled(owner, live client.Object, kind string) error {
	if ref := metav1.GetControllerOf(live); ref != nil && ref.UID == owner.GetUID() {
		return nil
	}
	ownerKind := "owner"
	if gvk, err := apiutil.GVKForObject(owner, a.scheme); err == nil {
		ownerKind = gvk.Kind
	}
	return &refProblem{outboxv1.ReasonNameConflict, fmt.Sprintf(
		"a %s named %q already exists in namespace %q and is not controlled by this %s; delete or rename it",
		kind, live.GetName(), live.GetNamespace(), ownerKind)}
}

// upgradeFromUpdate hands the fields that operator versions before server-side apply
// owned through create/update (same field manager, operation Update) to this
// manager's Apply entry. Without it they stay owned forever, so a field the operator
// stopped setting, such as the old outbox.dev/desired-hash annotation, would never be
// removed. A no-op (no request) once done.
func (a childApplier) upgradeFromUpdate(ctx context.Context, live client.Object, kind string) error {
	patch, err := csaupgrade.UpgradeManagedFieldsPatch(live, sets.New(FieldOwner), FieldOwner)
	if err != nil {
		return fmt.Errorf("upgrade the managed fields of %s %s: %w", kind, live.GetName(), err)
	}
	if patch == nil {
		return nil
	}
	if err := a.c.Patch(ctx, live, client.RawPatch(types.JSONPatchType, patch)); err != nil {
		return fmt.Errorf("upgrade the managed fields of %s %s: %w", kind, live.GetName(), err)
	}
	return nil
}

// serverSideApply applies obj and decodes the server's answer back into it; when
// the applied cache says live already is what this apply would leave, obj gets live
// instead and nothing is sent.
func (a childApplier) serverSideApply(ctx context.Context, gvk schema.GroupVersionKind, obj, live client.Object) error {
	u, err := applyContent(obj, gvk)
	if err != nil {
		return err
	}
	// The owner reference is in the content, so the hash covers the owner too.
	owner := metav1.GetControllerOf(obj)
	hash, err := contentHash(u)
	if err != nil {
		return err
	}
	k := keyOf(gvk, obj)
	if a.applied.unchanged(k, hash, live) {
		return copyObject(live, obj)
	}
	if err := a.c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
		client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("apply %s %s: %w", gvk.Kind, obj.GetName(), err)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
		return fmt.Errorf("decode applied %s %s: %w", gvk.Kind, obj.GetName(), err)
	}
	if owner != nil {
		a.applied.record(k, client.ObjectKey{Namespace: obj.GetNamespace(), Name: owner.Name}, hash, obj.GetResourceVersion())
	}
	return nil
}

// applyContent is what is applied for a typed object built by the builders: its
// fields with apiVersion and kind, and without status. The converter leaves out what
// the builders left unset (nil pointers, omitempty zeros, the zero creationTimestamp),
// so the apply owns exactly the fields the operator decides and never contests a
// server default; status is not the operator's to set, and its zero counters would
// otherwise be sent as values.
func applyContent(obj client.Object, gvk schema.GroupVersionKind) (*unstructured.Unstructured, error) {
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("encode %s %s: %w", gvk.Kind, obj.GetName(), err)
	}
	delete(content, "status")
	u := &unstructured.Unstructured{Object: content}
	u.SetGroupVersionKind(gvk)
	return u, nil
}

// copyObject copies src into dst, two objects of one kind. Objects of one Go type
// are deep-copied directly: an idle pass copies every live child, and the round trip
// through unstructured content was a fifth of an idle manager's CPU at 500 pipelines
// (make bench-operator's profile).
func copyObject(src, dst client.Object) error {
	if d := reflect.ValueOf(dst); d.Kind() == reflect.Pointer && reflect.TypeOf(src) == d.Type() {
		d.Elem().Set(reflect.ValueOf(src.DeepCopyObject()).Elem())
		return nil
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(src)
	if err != nil {
		return fmt.Errorf("encode %s: %w", src.GetName(), err)
	}
	return runtime.DefaultUnstructuredConverter.FromUnstructured(content, dst)
}
