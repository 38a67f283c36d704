package main

import (
	"flag"
	"fmt"
	"regexp"
	"strings"
)

// options say what to build and where the release publishes it.
type options struct {
	version   string     // the release, a semantic version with a leading v (krew requires it)
	platforms []platform // what krew installs on; spec.platforms in this order
	root      string     // the repository root: ./cmd/kubectl-outbox and LICENSE
	outDir    string     // where the archives are written
	template  string     // the manifest's template
	manifest  string     // the rendered manifest
	uriBase   string     // archives are downloaded from <uriBase>/<version>/<archive>
}

type platform struct{ OS, Arch string }

// defaultPlatforms are the ones the plugin is released for.
const defaultPlatforms = "linux/amd64,linux/arm64,darwin/amd64,darwin/arm64"

// semver is krew's spec.version: v, major.minor.patch, optional pre-release and build.
var semver = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)

func parseFlags(args []string) (options, error) {
	var o options
	var platforms string
	fs := flag.NewFlagSet("krew", flag.ContinueOnError)
	fs.StringVar(&o.version, "version", "", "the release version, like v1.2.3 (required)")
	fs.StringVar(&platforms, "platforms", defaultPlatforms, "comma-separated OS/ARCH pairs to build")
	fs.StringVar(&o.root, "root", ".", "the repository root")
	fs.StringVar(&o.outDir, "out", "bin/release", "directory of the archives")
	fs.StringVar(&o.template, "template", "plugins/outbox.yaml.tmpl", "the manifest template")
	fs.StringVar(&o.manifest, "manifest", "plugins/outbox.yaml", "the rendered manifest")
	fs.StringVar(&o.uriBase, "uri-base", "https://github.com/outbox-operator/outbox-operator/releases/download",
		"URL the release's archives are published under, as <uri-base>/<version>/<archive>")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if !semver.MatchString(o.version) {
		return o, fmt.Errorf("-version %q is not a semantic version like v1.2.3 (krew requires one; make krew-manifest VERSION=v1.2.3)", o.version)
	}
	var err error
	o.platforms, err = parsePlatforms(platforms)
	o.uriBase = strings.TrimRight(o.uriBase, "/")
	return o, err
}

func parsePlatforms(s string) ([]platform, error) {
	var ps []platform
	for _, p := range strings.Split(s, ",") {
		osName, arch, ok := strings.Cut(strings.TrimSpace(p), "/")
		if !ok || osName == "" || arch == "" {
			return nil, fmt.Errorf("-platforms: %q is not OS/ARCH", p)
		}
		ps = append(ps, platform{osName, arch})
	}
	return ps, nil
}
