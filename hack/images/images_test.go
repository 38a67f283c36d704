package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"debug/elf"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

const repoRoot = "../.."

var (
	buildOnce sync.Once
	builtDir  string
	buildErr  error
)

// built builds every image once per test binary and returns the directory of the tarballs.
func built(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		builtDir, buildErr = os.MkdirTemp("", "outbox-images-test-")
		if buildErr != nil {
			return
		}
		root, _ := filepath.Abs(repoRoot)
		_, buildErr = Build(Options{Root: root, Out: builtDir, Arch: archForTest()}, Images)
	})
	if buildErr != nil {
		t.Fatalf("build images: %v", buildErr)
	}
	return builtDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if builtDir != "" {
		os.RemoveAll(builtDir)
	}
	os.Exit(code)
}

// stage is one FROM ... AS name stage of the Dockerfile.
type stage struct {
	name, from string
	copies     [][3]string // --from, src, dst
	user       string
	entrypoint []string
	expose     []string
	runs       []string
}

// parseDockerfile understands the subset of Dockerfile syntax the repository's file
// uses: line continuations, comments, FROM/COPY/USER/EXPOSE/RUN and exec-form ENTRYPOINT.
func parseDockerfile(t *testing.T, path string) []stage {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	var cur strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(l, "#") || (l == "" && cur.Len() == 0) {
			continue
		}
		if strings.HasSuffix(l, "\\") {
			cur.WriteString(strings.TrimSuffix(l, "\\") + " ")
			continue
		}
		cur.WriteString(l)
		lines = append(lines, cur.String())
		cur.Reset()
	}
	var stages []stage
	for _, l := range lines {
		if l == "" {
			continue
		}
		instr, rest, _ := strings.Cut(l, " ")
		rest = strings.TrimSpace(rest)
		f := strings.Fields(rest)
		if strings.ToUpper(instr) == "FROM" {
			s := stage{from: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				s.name = f[2]
			}
			stages = append(stages, s)
			continue
		}
		if len(stages) == 0 {
			continue // ARG before FROM
		}
		s := &stages[len(stages)-1]
		switch strings.ToUpper(instr) {
		case "COPY":
			from := ""
			if strings.HasPrefix(f[0], "--from=") {
				from, f = strings.TrimPrefix(f[0], "--from="), f[1:]
			}
			for _, src := range f[:len(f)-1] {
				s.copies = append(s.copies, [3]string{from, src, f[len(f)-1]})
			}
		case "USER":
			s.user = rest
		case "EXPOSE":
			for _, p := range f {
				if !strings.Contains(p, "/") {
					p += "/tcp"
				}
				s.expose = append(s.expose, p)
			}
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(rest), &s.entrypoint); err != nil {
				t.Fatalf("ENTRYPOINT %s of stage %s is not exec form: %v", rest, s.name, err)
			}
		case "RUN":
			s.runs = append(s.runs, rest)
		}
	}
	return stages
}

// TestDockerfileAgrees checks that every final stage of the Dockerfile and the image
// builder's table describe the same image: binary path, entrypoint, user, ports, and a
// builder stage that copies and builds the same package.
func TestDockerfileAgrees(t *testing.T) {
	stages := parseDockerfile(t, filepath.Join(repoRoot, "Dockerfile"))
	if len(stages) == 0 {
		t.Fatal("no stages in the Dockerfile")
	}
	if last := stages[len(stages)-1].name; last != "manager" {
		t.Errorf("last stage is %q, want manager (a plain `docker build .` gives the manager)", last)
	}
	byName := map[string]stage{}
	for _, s := range stages {
		byName[s.name] = s
	}
	builder, ok := byName["builder"]
	if !ok {
		t.Fatal("no builder stage")
	}
	goBuilds := map[string]string{} // /out/<name> -> package
	re := regexp.MustCompile(`go build -trimpath -ldflags='-s -w' -o (\S+) (\S+)`)
	for _, r := range builder.runs {
		for _, m := range re.FindAllStringSubmatch(r, -1) {
			goBuilds[m[1]] = m[2]
		}
	}
	var final []string
	for _, s := range stages {
		if s.name != "builder" {
			final = append(final, s.name)
		}
	}
	var table []string
	for _, im := range Images {
		table = append(table, im.Name)
	}
	sort.Strings(final)
	sort.Strings(table)
	if !slices.Equal(final, table) {
		t.Errorf("Dockerfile final stages %v, builder table %v", final, table)
	}
	for _, im := range Images {
		s, ok := byName[im.Name]
		if !ok {
			continue
		}
		t.Run(im.Name, func(t *testing.T) {
			if len(s.copies) != 1 || s.copies[0][0] != "builder" {
				t.Fatalf("stage copies %v, want exactly one COPY --from=builder", s.copies)
			}
			src, dst := s.copies[0][1], s.copies[0][2]
			if dst != im.Binary {
				t.Errorf("COPY destination %s, builder binary %s", dst, im.Binary)
			}
			if pkg := goBuilds[src]; pkg != im.Package {
				t.Errorf("builder stage builds %s from %q, table says %s (with -trimpath -ldflags='-s -w')", src, pkg, im.Package)
			}
			copied := false
			for _, c := range builder.copies {
				if c[0] == "" && strings.HasPrefix(strings.TrimPrefix(im.Package, "./")+"/", c[1]) {
					copied = true
				}
			}
			if !copied {
				t.Errorf("builder stage does not COPY the sources of %s", im.Package)
			}
			if s.user != im.User {
				t.Errorf("USER %q, builder %q", s.user, im.User)
			}
			if !slices.Equal(s.entrypoint, im.Entrypoint) {
				t.Errorf("ENTRYPOINT %q, builder %q", s.entrypoint, im.Entrypoint)
			}
			if !slices.Equal(sorted(s.expose), sorted(im.Ports)) {
				t.Errorf("EXPOSE %v, builder ports %v", s.expose, im.Ports)
			}
		})
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	return s
}

// layerEntry is one file of an image's layer.
type layerEntry struct {
	hdr  *tar.Header
	data []byte
}

func readImage(t *testing.T, path string) (*tarballImage, map[string]layerEntry) {
	t.Helper()
	img, err := tarball.ImageFromPath(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("%d layers, want 1 (empty base + the binary)", len(layers))
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	entries := map[string]layerEntry{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		entries[strings.TrimSuffix(strings.TrimPrefix(h.Name, "./"), "/")] = layerEntry{h, data}
	}
	m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(path) })
	if err != nil {
		t.Fatal(err)
	}
	var tags []string
	for _, d := range m {
		tags = append(tags, d.RepoTags...)
	}
	return &tarballImage{cfgEntrypoint: cf.Config.Entrypoint, cfgUser: cf.Config.User,
		ports: cf.Config.ExposedPorts, os: cf.OS, arch: cf.Architecture, tags: tags}, entries
}

