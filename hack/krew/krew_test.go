package main

// These tests check the manifest the way krew-index's CI and a user's krew do: with
// krew's own validate-krew-manifest, and by `krew install` of the archive this
// program built (krew verifies the sha256, unpacks bin and LICENSE); the installed
// binary then reports the stamped version. krew comes from the Go module proxy.

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

const krewModule = "sigs.k8s.io/krew@v0.4.3"

// krewManifest is the part of krew's Plugin type the tests read.
type krewManifest struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Version          string `json:"version"`
		Homepage         string `json:"homepage"`
		ShortDescription string `json:"shortDescription"`
		Platforms        []struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			URI    string `json:"uri"`
			SHA256 string `json:"sha256"`
			Bin    string `json:"bin"`
		} `json:"platforms"`
	} `json:"spec"`
}

func testOptions(t *testing.T, version string, platforms []platform) options {
	dir := t.TempDir()
	return options{version: version, platforms: platforms, root: filepath.Join("..", ".."), outDir: filepath.Join(dir, "release"),
		template: filepath.Join("..", "..", "plugins", "outbox.yaml.tmpl"), manifest: filepath.Join(dir, "plugins", "outbox.yaml"),
		uriBase: "https://example.com/releases"}
}

// The release's host-platform archive installs with krew and runs.
func TestReleaseInstallsWithKrew(t *testing.T) {
	host := platform{runtime.GOOS, runtime.GOARCH}
	o := testOptions(t, "v0.0.0-test.1", []platform{host})
	if err := release(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	m := readManifest(t, o.manifest)
	if m.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || m.Kind != "Plugin" || m.Metadata.Name != "outbox" ||
		m.Spec.Version != o.version || m.Spec.Homepage == "" || m.Spec.ShortDescription == "" || len(m.Spec.Platforms) != 1 {
		t.Fatalf("manifest %+v", m)
	}
	p := m.Spec.Platforms[0]
	archive := filepath.Join(o.outDir, "kubectl-outbox_v0.0.0-test.1_"+host.OS+"_"+host.Arch+".tar.gz")
	if sum, err := sha256File(archive); err != nil || p.SHA256 != sum {
		t.Fatalf("sha256 %q, the archive's is %q (%v)", p.SHA256, sum, err)
	}
	if want := "https://example.com/releases/v0.0.0-test.1/" + filepath.Base(archive); p.URI != want || p.Bin != "kubectl-outbox" ||
		p.Selector.MatchLabels["os"] != host.OS || p.Selector.MatchLabels["arch"] != host.Arch {
		t.Fatalf("platform %+v, want uri %s", p, want)
	}
	if names := tarNames(t, archive); !slices.Equal(names, []string{"kubectl-outbox", "LICENSE"}) {
		t.Fatalf("archive holds %v, want kubectl-outbox and LICENSE", names)
	}
	validate(t, o.manifest)
	// krew refuses the archive when the manifest's sha256 is not its own: the check
	// below can fail.
	tampered := filepath.Join(t.TempDir(), "outbox.yaml")
	b, _ := os.ReadFile(o.manifest)
	if err := os.WriteFile(tampered, []byte(strings.Replace(string(b), p.SHA256, strings.Repeat("0", 64), 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := krew(t.TempDir(), "install", "--manifest", tampered, "--archive", archive); err == nil {
		t.Fatalf("krew installed an archive whose sha256 the manifest does not name:\n%s", out)
	}
	root := t.TempDir()
	if out, err := krew(root, "install", "--manifest", o.manifest, "--archive", archive); err != nil {
		t.Fatalf("krew install: %v\n%s", err, out)
	}
	out, err := exec.Command(filepath.Join(root, "bin", "kubectl-outbox"), "version", "--client").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "plugin:   v0.0.0-test.1 (go") {
		t.Fatalf("the installed plugin's version --client: %v\n%s", err, out)
	}
}

// The manifest of every released platform passes krew's validation (no overlapping
// selectors, every platform one krew supports); building them all is make
// krew-manifest's job, too slow for a test.
func TestManifestOfEveryPlatformValidates(t *testing.T) {
	ps, err := parsePlatforms(defaultPlatforms)
	if err != nil {
		t.Fatal(err)
	}
	o := testOptions(t, "v1.2.3", ps)
	var arts []artefact
	for _, p := range ps {
		arts = append(arts, artefact{platform: p, URI: o.uriBase + "/x.tar.gz", SHA256: strings.Repeat("ab", 32), Bin: binName})
	}
	if err := renderManifest(o, arts); err != nil {
		t.Fatal(err)
	}
	if m := readManifest(t, o.manifest); len(m.Spec.Platforms) != 4 {
		t.Fatalf("%d platforms, want linux and darwin, amd64 and arm64", len(m.Spec.Platforms))
	}
	validate(t, o.manifest)
}

func TestFlagsRefuseWhatKrewCannotTake(t *testing.T) {
	for _, args := range [][]string{
		{}, {"-version", "1.2.3"}, {"-version", "3e9ec5e-dirty"}, {"-version", "v1.2"},
		{"-version", "v1.2.3", "-platforms", "linux"}, {"-version", "v1.2.3", "-platforms", "linux/amd64,/arm64"},
	} {
		if _, err := parseFlags(args); err == nil {
			t.Errorf("%v: accepted", args)
		}
	}
	o, err := parseFlags([]string{"-version", "v1.2.3-rc.1"})
	if err != nil || len(o.platforms) != 4 || o.platforms[3] != (platform{"darwin", "arm64"}) {
		t.Fatalf("defaults: %+v, %v", o, err)
	}
}

func readManifest(t *testing.T, path string) krewManifest {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m krewManifest
	if err := yaml.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return m
}

func tarNames(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return names
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
}

// validate runs krew's validate-krew-manifest (structure, platforms; installing is
// krew's part of the other test).
func validate(t *testing.T, manifest string) {
	t.Helper()
	out, err := exec.Command("go", "run", strings.Replace(krewModule, "@", "/cmd/validate-krew-manifest@", 1),
		"-manifest", manifest, "-skip-install").CombinedOutput()
	if err != nil {
		t.Fatalf("validate-krew-manifest: %v\n%s", err, out)
	}
}

// krew runs krew with its state in root, offline: no upgrade check, and install
// --manifest needs no index.
func krew(root string, args ...string) (string, error) {
	cmd := exec.Command("go", append([]string{"run", strings.Replace(krewModule, "@", "/cmd/krew@", 1)}, args...)...)
	cmd.Env = append(os.Environ(), "KREW_ROOT="+root, "KREW_NO_UPGRADE_CHECK=1")
	out, err := cmd.CombinedOutput()
	return string(out), err
}
