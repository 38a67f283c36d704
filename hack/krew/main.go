// Command krew builds the release archives of the kubectl-outbox plugin (one tar.gz
// per platform holding the binary and LICENSE) and renders the krew manifest,
// plugins/outbox.yaml, from plugins/outbox.yaml.tmpl with each archive's URL and
// sha256. `make krew-manifest VERSION=vX.Y.Z` runs it from the repository root;
// docs/kubectl-outbox.md says how a release publishes the result.
package main

import (
	"context"
	"fmt"
	"os"
)

func main() {
	o, err := parseFlags(os.Args[1:])
	if err == nil {
		err = release(context.Background(), o)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "krew:", err)
		os.Exit(1)
	}
}
