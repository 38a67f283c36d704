// Package cluster runs the product as users run it: config/default applied to a real
// one-node cluster (hack/cluster: kubelet, containerd, runc), the pods started from the
// images of `make images`, a private PostgreSQL and the dev broker on the host, reached
// from the pod network at the node's address. `make e2e-cluster` brings the cluster up,
// runs this suite and takes the cluster down; without it the suite skips and says why.
package cluster

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
	"github.com/outbox-operator/outbox-operator/internal/testenv/clusterstack"
	"github.com/outbox-operator/outbox-operator/internal/testenv/localstack"
)

var (
	stack *clusterstack.Stack
	k8s   client.Client
)

func TestCluster(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "outbox-operator on a one-node cluster")
}

var _ = BeforeSuite(func() {
	env, ok := clusterstack.EnvFromOS()
	if !ok {
		Skip("no local cluster: `make e2e-cluster` starts one (hack/cluster) and runs this suite against it")
	}
	var err error
	stack, err = clusterstack.Start(env, clusterstack.Options{Topics: []string{"orders", "orders-replayed", "payments"}, Out: GinkgoWriter})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(stack.Stop)
	k8s = stack.Client
	Expect(stack.InstallOperator()).To(Succeed())
})

// kubectl runs the cluster's kubectl with the admin kubeconfig.
func kubectl(args ...string) (string, error) { return stack.Kubectl(args...) }

// getColumns prints `kubectl get <what>` and returns the row of name keyed by header.
func getColumns(ns, what, name string) (map[string]string, error) {
	out, err := kubectl("-n", ns, "get", what, name)
	if err != nil {
		return nil, fmt.Errorf("%v: %s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		return nil, fmt.Errorf("want a header and one row, got %q", out)
	}
	// Columns are aligned and a value may be empty (OLDEST with nothing pending), so
	// cut the row at the header's column starts rather than at spaces.
	head, row := lines[0], lines[1]+strings.Repeat(" ", len(lines[0]))
	m := map[string]string{}
	names := strings.Fields(head)
	at := 0
	for i, h := range names {
		start := at + strings.Index(head[at:], h)
		end := len(row)
		if i+1 < len(names) {
			end = start + len(h) + strings.Index(head[start+len(h):], names[i+1])
		}
		m[h] = strings.TrimSpace(row[start:end])
		at = start + len(h)
	}
	return m, nil
}

// deploymentRolledOut is true once every replica runs the newest template and is ready.
func deploymentRolledOut(d *appsv1.Deployment) bool {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	return d.Status.ObservedGeneration >= d.Generation && d.Status.UpdatedReplicas == want &&
		d.Status.ReadyReplicas == want && d.Status.Replicas == want
}

// applyTenant sets up a tenant as a platform team would: a namespace admitting only
// pods that meet the restricted standard, a database with the business table orders,
// and the sample's Secret and OutboxPipeline pointed at it and at the host's broker.
// It returns the database (closed at the end of the container). mut changes the
// pipeline before it is created.
func applyTenant(ctx context.Context, ns, sample string, pipeline *outboxv1.OutboxPipeline, mut ...func(*outboxv1.OutboxPipeline)) *sql.DB {
	Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}})).To(Succeed())
	dsn, err := stack.PG.CreateDatabase(ctx, ns)
	Expect(err).NotTo(HaveOccurred())
	db, err := sql.Open("postgres", dsn)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(db.Close)
	_, err = db.Exec(`CREATE TABLE orders (order_id text PRIMARY KEY, version bigint NOT NULL)`)
	Expect(err).NotTo(HaveOccurred())
	var secret corev1.Secret
	Expect(localstack.DecodeSample(stack.Root, sample, ns, &secret, pipeline)).To(Succeed())
	secret.StringData["dsn"], err = stack.PodDSN(dsn)
	Expect(err).NotTo(HaveOccurred())
	pipeline.Spec.Sink.Brokers = []string{stack.Broker}
	pipeline.Spec.Monitoring.StatusInterval = &metav1.Duration{Duration: 5 * time.Second}
	for _, m := range mut {
		m(pipeline)
	}
	Expect(k8s.Create(ctx, &secret)).To(Succeed())
	Expect(k8s.Create(ctx, pipeline)).To(Succeed())
	return db
}
