// workload.go: N pipelines over the namespaces, each with its own table and DSN
// Secret, created as a team would apply them; and what "reconciled" means here: the
// relay Deployment exists and the status was written for the current generation from
// a successful read of the table.

package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
	"github.com/outbox-operator/outbox-operator/internal/controller"
	"github.com/outbox-operator/outbox-operator/internal/pgident"
)

// pipelineRef names pipeline i: its namespace, name, table and Secret.
type pipelineRef struct {
	namespace, name, secret string
	table                   pgident.Table
}

func refOf(i int) pipelineRef {
	t, _ := pgident.NewTable("public", fmt.Sprintf("outbox_p%04d", i))
	name := fmt.Sprintf("p-%04d", i)
	return pipelineRef{namespace: fmt.Sprintf("bench-%02d", i%*namespaces), name: name, secret: name + "-db", table: t}
}

func (r pipelineRef) key() client.ObjectKey {
	return client.ObjectKey{Namespace: r.namespace, Name: r.name}
}

// The probes' pipelines: the password probe's has rotRole to itself; the row probe's
// is an ordinary one.
var (
	rotProbe = refOf(0)
	rowProbe = refOf(1)
)

func refs(n int) []pipelineRef {
	out := make([]pipelineRef, n)
	for i := range out {
		out[i] = refOf(i)
	}
	return out
}

func tablesOf(rs []pipelineRef) []pgident.Table {
	out := make([]pgident.Table, len(rs))
	for i, r := range rs {
		out[i] = r.table
	}
	return out
}

func createNamespaces(ctx context.Context, c client.Client) error {
	for i := range *namespaces {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bench-%02d", i)}}
		if err := c.Create(ctx, ns); err != nil {
			return err
		}
	}
	return nil
}

func secretFor(r pipelineRef, dsn string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: r.namespace, Name: r.secret},
		StringData: map[string]string{"dsn": dsn}}
}

func pipelineFor(r pipelineRef) *outboxv1.OutboxPipeline {
	one := int32(1)
	return &outboxv1.OutboxPipeline{
		ObjectMeta: metav1.ObjectMeta{Namespace: r.namespace, Name: r.name},
		Spec: outboxv1.OutboxPipelineSpec{
			Source: outboxv1.PostgresSource{DSNSecretRef: outboxv1.SecretKeyRef{Name: r.secret, Key: "dsn"},
				Schema: r.table.Schema, Table: r.table.Name, Contract: outboxv1.ContractV1}, // database.go migrates v1 tables
			Sink:       outboxv1.KafkaSink{Brokers: []string{"kafka-0.kafka.svc:9092"}},
			Relay:      outboxv1.RelaySettings{Replicas: &one},
			Monitoring: outboxv1.MonitoringSettings{StatusInterval: &metav1.Duration{Duration: *statusInterval}},
		},
	}
}

// createPipelines creates each pipeline's Secret, then the pipeline, 8 at a time.
func createPipelines(ctx context.Context, c client.Client, rs []pipelineRef, dsnOf func(pipelineRef) string) error {
	return forEach(8, rs, func(r pipelineRef) error {
		if err := c.Create(ctx, secretFor(r, dsnOf(r))); err != nil {
			return fmt.Errorf("create Secret %s/%s: %w", r.namespace, r.secret, err)
		}
		if err := c.Create(ctx, pipelineFor(r)); err != nil {
			return fmt.Errorf("create %s: %w", r.key(), err)
		}
		return nil
	})
}

// forEach runs fn on every item, workers at a time, and returns the first error
// (the items not started by then are skipped).
func forEach[T any](workers int, items []T, fn func(T) error) error {
	work := make(chan T)
	var mu sync.Mutex
	var first error
	failed := func() bool { mu.Lock(); defer mu.Unlock(); return first != nil }
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range work {
				if err := fn(it); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for _, it := range items {
		if failed() {
			break
		}
		work <- it
	}
	close(work)
	wg.Wait()
	return first
}

// reconciled reports whether p's status was written for its generation from a read
// of its table.
func reconciled(p *outboxv1.OutboxPipeline) bool {
	return p.Status.ObservedGeneration == p.Generation && p.Status.LastCheckTime != nil
}

// countReconciled lists pipelines and relay Deployments once and counts the pipelines
// that are reconciled and have their Deployment.
func countReconciled(ctx context.Context, c client.Client) (int, error) {
	var ps outboxv1.OutboxPipelineList
	if err := c.List(ctx, &ps); err != nil {
		return 0, err
	}
	var ds appsv1.DeploymentList
	if err := c.List(ctx, &ds, client.MatchingLabels{controller.LabelManagedBy: controller.ManagedBy}); err != nil {
		return 0, err
	}
	deps := map[client.ObjectKey]bool{}
	for _, d := range ds.Items {
		deps[client.ObjectKeyFromObject(&d)] = true
	}
	n := 0
	for i := range ps.Items {
		p := &ps.Items[i]
		if reconciled(p) && deps[client.ObjectKey{Namespace: p.Namespace, Name: controller.RelayName(p)}] {
			n++
		}
	}
	return n, nil
}

// waitReconciled polls once a second until all n pipelines are reconciled or
// timeout; it returns how many were and when the last one was seen.
func waitReconciled(ctx context.Context, c client.Client, m *manager, n int, start time.Time, timeout time.Duration) (int, time.Duration, error) {
	done := 0
	for time.Since(start) < timeout {
		if err := m.exited(); err != nil {
			return done, 0, err
		}
		var err error
		if done, err = countReconciled(ctx, c); err != nil {
			return done, 0, err
		}
		if done == n {
			return done, time.Since(start), nil
		}
		time.Sleep(time.Second)
	}
	return done, 0, nil
}

// readReason is the Ready condition's reason: DatabaseUnreachable when the last read
// failed, something else (WorkersNotReady here, with no pods) when it worked.
func readReason(ctx context.Context, c client.Client, r pipelineRef) (string, error) {
	var p outboxv1.OutboxPipeline
	if err := c.Get(ctx, r.key(), &p); err != nil {
		return "", err
	}
	if cond := meta.FindStatusCondition(p.Status.Conditions, outboxv1.ConditionReady); cond != nil {
		return cond.Reason, nil
	}
	return "", nil
}
