// Package buildinfo is the version every binary of the project reports (the manager
// at startup, `relayworker version`, `kubectl outbox version`): the one the Makefile
// stamps with -ldflags, else what the Go toolchain recorded in the binary.
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// version is set at link time: go build -ldflags "-X
// github.com/outbox-operator/outbox-operator/internal/buildinfo.version=v1.2.3"
// (the Makefile's VERSION). Empty in a plain go build.
var version string

// Version is this binary's version: the -ldflags stamp, else the module version of a
// `go install ...@v1.2.3`, else the VCS revision the toolchain recorded, else "dev".
func Version() string {
	bi, _ := debug.ReadBuildInfo()
	return resolve(version, bi)
}

// Platform is the Go version, OS and architecture the binary was built with.
func Platform() string {
	return runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH
}

// resolve picks the version from the stamp and the recorded build info (nil when
// the binary has none).
func resolve(stamp string, bi *debug.BuildInfo) string {
	if stamp != "" {
		return stamp
	}
	if bi == nil {
		return "dev"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch {
		case s.Key == "vcs.revision":
			rev = s.Value
		case s.Key == "vcs.modified" && s.Value == "true":
			dirty = "-dirty"
		}
	}
	if rev == "" {
		return "dev"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	return "dev-" + rev + dirty
}
