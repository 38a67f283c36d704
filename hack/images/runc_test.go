package main

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// TestRunc runs each image's entrypoint under runc the way the operator's pods run:
// user 65532:65532, read-only root filesystem, no capabilities, no new privileges,
// an empty /tmp (the pods' emptyDir), and a network namespace of its own with only
// loopback.
//
// IMAGES_RUNC says what to do on a host that cannot run it: auto (the default) skips
// saying why, require (CI, .ci/run) fails saying why, skip skips on purpose.
func TestRunc(t *testing.T) {
	cannot := runcMode(t)
	if os.Geteuid() != 0 {
		cannot("needs root to create containers with runc (run `make test-images` as root)")
	}
	runc, err := exec.LookPath("runc")
	if err != nil {
		cannot("runc not found in PATH (install it with hack/install-runc.sh or `make runc`)")
	}
	dir := built(t)
	cases := []struct {
		image    string
		args     []string // appended to the entrypoint; nil runs the entrypoint unchanged
		code     int
		contains []string
		stopOn   string // when set: wait for this output, then SIGTERM and expect code
	}{
		// docs/worker-contract.md: 0 on -h (help), 2 on bad flags/config with one line on stderr.
		{image: "relayworker", args: []string{"-h"}, code: 0, contains: []string{"usage: relayworker <command>", "relay ", "migrate "}},
		{image: "relayworker", args: []string{"relay"}, code: 2, contains: []string{"relayworker: relay: --dsn (OUTBOX_DSN) is required"}},
		{image: "manager", args: []string{"-h"}, code: 0, contains: []string{"-relay-image", "-health-probe-bind-address"}},
		{image: "devbroker", args: []string{"-h"}, code: 0, contains: []string{"-listen", "-partitions"}},
		// The unchanged entrypoint binds :9092 as 65532 without capabilities.
		{image: "devbroker", code: 0, stopOn: "devbroker listening on", contains: []string{":9092"}},
	}
	for i, c := range cases {
		t.Run(fmt.Sprintf("%s_%s", c.image, strings.Join(append([]string{"entrypoint"}, c.args...), "_")), func(t *testing.T) {
			im, ok := lookup(c.image)
			if !ok {
				t.Fatalf("no image %s", c.image)
			}
			bundle := t.TempDir()
			rootfs := filepath.Join(bundle, "rootfs")
			unpack(t, filepath.Join(dir, im.Name+".tar"), rootfs)
			args := append(append([]string{}, im.Entrypoint...), c.args...)
			writeSpec(t, bundle, args)
			state := t.TempDir()
			id := fmt.Sprintf("outbox-images-test-%d-%d", os.Getpid(), i)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, runc, "--root", state, "run", "--bundle", bundle, id)
			var out syncBuffer
			cmd.Stdout, cmd.Stderr = &out, &out
			t.Cleanup(func() { _ = exec.Command(runc, "--root", state, "delete", "--force", id).Run() })
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if c.stopOn != "" {
				deadline := time.Now().Add(20 * time.Second)
				for !strings.Contains(out.String(), c.stopOn) {
					if time.Now().After(deadline) {
						t.Fatalf("no %q within 20s; output:\n%s", c.stopOn, out.String())
					}
					time.Sleep(50 * time.Millisecond)
				}
				checkConfined(t, runc, state, id)
				if b, err := exec.Command(runc, "--root", state, "kill", id, "TERM").CombinedOutput(); err != nil {
					t.Fatalf("runc kill: %v: %s", err, b)
				}
			}
			err := cmd.Wait()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatalf("runc run: %v\n%s", err, out.String())
			}
			if code != c.code {
				t.Errorf("%v exited %d, want %d; output:\n%s", args, code, c.code, out.String())
			}
			for _, s := range c.contains {
				if !strings.Contains(out.String(), s) {
					t.Errorf("%v output lacks %q:\n%s", args, s, out.String())
				}
			}
		})
	}
}

// runcMode reads IMAGES_RUNC and returns what to do when the host cannot run the
// test: skip saying why, or, with IMAGES_RUNC=require, fail saying why.
func runcMode(t *testing.T) (cannot func(why string)) {
	t.Helper()
	switch mode := os.Getenv("IMAGES_RUNC"); mode {
	case "", "auto":
		return func(why string) { t.Helper(); t.Skip("TestRunc skipped: " + why) }
	case "require":
		return func(why string) { t.Helper(); t.Fatal("TestRunc cannot run here (IMAGES_RUNC=require): " + why) }
	case "skip":
		t.Skip("TestRunc skipped (IMAGES_RUNC=skip)")
	default:
		t.Fatalf("IMAGES_RUNC must be auto, require or skip, not %q", mode)
	}
	return nil
}

