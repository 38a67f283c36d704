package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
	"github.com/outbox-operator/outbox-operator/internal/testenv/localstack"
	"github.com/outbox-operator/outbox-operator/outbox"
)

// demoPipeline is one sample pipeline of the demo, with its own database (two
// pipelines must never share an outbox table), business table and topic.
type demoPipeline struct {
	sample string // file in config/samples
	topic  string // where its events go
	entity string // the business table, and the event's aggregate type

	db *sql.DB
	p  *outboxv1.OutboxPipeline
}

// demoPipelines: the polling sample, and the LogicalReplication one (docs/cdc.md).
var demoPipelines = []*demoPipeline{
	{sample: "outbox_v1alpha1_outboxpipeline.yaml", topic: "orders", entity: "orders"},
	{sample: "outbox_v1alpha1_outboxpipeline_logicalreplication.yaml", topic: "payments", entity: "payments"},
}

// createNamespace makes the demo namespace, admitting only pods that meet the
// restricted Pod Security Standard, as a careful platform team would set it up.
func createNamespace(ctx context.Context, b backend) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace,
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}}
	if err := b.client().Create(ctx, ns); err != nil {
		return fmt.Errorf("create namespace: %w", err)
	}
	return nil
}

// apply creates the database, the business table, the topic, and the sample's Secret
// and OutboxPipeline pointed at them, the way a user would after editing the sample.
func (dp *demoPipeline) apply(ctx context.Context, b backend) error {
	dsn, podDSN, err := b.database(ctx)
	if err != nil {
		return err
	}
	if dp.db, err = sql.Open("postgres", dsn); err != nil {
		return err
	}
	if _, err := dp.db.ExecContext(ctx, `CREATE TABLE `+dp.entity+` (id text PRIMARY KEY, amount_cents bigint NOT NULL, created_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return fmt.Errorf("create %s table: %w", dp.entity, err)
	}
	if err := b.createTopic(dp.topic, 3); err != nil {
		return fmt.Errorf("create topic: %w", err)
	}
	root, err := localstack.ModuleRoot()
	if err != nil {
		return err
	}
	var secret corev1.Secret
	dp.p = &outboxv1.OutboxPipeline{}
	if err := localstack.DecodeSample(root, dp.sample, namespace, &secret, dp.p); err != nil {
		return err
	}
	secret.StringData["dsn"] = podDSN
	dp.p.Spec.Sink.Brokers = b.brokers()
	dp.p.Spec.Monitoring.StatusInterval = &metav1.Duration{Duration: 5 * time.Second}
	if err := b.client().Create(ctx, &secret); err != nil {
		return fmt.Errorf("create secret: %w", err)
	}
	if err := b.client().Create(ctx, dp.p); err != nil {
		return fmt.Errorf("create pipeline: %w", err)
	}
	return nil
}

// run waits for the operator's relay Deployment and gets its workers running.
func (dp *demoPipeline) run(ctx context.Context, b backend) error {
	deploy, err := waitForDeployment(ctx, b, dp.p)
	if err != nil {
		return err
	}
	replicas := 2
	if r := dp.p.Spec.Relay.Replicas; r != nil {
		replicas = int(*r)
	}
	if err := b.runRelay(ctx, namespace, deploy, replicas); err != nil {
		return err
	}
	mode := dp.p.Spec.Source.Mode
	if mode == "" {
		mode = outboxv1.SourcePolling
	}
	say("relay Deployment %s/%s (%s) rendered by the operator: %d workers running", namespace, deploy, mode, replicas)
	return nil
}

// produce is the demo application: per tick, one business row and its event per
// pipeline, each in one transaction, at `rate` per second, until ctx ends. It returns
// how many events committed per topic.
func produce(ctx context.Context, dps []*demoPipeline, rate int) map[string]int64 {
	pub := outbox.Default()
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	n := map[string]int64{}
	for i := int64(1); ; i++ {
		select {
		case <-ctx.Done():
			return n
		case <-tick.C:
		}
		for _, dp := range dps {
			id := fmt.Sprintf("%s-%06d", dp.entity[:len(dp.entity)-1], i)
			if commitOne(ctx, dp, pub, id, 100+(i*37)%9900) == nil {
				n[dp.topic]++
			}
		}
	}
}

func commitOne(ctx context.Context, dp *demoPipeline, pub *outbox.Publisher, id string, amount int64) error {
	tx, err := dp.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	if _, err := tx.ExecContext(ctx, `INSERT INTO `+dp.entity+` (id, amount_cents) VALUES ($1, $2)`, id, amount); err != nil {
		return err
	}
	if err := pub.Publish(ctx, tx, outbox.Event{
		EventID:          outbox.EventID(dp.entity+"-created", id),
		AggregateType:    dp.entity,
		AggregateID:      id,
		AggregateVersion: 1,
		EventType:        dp.entity + ".created",
		Destination:      dp.topic,
		Payload:          json.RawMessage(fmt.Sprintf(`{"id":%q,"amountCents":%d}`, id, amount)),
	}); err != nil {
		return err
	}
	return tx.Commit()
}
