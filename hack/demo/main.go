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
	"database/sql"
	"encoding/json"
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
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
	"github.com/outbox-operator/outbox-operator/internal/testenv/clusterstack"
	"github.com/outbox-operator/outbox-operator/internal/testenv/localstack"
	"github.com/outbox-operator/outbox-operator/outbox"
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

	db, pipeline, err := applySample(ctx, b)
	if err != nil {
		return err
	}
	defer db.Close()
	deploy, err := waitForDeployment(ctx, b, pipeline)
	if err != nil {
		return err
	}
	replicas := 2
	if r := pipeline.Spec.Relay.Replicas; r != nil {
		replicas = int(*r)
	}
	if err := b.runRelay(ctx, namespace, deploy, replicas); err != nil {
		return err
	}
	say("relay Deployment %s/%s rendered by the operator: %d workers running", namespace, deploy, replicas)
	say("writing %d orders/s, each with its event in the same transaction (Ctrl-C to stop)", rate)

	written := make(chan int64, 1)
	go func() { written <- produce(ctx, db, rate) }()
	report(ctx, b)
	n := <-written
	say("stopped writing after %d events; waiting for the relay to drain", n)
	drainCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for drainCtx.Err() == nil && b.records("orders") < n {
		time.Sleep(200 * time.Millisecond)
	}
	say("topic orders holds %d records for %d committed events (duplicates are allowed, losses are not)", b.records("orders"), n)
	printPipelines(b)
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

// applySample creates the sample Secret and OutboxPipeline, pointed at this machine's
// database and broker, the way a user would after editing the sample.
func applySample(ctx context.Context, b backend) (*sql.DB, *outboxv1.OutboxPipeline, error) {
	// The namespace admits only pods that meet the restricted Pod Security Standard,
	// as a careful platform team would set it up.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace,
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}}
	if err := b.client().Create(ctx, ns); err != nil {
		return nil, nil, fmt.Errorf("create namespace: %w", err)
	}
	dsn, podDSN, err := b.database(ctx)
	if err != nil {
		return nil, nil, err
	}
	db, err := sql.Open("postgres", dsn)
	if err != nil {
		return nil, nil, err
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE orders (order_id text PRIMARY KEY, amount_cents bigint NOT NULL, created_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return nil, nil, fmt.Errorf("create orders table: %w", err)
	}
	if err := b.createTopic("orders", 3); err != nil {
		return nil, nil, fmt.Errorf("create topic: %w", err)
	}
	root, err := localstack.ModuleRoot()
	if err != nil {
		return nil, nil, err
	}
	f, err := os.Open(filepath.Join(root, "config", "samples", "outbox_v1alpha1_outboxpipeline.yaml"))
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	var secret corev1.Secret
	var p outboxv1.OutboxPipeline
	dec := yaml.NewYAMLOrJSONDecoder(f, 4096)
	if err := dec.Decode(&secret); err != nil {
		return nil, nil, fmt.Errorf("sample secret: %w", err)
	}
	if err := dec.Decode(&p); err != nil {
		return nil, nil, fmt.Errorf("sample pipeline: %w", err)
	}
	secret.Namespace, p.Namespace = namespace, namespace
	secret.StringData["dsn"] = podDSN
	p.Spec.Sink.Brokers = b.brokers()
	p.Spec.Monitoring.StatusInterval = &metav1.Duration{Duration: 5 * time.Second}
	if err := b.client().Create(ctx, &secret); err != nil {
		return nil, nil, fmt.Errorf("create secret: %w", err)
	}
	if err := b.client().Create(ctx, &p); err != nil {
		return nil, nil, fmt.Errorf("create pipeline: %w", err)
	}
	return db, &p, nil
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

// produce is the demo application: one order and its OrderPlaced event per
// transaction, at `rate` per second, until ctx ends. It returns how many committed.
func produce(ctx context.Context, db *sql.DB, rate int) int64 {
	pub := outbox.Default()
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	var n int64
	for {
		select {
		case <-ctx.Done():
			return n
		case <-tick.C:
		}
		orderID := fmt.Sprintf("order-%06d", n+1)
		amount := 100 + (n*37)%9900
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			continue
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO orders (order_id, amount_cents) VALUES ($1, $2)`, orderID, amount)
		if err == nil {
			err = pub.Publish(ctx, tx, outbox.Event{
				EventID:          outbox.EventID("order-placed", orderID),
				AggregateType:    "Order",
				AggregateID:      orderID,
				AggregateVersion: 1,
				EventType:        "OrderPlaced",
				Destination:      "orders",
				Payload:          json.RawMessage(fmt.Sprintf(`{"orderId":%q,"amountCents":%d}`, orderID, amount)),
			})
		}
		if err == nil {
			err = tx.Commit()
		} else {
			_ = tx.Rollback()
		}
		if err == nil {
			n++
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
			say("topic orders: %d records", b.records("orders"))
		}
	}
}

func printPipelines(b backend) {
	out, err := kubectlOutput(b, "get", "outboxpipelines", "-n", namespace)
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
