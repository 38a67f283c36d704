/*
Copyright 2026 The outbox-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// parseWatchNamespaces reads --watch-namespaces: "" (the default) is every namespace
// (nil), anything else a comma-separated list of namespace names. A list that names
// nothing must not quietly become "every namespace" (",," or "shop,,billing" is a
// mistake in a values file or a script, and a manager meant for two tenants would
// then reconcile every tenant's pipelines), so an empty item is refused, as is a
// name no namespace can have. Repeated names count once.
func parseWatchNamespaces(value string) ([]string, error) {
	if value == "" {
		return nil, nil
	}
	var out []string
	seen := map[string]bool{}
	for i, item := range strings.Split(value, ",") {
		ns := strings.TrimSpace(item)
		if ns == "" {
			return nil, fmt.Errorf("--watch-namespaces %q: item %d is empty; separate namespace names with single commas, or leave the flag unset to watch every namespace", value, i+1)
		}
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return nil, fmt.Errorf("--watch-namespaces %q: %q is not a namespace name: %s", value, ns, strings.Join(errs, "; "))
		}
		if !seen[ns] {
			seen[ns] = true
			out = append(out, ns)
		}
	}
	return out, nil
}
