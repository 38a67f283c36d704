package controller

import (
	"database/sql"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
	"github.com/outbox-operator/outbox-operator/internal/outboxstats"
	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// operatorConnections counts the manager's connections to db's database.
func operatorConnections(db *sql.DB) func() (int, error) {
	return func() (int, error) {
		var n int
		err := db.QueryRow(`SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND datname = current_database()`,
			outboxstats.ApplicationName).Scan(&n)
		return n, err
	}
}

var _ = Describe("Many pipelines on one database (issue 19)", func() {
	It("share one bounded pool, which closes when the last pipeline is deleted", func() {
		const pipelines = 12
		dsn, db, _ := migratedDB()
		var seen []int
		for i := range pipelines {
			t, err := pgident.NewTable("public", fmt.Sprintf("outbox_%02d", i))
			Expect(err).NotTo(HaveOccurred())
			Expect(schema.Migrate(suiteCtx, db, t, schema.Options{})).To(Succeed())
			insertRow(db, t, schema.StatusPending, "")
		}
		var created []*outboxv1.OutboxPipeline
		nss := []string{newNamespace(), newNamespace(), newNamespace()}
		for _, ns := range nss {
			createSecret(ns, "db", map[string]string{"dsn": dsn})
		}
		for i := range pipelines {
			p := newPipeline(nss[i%len(nss)], fmt.Sprintf("p%02d", i), "db", func(p *outboxv1.OutboxPipeline) {
				p.Spec.Source.Table = fmt.Sprintf("outbox_%02d", i)
			})
			Expect(k8sClient.Create(suiteCtx, p)).To(Succeed())
			created = append(created, p)
		}
		conns := operatorConnections(db)
		// Every pipeline has read its table, and while they keep reading every 5 s the
		// manager never holds more than the bound.
		for _, p := range created {
			Eventually(func(g Gomega) {
				g.Expect(getPipeline(p.Namespace, p.Name)().Status.Pending).To(Equal(int64(1)))
				n, err := conns()
				g.Expect(err).NotTo(HaveOccurred())
				seen = append(seen, n)
			}).Should(Succeed())
		}
		Consistently(func(g Gomega) {
			n, err := conns()
			g.Expect(err).NotTo(HaveOccurred())
			seen = append(seen, n)
		}, "6s", "100ms").Should(Succeed())
		Expect(seen).To(HaveEach(BeNumerically("<=", outboxstats.DefaultMaxConns)),
			"%d pipelines on one database: the manager's connections must stay within the pool's bound", pipelines)
		Expect(seen).To(ContainElement(BeNumerically(">", 0)), "the count must see the manager's connections at all")

		for _, p := range created {
			Expect(k8sClient.Delete(suiteCtx, p)).To(Succeed())
		}
		Eventually(conns).Should(BeZero(), "a pool no pipeline uses any more is closed")
	})
})
