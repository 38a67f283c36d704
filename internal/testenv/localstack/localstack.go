// Package localstack assembles the whole product on one machine, for the end-to-end
// tests and `make demo`: a real kube-apiserver + etcd (envtest) with the project's
// CRDs, a private PostgreSQL, a Kafka-protocol broker, the manager binary, and the relay
// pods the operator renders, run as local processes (there is no kubelet).
package localstack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
	"github.com/outbox-operator/outbox-operator/internal/podrunner"
	"github.com/outbox-operator/outbox-operator/internal/testenv/freeport"
	"github.com/outbox-operator/outbox-operator/internal/testenv/kafkatest"
	"github.com/outbox-operator/outbox-operator/internal/testenv/pgtest"
)

// Options for Start.
type Options struct {
	// WorkDir receives the kubeconfig, binaries and logs; a temp dir when empty.
	WorkDir string
	// Out receives the manager's and the workers' output; discarded when nil.
	Out io.Writer
	// Partitions of auto-created topics.
	Partitions int32
}

// Stack is a running local product.
type Stack struct {
	Root       string
	WorkDir    string
	BinDir     string
	Kubeconfig string
	Config     *rest.Config
	Client     client.Client
	PG         *pgtest.Server
	Broker     *kafkatest.Broker

	env *envtest.Environment
	out io.Writer

	mu       sync.Mutex
	procs    map[string]*exec.Cmd
	stopped  chan struct{}
	stopOnce sync.Once
}

// Scheme knows the core kinds and the project's CRDs.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = outboxv1.AddToScheme(s)
	return s
}

// Start brings up the control plane, PostgreSQL and the broker, and builds the
// manager and relayworker binaries. Call Stop when done (it also stops processes).
func Start(opts Options) (_ *Stack, err error) {
	root, err := ModuleRoot()
	if err != nil {
		return nil, err
	}
	if opts.WorkDir == "" {
		if opts.WorkDir, err = os.MkdirTemp("", "localstack-"); err != nil {
			return nil, err
		}
	}
	if opts.Out == nil {
		opts.Out = io.Discard
	}
	if opts.Partitions == 0 {
		opts.Partitions = 3
	}
	s := &Stack{Root: root, WorkDir: opts.WorkDir, BinDir: filepath.Join(opts.WorkDir, "bin"), out: opts.Out, procs: map[string]*exec.Cmd{}, stopped: make(chan struct{})}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	if err = s.build(); err != nil {
		return nil, err
	}
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = filepath.Join(root, "bin", "k8s")
	}
	s.env = &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
	}
	if s.Config, err = s.env.Start(); err != nil {
		return nil, fmt.Errorf("start control plane (run `make envtest` first?): %w", err)
	}
	user, err := s.env.AddUser(envtest.User{Name: "localstack-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, fmt.Errorf("add kube user: %w", err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	s.Kubeconfig = filepath.Join(s.WorkDir, "kubeconfig")
	if err = os.WriteFile(s.Kubeconfig, kc, 0o600); err != nil {
		return nil, err
	}
	if s.Client, err = client.New(s.Config, client.Options{Scheme: Scheme()}); err != nil {
		return nil, err
	}
	// wal_level=logical, so LogicalReplication pipelines (the demo has one) work too.
	if s.PG, err = pgtest.Start(pgtest.Options{Settings: pgtest.LogicalReplication}); err != nil {
		return nil, err
	}
	if s.Broker, err = kafkatest.Start(opts.Partitions); err != nil {
		return nil, err
	}
	return s, nil
}

// build compiles the manager and the relay worker, as the images would contain them.
func (s *Stack) build() error {
	cmd := exec.Command("go", "build", "-o", s.BinDir+string(os.PathSeparator), "./cmd/manager", "./cmd/relayworker")
	cmd.Dir = s.Root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build binaries: %w: %s", err, out)
	}
	return nil
}

