// Package clusterstack is the host side of the product on the local one-node cluster
// (hack/cluster), for test/cluster and `make demo`: a client of the cluster, a private
// PostgreSQL and the dev broker running on this machine at the node's address, where
// pods reach them, and the operator installed from config/default as users install it.
package clusterstack

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/outbox-operator/outbox-operator/internal/testenv/localstack"
	"github.com/outbox-operator/outbox-operator/internal/testenv/pgtest"
)

// Env is what hack/cluster hands to programs run against the cluster, as
// OUTBOX_CLUSTER_* environment variables (export_cluster_env in hack/cluster/lib.sh).
type Env struct {
	Kubeconfig     string // admin kubeconfig
	Kubectl        string // kubectl of the cluster's version
	Ctr            string // containerd's ctr
	ContainerdSock string
	NodeIP         string // the node's address: pods reach host services here
	PodCIDR        string
}

// EnvFromOS reads Env; ok is false when no cluster was handed over.
func EnvFromOS() (e Env, ok bool) {
	e = Env{
		Kubeconfig: os.Getenv("OUTBOX_CLUSTER_KUBECONFIG"), Kubectl: os.Getenv("OUTBOX_CLUSTER_KUBECTL"),
		Ctr: os.Getenv("OUTBOX_CLUSTER_CTR"), ContainerdSock: os.Getenv("OUTBOX_CLUSTER_CONTAINERD_SOCK"),
		NodeIP: os.Getenv("OUTBOX_CLUSTER_NODE_IP"), PodCIDR: os.Getenv("OUTBOX_CLUSTER_POD_CIDR"),
	}
	return e, e.Kubeconfig != ""
}

// Options for Start.
type Options struct {
	// Topics the broker creates at start (3 partitions each).
	Topics []string
	// Out receives PostgreSQL's life-cycle lines and the broker's output.
	Out io.Writer
}

// Stack is the host side of a cluster run.
type Stack struct {
	Env
	Root   string
	Client client.Client
	PG     *pgtest.Server
	Broker string // host:port of the dev broker, reachable from pods and from here

	password string
	stops    []func()
}

// Start connects to the cluster and starts PostgreSQL and the broker on the node
// address. Stop undoes it.
func Start(env Env, opts Options) (_ *Stack, err error) {
	if opts.Out == nil {
		opts.Out = io.Discard
	}
	root, err := localstack.ModuleRoot()
	if err != nil {
		return nil, err
	}
	s := &Stack{Env: env, Root: root, password: "pw-" + strconv.FormatInt(time.Now().UnixNano(), 36)}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	cfg, err := clientcmd.BuildConfigFromFlags("", env.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("clusterstack: kubeconfig: %w", err)
	}
	if s.Client, err = client.New(cfg, client.Options{Scheme: localstack.Scheme()}); err != nil {
		return nil, fmt.Errorf("clusterstack: client: %w", err)
	}
	if err := s.startPostgres(opts.Out); err != nil {
		return nil, err
	}
	if err := s.startBroker(opts.Topics, opts.Out); err != nil {
		return nil, err
	}
	return s, nil
}

// startPostgres listens on the node address too and lets the pod network in with a
// password, as a database outside the cluster would.
func (s *Stack) startPostgres(out io.Writer) error {
	pg, err := pgtest.Start(pgtest.Options{
		Settings: pgtest.LogicalReplication,
		Listen:   []string{s.NodeIP},
		HBA:      []string{"host all all " + s.PodCIDR + " scram-sha-256"},
		Logf:     func(f string, a ...any) { fmt.Fprintf(out, f+"\n", a...) },
	})
	if err != nil {
		return err
	}
	s.PG = pg
	s.stops = append(s.stops, func() { _ = pg.Stop() })
	db, err := sql.Open("postgres", pg.DSN("postgres"))
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.Exec(`ALTER USER postgres PASSWORD '` + s.password + `'`); err != nil {
		return fmt.Errorf("clusterstack: set password: %w", err)
	}
	return nil
}

// startBroker builds and runs the dev broker at the node address, advertising that
// address so pods and this process reach the same listener.
func (s *Stack) startBroker(topics []string, out io.Writer) error {
	dir, err := os.MkdirTemp("", "clusterstack-")
	if err != nil {
		return err
	}
	s.stops = append(s.stops, func() { _ = os.RemoveAll(dir) })
	bin := filepath.Join(dir, "devbroker")
	build := exec.Command("go", "build", "-o", bin, "./hack/devbroker")
	build.Dir = s.Root
	if b, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("clusterstack: build devbroker: %w: %s", err, b)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(s.NodeIP, "0"))
	if err != nil {
		return fmt.Errorf("clusterstack: broker port: %w", err)
	}
	s.Broker = l.Addr().String()
	_ = l.Close()
	cmd := exec.Command(bin, "--listen", s.Broker, "--advertise", s.Broker, "--partitions", "3", "--topics", strings.Join(topics, ","))
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("clusterstack: start devbroker: %w", err)
	}
	s.stops = append(s.stops, func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if c, err := net.DialTimeout("tcp", s.Broker, time.Second); err == nil {
			return c.Close()
		}
	}
	return errors.New("clusterstack: the dev broker did not start listening")
}

// PodDSN is dsn (from PG.CreateDatabase) as a pod must use it: the node address and
// the password instead of loopback trust. It belongs in a Secret, never in a spec.
func (s *Stack) PodDSN(dsn string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return "", err
	}
	u.Host = net.JoinHostPort(s.NodeIP, strconv.Itoa(s.PG.Port))
	u.User = url.UserPassword("postgres", s.password)
	return u.String(), nil
}

// InstallOperator applies config/default exactly as the README tells users to (its
// kustomization names the local images cluster-up imported) and waits for the rollout.
func (s *Stack) InstallOperator() error {
	if out, err := s.Kubectl("apply", "--server-side", "-k", filepath.Join(s.Root, "config/default")); err != nil {
		return fmt.Errorf("clusterstack: apply config/default: %w: %s", err, out)
	}
	return s.RolloutStatus("outbox-system", "outbox-operator-controller-manager", 3*time.Minute)
}

// RolloutStatus waits for a Deployment's rollout as `kubectl rollout status` does.
func (s *Stack) RolloutStatus(namespace, name string, timeout time.Duration) error {
	out, err := s.Kubectl("-n", namespace, "rollout", "status", "deployment/"+name, "--timeout="+timeout.String())
	if err != nil {
		return fmt.Errorf("clusterstack: rollout of %s/%s: %w: %s", namespace, name, err, out)
	}
	return nil
}

// Kubectl runs the cluster's kubectl with the admin kubeconfig and returns its output.
func (s *Stack) Kubectl(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.Env.Kubectl, append([]string{"--kubeconfig", s.Kubeconfig}, args...)...)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Run()
	return buf.String(), err
}

// Stop stops the broker and PostgreSQL.
func (s *Stack) Stop() {
	for i := len(s.stops) - 1; i >= 0; i-- {
		s.stops[i]()
	}
	s.stops = nil
}
