// Command demo runs the whole product on this machine (`make demo`): a private
// PostgreSQL, a Kafka-protocol broker, the operator, and the sample OutboxPipeline from
// config/samples with its relay workers. Where hack/cluster/demo.sh brought up the
// local one-node cluster (OUTBOX_CLUSTER_* set), the operator is installed from
// config/default and every pod is a real container; elsewhere it falls back to a local
// control plane with the pods run as local processes, and says so. An application loop
// writes orders and their events in one transaction each; every few seconds the demo
// prints what `kubectl get outboxpipelines` shows and how many records reached the
// topic.
//
//	DEMO_RATE=50        events per second written by the demo application
//	DEMO_DURATION=2m    stop by itself after this long (default: run until Ctrl-C)
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
	"github.com/outbox-operator/outbox-operator/internal/testenv/clusterstack"
	"github.com/outbox-operator/outbox-operator/internal/testenv/localstack"
)

const namespace = "demo"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run() error {
	rate, duration, err := settings()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, duration)
		defer cancel()
	}

	root, err := localstack.ModuleRoot()
	if err != nil {
		return err
	}
	work := filepath.Join(root, ".demo")
	if err := os.MkdirAll(work, 0o755); err != nil {
		return err
	}
	logFile, err := os.Create(filepath.Join(work, "stack.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	logf.SetLogger(zap.New(zap.WriteTo(logFile)))

	b, err := start(work, logFile)
	if err != nil {
		return err
	}
	defer b.stop()
	say("operator running; in another shell: %s get outboxpipelines -n %s -w", strings.Join(b.kubectl(), " "), namespace)

	if err := createNamespace(ctx, b); err != nil {
		return err
	}
	for _, dp := range demoPipelines {
		if err := dp.apply(ctx, b); err != nil {
			return err
		}
		defer dp.db.Close()
		if err := dp.run(ctx, b); err != nil {
			return err
		}
	}
	say("writing %d orders/s and %d payments/s, each with its event in the same transaction (Ctrl-C to stop)", rate, rate)

	written := make(chan map[string]int64, 1)
	go func() { written <- produce(ctx, demoPipelines, rate) }()
	report(ctx, b)
	n := <-written
	say("stopped writing; waiting for the relays to drain")
	drainCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, dp := range demoPipelines {
		for drainCtx.Err() == nil && b.records(dp.topic) < n[dp.topic] {
			time.Sleep(200 * time.Millisecond)
		}
		say("topic %s holds %d records for %d committed events (%s pipeline; duplicates are allowed, losses are not)",
			dp.topic, b.records(dp.topic), n[dp.topic], dp.p.Spec.Source.Mode)
	}
	printPipelines(b, "-o", "wide")
	if out, err := kubectlOutput(b, "get", "outboxpipeline", "payments", "-n", namespace,
		"-o", "jsonpath={.status.replication}"); err == nil {
		say("payments' replication slot (status.replication): %s", out)
	}
	return nil
}

// start picks the backend: the cluster hack/cluster/demo.sh handed over, or the
// process-pod fallback, with the reason the script gave for not using a cluster.
func start(work string, log io.Writer) (backend, error) {
	if env, ok := clusterstack.EnvFromOS(); ok {
		say("starting PostgreSQL and the broker on the node address, installing config/default; logs in %s", filepath.Join(work, "stack.log"))
		b, err := startCluster(env, log)
		if err != nil {
			return nil, err
		}
		say("running on %s", b.describe())
		return b, nil
	}
	why := os.Getenv("DEMO_FALLBACK_REASON")
	if why == "" {
		why = "no local cluster was handed over (make demo starts one where the host can run it)"
	}
	say("running on %s, because %s", (&processBackend{}).describe(), why)
	say("starting control plane, PostgreSQL and broker; logs in %s", filepath.Join(work, "stack.log"))
	return startProcesses(work, log)
}

func settings() (rate int, duration time.Duration, err error) {
	rate = 50
	if v := os.Getenv("DEMO_RATE"); v != "" {
		if rate, err = strconv.Atoi(v); err != nil || rate < 1 || rate > 5000 {
			return 0, 0, fmt.Errorf("DEMO_RATE=%q must be an integer between 1 and 5000", v)
		}
	}
	if v := os.Getenv("DEMO_DURATION"); v != "" {
		if duration, err = time.ParseDuration(v); err != nil || duration <= 0 {
			return 0, 0, fmt.Errorf("DEMO_DURATION=%q must be a positive duration such as 2m", v)
		}
	}
	return rate, duration, nil
}

func waitForDeployment(ctx context.Context, b backend, p *outboxv1.OutboxPipeline) (string, error) {
	name := p.Name + "-relay"
	for {
		var d metav1.PartialObjectMetadata
		d.SetGroupVersionKind(schemeDeployment)
		err := b.client().Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &d)
		if err == nil {
			return name, nil
		}
		select {
		case <-ctx.Done():
			return "", errors.New("the operator did not create the relay Deployment")
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// report prints the pipeline as kubectl shows it every 5 seconds until ctx ends.
func report(ctx context.Context, b backend) {
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			printPipelines(b)
			say("topic orders: %d records, topic payments: %d records", b.records("orders"), b.records("payments"))
		}
	}
}

func printPipelines(b backend, extra ...string) {
	out, err := kubectlOutput(b, append([]string{"get", "outboxpipelines", "-n", namespace}, extra...)...)
	if err != nil {
		say("kubectl: %v: %s", err, out)
		return
	}
	fmt.Print(string(out))
}

func say(format string, args ...any) {
	fmt.Printf("[demo %s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

var schemeDeployment = appsv1.SchemeGroupVersion.WithKind("Deployment")