// StartManager runs the manager binary against the control plane.
func (s *Stack) StartManager(extraArgs ...string) error {
	args := append([]string{
		"--kubeconfig", s.Kubeconfig,
		"--metrics-bind-address", "0",
		"--health-probe-bind-address", "127.0.0.1:0",
		"--leader-elect=false",
	}, extraArgs...)
	cmd := exec.Command(filepath.Join(s.BinDir, "manager"), args...)
	cmd.Stdout, cmd.Stderr = prefixed(s.out, "manager: "), prefixed(s.out, "manager: ")
	return s.startProc("manager", cmd)
}

// RunDeployment plays kubelet for a Deployment the operator rendered: it runs the pod
// template's init containers to completion, then `replicas` copies of its first
// container as local processes with the template's command, args and resolved env.
// Listen addresses are moved to free loopback ports so copies do not collide.
func (s *Stack) RunDeployment(ctx context.Context, namespace, name string, replicas int) error {
	var d appsv1.Deployment
	if err := s.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, &d); err != nil {
		return fmt.Errorf("get deployment %s/%s: %w", namespace, name, err)
	}
	spec := d.Spec.Template.Spec
	if len(spec.Containers) == 0 {
		return fmt.Errorf("deployment %s/%s has no containers", namespace, name)
	}
	var healthAddrs []string
	for i := 0; i < replicas; i++ {
		pod := podrunner.Pod{Name: fmt.Sprintf("%s-%d", name, i), Namespace: namespace}
		healthAddr, err := FreeAddr()
		if err != nil {
			return err
		}
		local := []string{"RELAY_METRICS_ADDR=127.0.0.1:0", "RELAY_HEALTH_ADDR=" + healthAddr}
		for _, ic := range spec.InitContainers {
			cmd, err := podrunner.Command(ctx, s.Client, pod, ic, s.BinDir, prefixed(s.out, pod.Name+"/"+ic.Name+": "), local...)
			if err != nil {
				return err
			}
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("init container %s of %s: %w", ic.Name, pod.Name, err)
			}
		}
		cmd, err := podrunner.Command(ctx, s.Client, pod, spec.Containers[0], s.BinDir, prefixed(s.out, pod.Name+": "), local...)
		if err != nil {
			return err
		}
		if err := s.startProc(pod.Name, cmd); err != nil {
			return err
		}
		healthAddrs = append(healthAddrs, healthAddr)
	}
	go s.reportDeploymentStatus(types.NamespacedName{Namespace: namespace, Name: name}, healthAddrs)
	return nil
}

// reportDeploymentStatus plays the Deployment controller's part for the local pods:
// it probes each worker's /readyz and writes the ready count into the Deployment's
// status, which is what the operator reads for READY and WORKERS.
func (s *Stack) reportDeploymentStatus(key types.NamespacedName, healthAddrs []string) {
	last := -1
	hc := &http.Client{Timeout: time.Second}
	for {
		ready := 0
		for _, addr := range healthAddrs {
			if resp, err := hc.Get("http://" + addr + "/readyz"); err == nil {
				if resp.StatusCode == http.StatusOK {
					ready++
				}
				resp.Body.Close()
			}
		}
		if ready != last {
			var d appsv1.Deployment
			if err := s.Client.Get(context.Background(), key, &d); err == nil {
				d.Status.ObservedGeneration = d.Generation
				d.Status.Replicas = int32(len(healthAddrs))
				d.Status.UpdatedReplicas = int32(len(healthAddrs))
				d.Status.ReadyReplicas = int32(ready)
				d.Status.AvailableReplicas = int32(ready)
				if err := s.Client.Status().Update(context.Background(), &d); err == nil {
					last = ready
				}
			}
		}
		select {
		case <-s.stopped:
			return
		case <-time.After(time.Second):
		}
	}
}

// FreeAddr is a loopback address with a port nothing listens on now, below the
// kernel's ephemeral range (freeport).
func FreeAddr() (string, error) { return freeport.Addr() }

// RunJob plays kubelet for a Job the operator rendered: it runs the pod template's
// first container to completion and returns its error (nil on exit code 0).
func (s *Stack) RunJob(ctx context.Context, namespace, name string) error {
	var j batchv1.Job
	if err := s.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, &j); err != nil {
		return fmt.Errorf("get job %s/%s: %w", namespace, name, err)
	}
	return s.runPod(ctx, namespace, name+"-0", j.Spec.Template.Spec)
}

