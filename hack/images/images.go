package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// NonRoot is the numeric user and group of every image (distroless' "nonroot"); the
// operator's pods run as this user (controller.PodSecurityContext).
const NonRoot = "65532:65532"

// Image is one image the builder writes; the Dockerfile's stage of the same name must
// agree with it (TestDockerfileAgrees).
type Image struct {
	Name       string   // Dockerfile stage and tarball name: bin/images/<Name>.tar
	Package    string   // Go package, relative to the repository root
	Binary     string   // absolute path of the binary inside the image
	Entrypoint []string // image config Entrypoint
	User       string   // image config User
	Ports      []string // image config ExposedPorts ("9092/tcp")
	Ref        string   // default reference written into the tarball's manifest
}

// Images is the table of images, in the order they are built.
var Images = []Image{
	{
		Name: "manager", Package: "./cmd/manager", Binary: "/manager",
		Entrypoint: []string{"/manager"}, User: NonRoot,
		Ref: "outbox-operator:dev",
	},
	{
		Name: "relayworker", Package: "./cmd/relayworker", Binary: "/relayworker",
		Entrypoint: []string{"/relayworker"}, User: NonRoot,
		Ref: "outbox-relayworker:dev",
	},
	{
		Name: "devbroker", Package: "./hack/devbroker", Binary: "/devbroker",
		Entrypoint: []string{"/devbroker", "--listen", ":9092"}, User: NonRoot,
		Ports: []string{"9092/tcp"},
		Ref:   "outbox-devbroker:dev",
	},
}

// ClusterImages are built only for the local one-node cluster (hack/cluster,
// `make cluster-up`). They have no Dockerfile stage: a real cluster pulls its own pause
// image, but no registry is reachable here.
var ClusterImages = []Image{
	{
		Name: "pause", Package: "./hack/cluster/pause", Binary: "/pause",
		Entrypoint: []string{"/pause"}, User: NonRoot,
		Ref: "outbox-pause:dev",
	},
}

// epoch is the timestamp of every file and of the image: the output depends only on
// the binaries.
var epoch = time.Unix(0, 0).UTC()

// Options are the builder's inputs.
type Options struct {
	Root   string            // repository root (the root Go module)
	Out    string            // output directory of the tarballs
	Arch   string            // GOARCH of the binaries and the image
	Refs   map[string]string // image name -> reference overriding Image.Ref
	CACert string            // optional CA bundle copied to /etc/ssl/certs/ca-certificates.crt
	Log    io.Writer
}

// Build compiles each image's binary and writes bin/images/<name>.tar (docker-save
// format, loadable by `ctr images import` and `podman load`). It returns the paths.
func Build(o Options, imgs []Image) ([]string, error) {
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, err
	}
	binDir, err := os.MkdirTemp("", "outbox-images-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(binDir)
	var caPEM []byte
	if o.CACert != "" {
		if caPEM, err = os.ReadFile(o.CACert); err != nil {
			return nil, err
		}
	}
	var out []string
	for _, im := range imgs {
		bin := filepath.Join(binDir, im.Name)
		if err := goBuild(o.Root, o.Arch, im.Package, bin); err != nil {
			return out, err
		}
		ref := im.Ref
		if r, ok := o.Refs[im.Name]; ok && r != "" {
			ref = r
		}
		dst := filepath.Join(o.Out, im.Name+".tar")
		if err := WriteImage(dst, ref, o.Arch, im, bin, caPEM); err != nil {
			return out, fmt.Errorf("%s: %w", im.Name, err)
		}
		if o.Log != nil {
			st, _ := os.Stat(dst)
			fmt.Fprintf(o.Log, "%-40s %-28s %6.1f MiB\n", dst, ref, float64(st.Size())/(1<<20))
		}
		out = append(out, dst)
	}
	return out, nil
}

// goBuild builds a static binary the way the Dockerfile's builder stage does.
func goBuild(root, arch, pkg, out string) error {
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch, "GOFLAGS=-buildvcs=false")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s: %w", pkg, err)
	}
	return nil
}

// WriteImage writes one image: an empty base plus a single layer holding the binary,
// an empty world-writable /tmp (the pods mount an emptyDir there) and, when given, a CA
// bundle.
func WriteImage(dst, ref, arch string, im Image, binPath string, caPEM []byte) error {
	bin, err := os.ReadFile(binPath)
	if err != nil {
		return err
	}
	layerTar, err := layerTar(im, bin, caPEM)
	if err != nil {
		return err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	})
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", arch
	cf.Created = v1.Time{Time: epoch}
	cf.Config = v1.Config{
		Entrypoint: im.Entrypoint,
		User:       im.User,
		WorkingDir: "/",
		Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		Labels:     map[string]string{"org.opencontainers.image.source": "https://github.com/outbox-operator/outbox-operator"},
	}
	if len(caPEM) > 0 {
		cf.Config.Env = append(cf.Config.Env, "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt")
	}
	if len(im.Ports) > 0 {
		cf.Config.ExposedPorts = map[string]struct{}{}
		for _, p := range im.Ports {
			cf.Config.ExposedPorts[p] = struct{}{}
		}
	}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		return err
	}
	tmp := dst + ".tmp"
	if err := tarball.WriteToFile(tmp, tag, img); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, dst)
}

// layerTar is the single layer: directories, then files, owned by root; the binary is
// 0755 so 65532 can execute but not modify it.
func layerTar(im Image, bin, caPEM []byte) ([]byte, error) {
	type file struct {
		mode int64
		data []byte
	}
	dirs := map[string]int64{"tmp": 0o1777}
	files := map[string]file{}
	add := func(p string, mode int64, data []byte) {
		p = path.Clean(p[1:])
		files[p] = file{mode, data}
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if _, ok := dirs[d]; !ok {
				dirs[d] = 0o755
			}
		}
	}
	add(im.Binary, 0o755, bin)
	if len(caPEM) > 0 {
		add("/etc/ssl/certs/ca-certificates.crt", 0o644, caPEM)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range sortedKeys(dirs) {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: dirs[d], ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
	}
	for _, p := range sortedKeys(files) {
		f := files[p]
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: p, Mode: f.mode, Size: int64(len(f.data)), ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
