// Command images builds the operator's OCI images without a Docker engine or a base
// image: bin/images/{manager,relayworker,devbroker}.tar in the docker-save tarball
// format that `ctr -n k8s.io images import` and `podman load` accept (docs/images.md).
//
//	cd hack/images && go run . [-out ../../bin/images] [-arch amd64] [-manager-image outbox-operator:dev] ...
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

func main() {
	root := flag.String("root", "../..", "repository root (the root Go module)")
	out := flag.String("out", "../../bin/images", "output directory")
	arch := flag.String("arch", runtime.GOARCH, "GOARCH of the binaries and the images")
	only := flag.String("only", "", "comma-separated image names to build (default: all but the cluster-only pause)")
	ca := flag.String("ca-certs", "", "optional CA bundle to copy to /etc/ssl/certs/ca-certificates.crt (sets SSL_CERT_FILE)")
	refs := map[string]string{}
	for _, im := range Images {
		flag.Func(im.Name+"-image", "reference of the "+im.Name+" image (default "+im.Ref+")", func(s string) error {
			refs[im.Name] = s
			return nil
		})
	}
	flag.Parse()
	imgs := Images
	if *only != "" {
		imgs = nil
		for _, n := range strings.Split(*only, ",") {
			im, ok := lookup(n)
			if !ok {
				fmt.Fprintf(os.Stderr, "images: unknown image %q\n", n)
				os.Exit(2)
			}
			imgs = append(imgs, im)
		}
	}
	rootAbs, err := filepath.Abs(*root)
	if err == nil {
		_, err = os.Stat(filepath.Join(rootAbs, "Dockerfile"))
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "images: -root %s is not the repository root: %v\n", *root, err)
		os.Exit(2)
	}
	if _, err := Build(Options{Root: rootAbs, Out: *out, Arch: *arch, Refs: refs, CACert: *ca, Log: os.Stdout}, imgs); err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

func lookup(n string) (Image, bool) {
	for _, im := range append(append([]Image{}, Images...), ClusterImages...) {
		if im.Name == n {
			return im, true
		}
	}
	return Image{}, false
}