// RunCronJobOnce plays the CronJob controller and kubelet for one scheduled run: it
// runs the job template's first container to completion and then records the run in
// the CronJob's status (lastScheduleTime, lastSuccessfulTime) as that controller would.
func (s *Stack) RunCronJobOnce(ctx context.Context, namespace, name string) error {
	var cj batchv1.CronJob
	key := types.NamespacedName{Namespace: namespace, Name: name}
	if err := s.Client.Get(ctx, key, &cj); err != nil {
		return fmt.Errorf("get cronjob %s/%s: %w", namespace, name, err)
	}
	started := metav1.Now()
	if err := s.runPod(ctx, namespace, name+"-manual-0", cj.Spec.JobTemplate.Spec.Template.Spec); err != nil {
		return err
	}
	if err := s.Client.Get(ctx, key, &cj); err != nil {
		return fmt.Errorf("get cronjob %s/%s: %w", namespace, name, err)
	}
	finished := metav1.Now()
	cj.Status.LastScheduleTime, cj.Status.LastSuccessfulTime = &started, &finished
	if err := s.Client.Status().Update(ctx, &cj); err != nil {
		return fmt.Errorf("record run in cronjob %s/%s status: %w", namespace, name, err)
	}
	return nil
}

func (s *Stack) runPod(ctx context.Context, namespace, podName string, spec corev1.PodSpec) error {
	if len(spec.Containers) == 0 {
		return fmt.Errorf("pod %s/%s has no containers", namespace, podName)
	}
	pod := podrunner.Pod{Name: podName, Namespace: namespace}
	cmd, err := podrunner.Command(ctx, s.Client, pod, spec.Containers[0], s.BinDir, prefixed(s.out, pod.Name+": "))
	if err != nil {
		return err
	}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("pod %s/%s: %w", namespace, podName, err)
	}
	return nil
}

// Signal sends sig to the named process (manager or a pod name).
func (s *Stack) Signal(name string, sig syscall.Signal) error {
	s.mu.Lock()
	cmd := s.procs[name]
	s.mu.Unlock()
	if cmd == nil {
		return fmt.Errorf("no process %s", name)
	}
	return cmd.Process.Signal(sig)
}

// StopProc sends SIGTERM to a process and waits up to timeout for it to exit.
func (s *Stack) StopProc(name string, timeout time.Duration) error {
	s.mu.Lock()
	cmd := s.procs[name]
	delete(s.procs, name)
	s.mu.Unlock()
	if cmd == nil {
		return nil
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var exit *exec.ExitError
		if errors.As(err, &exit) && exit.ExitCode() > 0 {
			return fmt.Errorf("%s exited with %d", name, exit.ExitCode())
		}
		return nil
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("%s did not stop within %s", name, timeout)
	}
}

// Stop ends every process and component; safe to call more than once.
func (s *Stack) Stop() {
	s.stopOnce.Do(func() { close(s.stopped) })
	s.mu.Lock()
	var names []string
	for n := range s.procs {
		names = append(names, n)
	}
	s.mu.Unlock()
	for _, n := range names {
		_ = s.StopProc(n, 20*time.Second)
	}
	if s.Broker != nil {
		s.Broker.Close()
		s.Broker = nil
	}
	if s.PG != nil {
		_ = s.PG.Stop()
		s.PG = nil
	}
	if s.env != nil {
		_ = s.env.Stop()
		s.env = nil
	}
}

func (s *Stack) startProc(name string, cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	s.mu.Lock()
	s.procs[name] = cmd
	s.mu.Unlock()
	return nil
}

// ModuleRoot finds the directory holding this module's go.mod.
func ModuleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside the outbox-operator module")
	}
	return filepath.Dir(mod), nil
}

// SecretFor returns a Secret holding key=value, for sample pipelines.
func SecretFor(namespace, name, key, value string) *corev1.Secret {
	s := &corev1.Secret{StringData: map[string]string{key: value}}
	s.Namespace, s.Name = namespace, name
	return s
}
