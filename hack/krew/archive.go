package main

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
)

const (
	binName     = "kubectl-outbox"
	versionVar  = "github.com/outbox-operator/outbox-operator/internal/buildinfo.version"
	pluginPkg   = "./cmd/kubectl-outbox"
	licenseFile = "LICENSE"
)

// artefact is one platform's archive, as the manifest names it.
type artefact struct {
	platform
	URI, SHA256, Bin string
	Path             string // the archive on disk
}

// buildArchive cross-compiles the plugin for p (static, CGO_ENABLED=0, the version
// stamped into internal/buildinfo) and packs it with LICENSE.
func buildArchive(ctx context.Context, o options, p platform) (artefact, error) {
	tmp, err := os.MkdirTemp("", "krew-build-")
	if err != nil {
		return artefact{}, err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, binName)
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w -X "+versionVar+"="+o.version, "-o", bin, pluginPkg)
	cmd.Dir = o.root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Arch)
	if out, err := cmd.CombinedOutput(); err != nil {
		return artefact{}, fmt.Errorf("go build %s for %s/%s: %w\n%s", pluginPkg, p.OS, p.Arch, err, out)
	}
	name := fmt.Sprintf("%s_%s_%s_%s.tar.gz", binName, o.version, p.OS, p.Arch)
	path := filepath.Join(o.outDir, name)
	files := []tarFile{{binName, bin, 0o755}, {licenseFile, filepath.Join(o.root, licenseFile), 0o644}}
	if err := writeTarGz(path, files); err != nil {
		return artefact{}, fmt.Errorf("archive %s: %w", path, err)
	}
	sum, err := sha256File(path)
	if err != nil {
		return artefact{}, err
	}
	return artefact{platform: p, URI: o.uriBase + "/" + o.version + "/" + name, SHA256: sum, Bin: binName, Path: path}, nil
}

// tarFile is one file of an archive: its name there, its source and mode.
type tarFile struct {
	name, src string
	mode      int64
}

func writeTarGz(path string, files []tarFile) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	for _, tf := range files {
		if err := addFile(tw, tf); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

func addFile(tw *tar.Writer, tf tarFile) error {
	b, err := os.ReadFile(tf.src)
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: tf.name, Mode: tf.mode, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	_, err = tw.Write(b)
	return err
}

func sha256File(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("sha256 of %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