type tarballImage struct {
	cfgEntrypoint []string
	cfgUser       string
	ports         map[string]struct{}
	os, arch      string
	tags          []string
}

// TestTarballs checks each built tarball: config, a single layer with only the static
// binary (root-owned, executable by 65532) and /tmp, no shell.
func TestTarballs(t *testing.T) {
	dir := built(t)
	for _, im := range Images {
		t.Run(im.Name, func(t *testing.T) {
			img, entries := readImage(t, filepath.Join(dir, im.Name+".tar"))
			if !slices.Equal(img.cfgEntrypoint, im.Entrypoint) {
				t.Errorf("Entrypoint %q, want %q", img.cfgEntrypoint, im.Entrypoint)
			}
			if img.cfgUser != NonRoot || im.User != NonRoot {
				t.Errorf("User %q (table %q), want %s", img.cfgUser, im.User, NonRoot)
			}
			var ports []string
			for p := range img.ports {
				ports = append(ports, p)
			}
			if !slices.Equal(sorted(ports), sorted(im.Ports)) {
				t.Errorf("ExposedPorts %v, want %v", ports, im.Ports)
			}
			if img.os != "linux" || img.arch != archForTest() {
				t.Errorf("platform %s/%s", img.os, img.arch)
			}
			if !slices.Equal(img.tags, []string{im.Ref}) && !slices.Equal(img.tags, []string{"index.docker.io/library/" + im.Ref}) {
				t.Errorf("RepoTags %v, want %s", img.tags, im.Ref)
			}
			for _, sh := range []string{"bin/sh", "bin/bash", "bin/busybox", "usr/bin/sh", "bin"} {
				if _, ok := entries[sh]; ok {
					t.Errorf("%s is in the layer; the image must have no shell", sh)
				}
			}
			var names []string
			for n := range entries {
				names = append(names, n)
			}
			want := []string{strings.TrimPrefix(im.Binary, "/"), "tmp"}
			if !slices.Equal(sorted(names), sorted(want)) {
				t.Errorf("layer holds %v, want %v", sorted(names), sorted(want))
			}
			b, ok := entries[strings.TrimPrefix(im.Binary, "/")]
			if !ok {
				t.Fatalf("binary %s missing from the layer", im.Binary)
			}
			h := b.hdr
			if h.Typeflag != tar.TypeReg || h.Uid != 0 || h.Gid != 0 {
				t.Errorf("binary: type %c uid %d gid %d, want a regular file owned by 0:0", h.Typeflag, h.Uid, h.Gid)
			}
			// Owned by root, not root's group member 65532: "other" bits decide.
			if h.Mode&0o005 != 0o005 || h.Mode&0o022 != 0 || h.Mode&0o6000 != 0 {
				t.Errorf("binary mode %o: want readable and executable by others (65532), writable only by root, no setuid/setgid", h.Mode)
			}
			f, err := elf.NewFile(bytes.NewReader(b.data))
			if err != nil {
				t.Fatalf("binary is not ELF: %v", err)
			}
			for _, p := range f.Progs {
				if p.Type == elf.PT_INTERP {
					t.Error("binary has a dynamic loader (PT_INTERP); want a static binary (CGO_ENABLED=0)")
				}
			}
			if tm, ok := entries["tmp"]; !ok || tm.hdr.Typeflag != tar.TypeDir || tm.hdr.Mode&0o1777 != 0o1777 {
				t.Errorf("/tmp missing or not a 1777 directory")
			}
		})
	}
}

func archForTest() string { return runtime.GOARCH }
