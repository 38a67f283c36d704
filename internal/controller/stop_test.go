package controller

import (
	"context"
	"database/sql"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
	"github.com/outbox-operator/outbox-operator/internal/outboxstats"
	"github.com/outbox-operator/outbox-operator/internal/testenv/logtest"
)

// operatorBackends are the pids of operator connections to db's database; with
// lockWaits only those waiting for a lock.
func operatorBackends(db *sql.DB, lockWaits bool) map[int]bool {
	rows, err := db.Query(`SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND datname = current_database()
AND ($2 = false OR wait_event_type = 'Lock')`, outboxstats.ApplicationName, lockWaits)
	Expect(err).NotTo(HaveOccurred())
	defer rows.Close()
	pids := map[int]bool{}
	for rows.Next() {
		var pid int
		Expect(rows.Scan(&pid)).To(Succeed())
		pids[pid] = true
	}
	Expect(rows.Err()).NotTo(HaveOccurred())
	return pids
}

// A stop is not an error (issue 19): the passes it cancels end quietly and write
// nothing of what they saw after the cancel.
var _ = Describe("A manager stopped during a status read", func() {
	It("logs no Reconciler error and writes no DatabaseUnreachable", func() {
		ns := newNamespace()
		dsn, db, t := migratedDB()
		createSecret(ns, "db", map[string]string{"dsn": dsn})
		// Read every minute, so the suite's manager does not read during the test.
		Expect(k8sClient.Create(suiteCtx, newPipeline(ns, "stopping", "db", func(p *outboxv1.OutboxPipeline) {
			p.Spec.Monitoring.StatusInterval = &metav1.Duration{Duration: time.Minute}
		}))).To(Succeed())
		Eventually(getPipeline(ns, "stopping")).Should(
			WithTransform(conditionOf(outboxv1.ConditionDegraded), Equal("False/"+outboxv1.ReasonHealthy)))
		suitePIDs := operatorBackends(db, false)

		By("a session holding a lock that every read of the table waits for")
		tx, err := db.BeginTx(suiteCtx, nil)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { _ = tx.Rollback() })
		_, err = tx.Exec(`LOCK TABLE ` + t.Qualified() + ` IN ACCESS EXCLUSIVE MODE`)
		Expect(err).NotTo(HaveOccurred())

		By("a second manager, wired as in production, with its own pools and log, whose first pass waits")
		var lines logtest.Lines
		var statusWrites atomic.Int64
		opts := managerOptions()
		opts.Logger = lines.Logger()
		opts.Cache.DefaultNamespaces = map[string]cache.Config{ns: {}}
		opts.NewClient = func(c *rest.Config, o client.Options) (client.Client, error) {
			cl, err := client.NewWithWatch(c, o)
			if err != nil {
				return nil, err
			}
			return interceptor.NewClient(cl, interceptor.Funcs{
				SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
					statusWrites.Add(1)
					return c.SubResource(sub).Update(ctx, obj, opts...)
				},
			}), nil
		}
		mgr, err := ctrl.NewManager(rest.CopyConfig(managerCfg), opts)
		Expect(err).NotTo(HaveOccurred())
		own := outboxstats.NewPools()
		DeferCleanup(own.Close)
		mctx, stop := context.WithCancel(suiteCtx)
		DeferCleanup(stop)
		Expect(SetupAll(mctx, mgr, "outbox-relayworker:test", own)).To(Succeed())
		done := make(chan error, 1)
		go func() { done <- mgr.Start(mctx) }()
		Eventually(func() []int {
			var waiting []int
			for pid := range operatorBackends(db, true) {
				if !suitePIDs[pid] {
					waiting = append(waiting, pid)
				}
			}
			return waiting
		}, "20s").ShouldNot(BeEmpty(), "the second manager's read waits for the lock")

		By("the stop, well within the read's 3 s timeout")
		stop()
		Eventually(done, "20s").Should(Receive(BeNil()))
		Expect(tx.Rollback()).To(Succeed())

		Expect(lines.With("Reconciler error")).To(BeEmpty())
		Expect(lines.Count("pipeline")).To(BeNumerically(">", 0), "the log captured the manager's pass")
		Expect(statusWrites.Load()).To(BeZero(), "the cancelled pass writes no status")
		p := getPipeline(ns, "stopping")()
		Expect(conditionOf(outboxv1.ConditionReady)(p)).NotTo(HaveSuffix(outboxv1.ReasonDatabaseUnreachable))
		Expect(conditionOf(outboxv1.ConditionDegraded)(p)).To(Equal("False/" + outboxv1.ReasonHealthy))
	})
})
