package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestResolve(t *testing.T) {
	vcs := func(rev, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	cases := []struct {
		name  string
		stamp string
		bi    *debug.BuildInfo
		want  string
	}{
		{"the stamp wins", "v1.2.3", &debug.BuildInfo{Main: debug.Module{Version: "v0.9.0"}}, "v1.2.3"},
		{"no build info", "", nil, "dev"},
		{"go install @version", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.9.0"}}, "v0.9.0"},
		{"checkout, clean", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs("0123456789abcdef0123", "false")}, "dev-0123456789ab"},
		{"checkout, modified", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs("abc123", "true")}, "dev-abc123-dirty"},
		{"-buildvcs=false", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "dev"},
	}
	for _, tc := range cases {
		if got := resolve(tc.stamp, tc.bi); got != tc.want {
			t.Errorf("%s: resolve = %q, want %q", tc.name, got, tc.want)
		}
	}
}
