/*
Copyright 2026 The outbox-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package controller

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestMustReplace(t *testing.T) {
	svc := func(clusterIP string) *corev1.Service {
		return &corev1.Service{Spec: corev1.ServiceSpec{ClusterIP: clusterIP}}
	}
	for _, c := range []struct {
		name          string
		desired, live client.Object
		want          bool
	}{
		{"a Service with a cluster IP, headless wanted", svc(corev1.ClusterIPNone), svc("10.0.0.17"), true},
		{"a Service without an address yet, headless wanted", svc(corev1.ClusterIPNone), svc(""), true},
		{"a headless Service, headless wanted", svc(corev1.ClusterIPNone), svc(corev1.ClusterIPNone), false},
		{"a Service with a cluster IP, any address wanted", svc(""), svc("10.0.0.17"), false},
		{"another kind", &appsv1.Deployment{}, &appsv1.Deployment{}, false},
	} {
		if got := mustReplace(c.desired, c.live); got != c.want {
			t.Errorf("%s: mustReplace = %v, want %v", c.name, got, c.want)
		}
	}
}
