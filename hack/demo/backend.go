package main

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/outbox-operator/outbox-operator/internal/testenv/clusterstack"
	"github.com/outbox-operator/outbox-operator/internal/testenv/localstack"
)

// backend is where the demo runs the product: a real one-node cluster
// (hack/cluster), or the process-pod fallback that plays kubelet with local processes.
type backend interface {
	describe() string
	client() client.Client
	// kubectl is the command line, without arguments, that reaches the cluster.
	kubectl() []string
	// database creates a database: the DSN for the demo and the one for the Secret.
	database(ctx context.Context) (local, pods string, err error)
	brokers() []string
	createTopic(name string, partitions int32) error
	// runRelay makes the relay Deployment's pods run.
	runRelay(ctx context.Context, namespace, deployment string, replicas int) error
	records(topic string) int64
	stop()
}

// clusterBackend: the operator installed from config/default; pods are containers.
type clusterBackend struct {
	s       *clusterstack.Stack
	counted map[string]*atomic.Int64 // topic -> records read
	cancel  context.CancelFunc
}

func startCluster(env clusterstack.Env, log io.Writer) (*clusterBackend, error) {
	var topics []string
	counted := map[string]*atomic.Int64{}
	for _, dp := range demoPipelines {
		topics = append(topics, dp.topic)
		counted[dp.topic] = &atomic.Int64{}
	}
	s, err := clusterstack.Start(env, clusterstack.Options{Topics: topics, Out: log})
	if err != nil {
		return nil, err
	}
	if err := s.InstallOperator(); err != nil {
		s.Stop()
		return nil, err
	}
	return &clusterBackend{s: s, counted: counted}, nil
}

func (b *clusterBackend) describe() string {
	return "a one-node Kubernetes cluster on this machine (kubelet, containerd, runc); the operator runs from its image"
}
func (b *clusterBackend) client() client.Client { return b.s.Client }
func (b *clusterBackend) kubectl() []string {
	return []string{b.s.Env.Kubectl, "--kubeconfig", b.s.Kubeconfig}
}
func (b *clusterBackend) database(ctx context.Context) (string, string, error) {
	dsn, err := b.s.PG.CreateDatabase(ctx, "shop")
	if err != nil {
		return "", "", err
	}
	pods, err := b.s.PodDSN(dsn)
	return dsn, pods, err
}
func (b *clusterBackend) brokers() []string               { return []string{b.s.Broker} }
func (b *clusterBackend) createTopic(string, int32) error { return nil } // the broker made it at start

func (b *clusterBackend) runRelay(ctx context.Context, namespace, deployment string, _ int) error {
	if err := b.s.RolloutStatus(namespace, deployment, 3*time.Minute); err != nil {
		return err
	}
	if b.cancel != nil {
		return nil // the consumer counts every topic already
	}
	// Count what reaches the topics the way a consumer sees it.
	var topics []string
	for t := range b.counted {
		topics = append(topics, t)
	}
	c, err := kgo.NewClient(kgo.SeedBrokers(b.s.Broker), kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return fmt.Errorf("consumer: %w", err)
	}
	cctx, cancel := context.WithCancel(context.Background())
	b.cancel = cancel
	go func() {
		defer c.Close()
		for cctx.Err() == nil {
			c.PollFetches(cctx).EachRecord(func(r *kgo.Record) {
				if n := b.counted[r.Topic]; n != nil {
					n.Add(1)
				}
			})
		}
	}()
	return nil
}

func (b *clusterBackend) records(topic string) int64 {
	if n := b.counted[topic]; n != nil {
		return n.Load()
	}
	return 0
}

func (b *clusterBackend) stop() {
	if b.cancel != nil {
		b.cancel()
	}
	b.s.Stop()
}

// processBackend: envtest's control plane and the rendered pods as local processes.
type processBackend struct{ s *localstack.Stack }

func startProcesses(work string, log io.Writer) (*processBackend, error) {
	s, err := localstack.Start(localstack.Options{WorkDir: work, Out: log})
	if err != nil {
		return nil, err
	}
	if err := s.StartManager(); err != nil {
		s.Stop()
		return nil, err
	}
	return &processBackend{s: s}, nil
}

func (b *processBackend) describe() string {
	return "the process-pod fallback: envtest's kube-apiserver, and the pods the operator renders run as local processes (no kubelet)"
}
func (b *processBackend) client() client.Client { return b.s.Client }
func (b *processBackend) kubectl() []string {
	return []string{"kubectl", "--kubeconfig", b.s.Kubeconfig}
}
func (b *processBackend) database(ctx context.Context) (string, string, error) {
	dsn, err := b.s.PG.CreateDatabase(ctx, "shop")
	return dsn, dsn, err
}
func (b *processBackend) brokers() []string { return b.s.Broker.Addrs() }
func (b *processBackend) createTopic(name string, partitions int32) error {
	return b.s.Broker.CreateTopic(name, partitions)
}
func (b *processBackend) runRelay(ctx context.Context, namespace, deployment string, replicas int) error {
	return b.s.RunDeployment(ctx, namespace, deployment, replicas)
}
func (b *processBackend) records(topic string) int64 { return b.s.Broker.Count(topic) }
func (b *processBackend) stop()                      { b.s.Stop() }

// kubectlOutput runs the backend's kubectl.
func kubectlOutput(b backend, args ...string) ([]byte, error) {
	k := b.kubectl()
	return exec.Command(k[0], append(k[1:], args...)...).CombinedOutput()
}
