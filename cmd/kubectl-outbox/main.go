/*
Copyright 2026 The outbox-operator authors.

Licensed under the Apache License, Version 2.0.
*/

// Command kubectl-outbox is the `kubectl outbox` plugin: put it on PATH and kubectl
// finds it. docs/kubectl-outbox.md describes the commands.
package main

import (
	"os"

	"github.com/outbox-operator/outbox-operator/internal/cmd/plugin"
)

func main() {
	os.Exit(plugin.Main(os.Args[1:], os.Stdout, os.Stderr))
}
