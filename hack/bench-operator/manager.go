// manager.go: the manager binary, run as its own process with the arguments and
// environment of config/manager/manager.yaml's container, its listen addresses moved
// to free loopback ports, its kubeconfig the RBAC-bound user's, and its pprof endpoint
// on loopback.

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/outbox-operator/outbox-operator/internal/testenv/localstack"
)

type manager struct {
	cmd         *exec.Cmd
	done        chan struct{}
	log         string
	metricsAddr string
	pprofAddr   string
}

// buildManager builds ./cmd/manager as the image does (CGO off), unless bin is given.
func buildManager(bin string) (string, func(), error) {
	if bin != "" {
		return bin, func() {}, nil
	}
	root, err := localstack.ModuleRoot()
	if err != nil {
		return "", nil, err
	}
	dir, err := os.MkdirTemp("", "bench-operator-bin-")
	if err != nil {
		return "", nil, err
	}
	out := filepath.Join(dir, "manager")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/manager")
	cmd.Dir, cmd.Env = root, append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("build manager: %w: %s", err, b)
	}
	return out, func() { os.RemoveAll(dir) }, nil
}

// podContainer is the manager container of config/manager/manager.yaml.
func podContainer(root string) (args []string, env []string, err error) {
	b, err := os.ReadFile(filepath.Join(root, managerYAML))
	if err != nil {
		return nil, nil, err
	}
	for _, doc := range docSep.Split(string(b), -1) {
		var d appsv1.Deployment
		if err := yaml.Unmarshal([]byte(doc), &d); err != nil || d.Kind != "Deployment" {
			continue
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			if c.Name != "manager" {
				continue
			}
			for _, e := range c.Env {
				env = append(env, e.Name+"="+e.Value)
			}
			return c.Args, env, nil
		}
	}
	return nil, nil, fmt.Errorf("%s: no Deployment with a container named manager", managerYAML)
}

// startManager runs bin with the pod's arguments, adjusted to run outside a pod.
func startManager(bin, root, dir, kubeconfig string) (*manager, error) {
	podArgs, env, err := podContainer(root)
	if err != nil {
		return nil, err
	}
	m := &manager{done: make(chan struct{}), log: filepath.Join(dir, "manager.log")}
	addrs := map[string]*string{"--metrics-bind-address": &m.metricsAddr, "--health-probe-bind-address": new(string)}
	var args []string
	for _, a := range podArgs {
		name, _, _ := strings.Cut(a, "=")
		if p, ok := addrs[name]; ok {
			if *p, err = localstack.FreeAddr(); err != nil {
				return nil, err
			}
			a = name + "=" + *p
		}
		args = append(args, a)
	}
	if m.pprofAddr, err = localstack.FreeAddr(); err != nil {
		return nil, err
	}
	// In a pod the Lease namespace is the pod's; outside one it has to be named.
	args = append(args, "--kubeconfig="+kubeconfig, "--leader-election-namespace="+operatorNS, "--pprof-bind-address="+m.pprofAddr)
	args = append(args, strings.Fields(*managerArgs)...)
	logf, err := os.Create(m.log)
	if err != nil {
		return nil, err
	}
	m.cmd = exec.Command(bin, args...)
	m.cmd.Env = append(os.Environ(), env...)
	m.cmd.Stdout, m.cmd.Stderr = logf, logf
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := m.cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start manager: %w", err)
	}
	go func() { _ = m.cmd.Wait(); logf.Close(); close(m.done) }()
	return m, nil
}

func (m *manager) pid() int { return m.cmd.Process.Pid }

// exited is an error with the end of the manager's log once it is gone.
func (m *manager) exited() error {
	select {
	case <-m.done:
		return fmt.Errorf("manager exited (%v): %s", m.cmd.ProcessState, tail(m.log))
	default:
		return nil
	}
}

func (m *manager) stop() {
	if m == nil || m.cmd.Process == nil {
		return
	}
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.done:
	case <-time.After(15 * time.Second):
		_ = m.cmd.Process.Kill()
		<-m.done
	}
}

// waitLeader waits until the manager holds the leader-election Lease: only then does
// it reconcile.
func (m *manager) waitLeader(ctx context.Context, c client.Client) error {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if err := m.exited(); err != nil {
			return err
		}
		var l coordinationv1.Lease
		err := c.Get(ctx, client.ObjectKey{Namespace: operatorNS, Name: leaseName}, &l)
		if err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("the manager did not take the Lease %s/%s within 60s: %s", operatorNS, leaseName, tail(m.log))
}

func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}