// syncBuffer is a bytes.Buffer safe for runc's two output copiers and the poller.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// checkConfined reads the running container's process from the host's /proc: user and
// group 65532, no capabilities, no_new_privs, a read-only root and only loopback.
func checkConfined(t *testing.T, runc, state, id string) {
	t.Helper()
	b, err := exec.Command(runc, "--root", state, "state", id).Output()
	if err != nil {
		t.Fatalf("runc state: %v", err)
	}
	var st struct{ Pid int }
	if err := json.Unmarshal(b, &st); err != nil || st.Pid == 0 {
		t.Fatalf("runc state %s: %v", b, err)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", st.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Uid:\t65532\t65532\t65532\t65532", "Gid:\t65532\t65532\t65532\t65532",
		"CapInh:\t0000000000000000", "CapPrm:\t0000000000000000", "CapEff:\t0000000000000000",
		"CapBnd:\t0000000000000000", "CapAmb:\t0000000000000000", "NoNewPrivs:\t1",
	} {
		if !strings.Contains(string(status), want+"\n") {
			t.Errorf("/proc/%d/status lacks %q:\n%s", st.Pid, want, status)
		}
	}
	mounts, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", st.Pid))
	if err != nil {
		t.Fatal(err)
	}
	rootRO := false
	for _, l := range strings.Split(string(mounts), "\n") {
		f := strings.Fields(l)
		if len(f) > 5 && f[4] == "/" {
			rootRO = strings.HasPrefix(f[5], "ro,") || f[5] == "ro"
		}
	}
	if !rootRO {
		t.Errorf("root filesystem is not mounted read-only:\n%s", mounts)
	}
	dev, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/dev", st.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(dev), "\n")[2:] {
		if name, _, ok := strings.Cut(strings.TrimSpace(l), ":"); ok && name != "lo" {
			t.Errorf("network interface %s in the container; want only loopback", name)
		}
	}
}

// unpack extracts the image's single layer into rootfs with the modes and owners of
// the tar headers.
func unpack(t *testing.T, tarPath, rootfs string) {
	t.Helper()
	img, err := tarball.ImageFromPath(tarPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(rootfs, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(rootfs, filepath.Clean("/"+h.Name))
			switch h.Typeflag {
			case tar.TypeDir:
				if err := os.MkdirAll(p, 0o755); err != nil {
					t.Fatal(err)
				}
			case tar.TypeReg:
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := io.Copy(f, tr); err != nil {
					t.Fatal(err)
				}
				f.Close()
			default:
				t.Fatalf("unexpected entry %s (type %c)", h.Name, h.Typeflag)
			}
			if err := os.Lchown(p, h.Uid, h.Gid); err != nil {
				t.Fatal(err)
			}
			mode := os.FileMode(h.Mode & 0o777)
			if h.Mode&0o1000 != 0 {
				mode |= os.ModeSticky
			}
			if err := os.Chmod(p, mode); err != nil {
				t.Fatal(err)
			}
		}
		rc.Close()
	}
}

// writeSpec writes the bundle's config.json: runc's default spec with the pods'
// securityContext (runAsUser/runAsGroup 65532, readOnlyRootFilesystem, drop ALL,
// allowPrivilegeEscalation false) and a tmpfs at /tmp standing in for the emptyDir.
func writeSpec(t *testing.T, bundle string, args []string) {
	t.Helper()
	empty := []string{}
	spec := map[string]any{
		"ociVersion": "1.0.2",
		"process": map[string]any{
			"terminal": false,
			"user":     map[string]any{"uid": 65532, "gid": 65532, "additionalGids": []int{65532}},
			"args":     args,
			"env":      []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/"},
			"cwd":      "/",
			"capabilities": map[string]any{
				"bounding": empty, "effective": empty, "inheritable": empty, "permitted": empty, "ambient": empty,
			},
			"rlimits":         []map[string]any{{"type": "RLIMIT_NOFILE", "hard": 1024, "soft": 1024}},
			"noNewPrivileges": true,
		},
		"root":     map[string]any{"path": "rootfs", "readonly": true},
		"hostname": "outbox-images-test",
		"mounts": []map[string]any{
			{"destination": "/proc", "type": "proc", "source": "proc"},
			{"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
			{"destination": "/dev/pts", "type": "devpts", "source": "devpts", "options": []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}},
			{"destination": "/dev/shm", "type": "tmpfs", "source": "shm", "options": []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
			{"destination": "/dev/mqueue", "type": "mqueue", "source": "mqueue", "options": []string{"nosuid", "noexec", "nodev"}},
			{"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": []string{"nosuid", "noexec", "nodev", "ro"}},
			{"destination": "/tmp", "type": "tmpfs", "source": "tmpfs", "options": []string{"nosuid", "nodev", "mode=1777", "size=64m"}},
		},
		"linux": map[string]any{
			"namespaces": []map[string]string{
				{"type": "pid"}, {"type": "network"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"},
			},
			"maskedPaths": []string{
				"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list",
				"/proc/timer_stats", "/proc/sched_debug", "/sys/firmware", "/proc/scsi",
			},
			"readonlyPaths": []string{
				"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger",
			},
		},
	}
	b, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}
