package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"text/template"
)

// release builds every platform's archive, then renders the manifest: the manifest
// is written only when every archive it names exists.
func release(ctx context.Context, o options) error {
	if err := os.MkdirAll(o.outDir, 0o755); err != nil {
		return err
	}
	var arts []artefact
	for _, p := range o.platforms {
		a, err := buildArchive(ctx, o, p)
		if err != nil {
			return err
		}
		arts = append(arts, a)
	}
	return renderManifest(o, arts)
}

// manifestData is what plugins/outbox.yaml.tmpl sees.
type manifestData struct {
	Version   string
	Platforms []artefact
}

func renderManifest(o options, arts []artefact) error {
	t, err := template.New(filepath.Base(o.template)).Option("missingkey=error").ParseFiles(o.template)
	if err != nil {
		return fmt.Errorf("manifest template: %w", err)
	}
	var b bytes.Buffer
	if err := t.Execute(&b, manifestData{Version: o.version, Platforms: arts}); err != nil {
		return fmt.Errorf("render %s: %w", o.template, err)
	}
	if err := os.MkdirAll(filepath.Dir(o.manifest), 0o755); err != nil {
		return err
	}
	return os.WriteFile(o.manifest, b.Bytes(), 0o644)
}
