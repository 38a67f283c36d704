package controller

import (
	"context"
	"database/sql"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// testSlotReplacedFor is the SlotReplaced window of the suite's manager (suite_test.go):
// long enough to see the condition stay, short enough to see it go.
const testSlotReplacedFor = 20 * time.Second

// slotPipeline creates a LogicalReplication pipeline on a fresh database and waits for
// the operator's slot; it returns the pipeline, its slot's name and the database.
func slotPipeline(name string) (*outboxv1.OutboxPipeline, string, *sql.DB) {
	ns := newNamespace()
	dsn, db, _ := migratedDB()
	p, slot := slotPipelineWith(ns, name, dsn)
	return p, slot, db
}

// slotPipelineWith is slotPipeline in namespace ns with the DSN dsn.
func slotPipelineWith(ns, name, dsn string) (*outboxv1.OutboxPipeline, string) {
	createSecret(ns, "db", map[string]string{"dsn": dsn})
	p := newPipeline(ns, name, "db", func(p *outboxv1.OutboxPipeline) {
		p.Spec.Source.Mode = outboxv1.SourceLogicalReplication
	})
	Expect(k8sClient.Create(suiteCtx, p)).To(Succeed())
	DeferCleanup(func() { // drops slot and publication (the finalizer) before db closes
		Expect(client.IgnoreNotFound(k8sClient.Delete(suiteCtx, p))).To(Succeed())
		Eventually(func() error {
			return k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(p), &outboxv1.OutboxPipeline{})
		}).Should(MatchError(ContainSubstring("not found")))
	})
	Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(p), p)).To(Succeed())
		g.Expect(p.Status.Replication).NotTo(BeNil())
		g.Expect(p.Status.Replication.Exists).To(BeTrue())
	}).Should(Succeed())
	return p, ReplicationSlot(p)
}

// publicationTables is what pg_publication_tables says the publication covers.
func publicationTables(g Gomega, db *sql.DB, pub string) []string {
	var tables []string
	rows, err := db.Query(`SELECT schemaname || '.' || tablename FROM pg_publication_tables WHERE pubname = $1 ORDER BY 1`, pub)
	g.Expect(err).NotTo(HaveOccurred())
	defer rows.Close()
	for rows.Next() {
		var t string
		g.Expect(rows.Scan(&t)).To(Succeed())
		tables = append(tables, t)
	}
	g.Expect(rows.Err()).NotTo(HaveOccurred())
	return tables
}

// switchTable creates the outbox table outbox_next and points the pipeline at it.
func switchTable(p *outboxv1.OutboxPipeline, db *sql.DB) {
	ctx, cancel := context.WithTimeout(suiteCtx, 20*time.Second)
	defer cancel()
	next, err := pgident.NewTable("public", "outbox_next")
	Expect(err).NotTo(HaveOccurred())
	Expect(schema.Migrate(ctx, db, next, schema.Options{})).To(Succeed())
	Expect(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(p), p)).To(Succeed())
	patch := client.MergeFrom(p.DeepCopy())
	p.Spec.Source.Table = "outbox_next"
	Expect(k8sClient.Patch(suiteCtx, p, patch)).To(Succeed())
}

// expectReplacedThenGone checks what a replacement leaves: lastReplaced with the
// reason, SlotReplaced=True for the window without making the pipeline unhealthy to
// kstatus or Argo CD (Degraded stays Healthy, no Stalled, no Reconciling of its own;
// test/gitops computes both on such a status), then the condition gone after the
// window while lastReplaced stays.
func expectReplacedThenGone(p *outboxv1.OutboxPipeline, slot, reason string, db *sql.DB) {
	var rec outboxv1.SlotReplacement
	Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(p), p)).To(Succeed())
		g.Expect(p.Status.Replication).NotTo(BeNil())
		g.Expect(p.Status.Replication.LastReplaced).NotTo(BeNil())
		rec = *p.Status.Replication.LastReplaced
		g.Expect(rec.Reason).To(Equal(reason))
		g.Expect(rec.Message).To(ContainSubstring(slot))
		c := condition(p.Status.Conditions, outboxv1.ConditionSlotReplaced)
		g.Expect(c.Status).To(BeEquivalentTo("True"))
		g.Expect(c.Reason).To(Equal(reason))
		g.Expect(p.Status.Replication.Exists).To(BeTrue())
		g.Expect(p.Status.Replication.WALStatus).NotTo(Equal("lost"))
	}).Should(Succeed())
	var slots int
	Expect(db.QueryRow(`SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1 AND wal_status <> 'lost'`, slot).Scan(&slots)).To(Succeed())
	Expect(slots).To(Equal(1), "the operator made a new slot")

	healthy := func(g Gomega) {
		g.Expect(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(p), p)).To(Succeed())
		g.Expect(conditionOf(outboxv1.ConditionDegraded)(p)).To(Equal("False/" + outboxv1.ReasonHealthy))
		g.Expect(meta.FindStatusCondition(p.Status.Conditions, outboxv1.ConditionStalled)).To(BeNil())
		// envtest runs no Deployment controller, so the rollout never ends: Reconciling
		// is there for it, and for nothing else.
		if c := meta.FindStatusCondition(p.Status.Conditions, outboxv1.ConditionReconciling); c != nil {
			g.Expect(c.Reason).To(Equal(outboxv1.ReasonRollingOut))
		}
	}
	// It stays (passes run every statusInterval, 5 s here) while the window lasts.
	stay := time.Until(rec.Time.Add(testSlotReplacedFor - 3*time.Second))
	Expect(stay).To(BeNumerically(">", 5*time.Second), "the replacement took too long to show")
	Consistently(func(g Gomega) {
		healthy(g)
		g.Expect(meta.IsStatusConditionTrue(p.Status.Conditions, outboxv1.ConditionSlotReplaced)).To(BeTrue())
	}, stay, 500*time.Millisecond).Should(Succeed())
	// Then it goes; the record stays.
	Eventually(func(g Gomega) {
		healthy(g)
		g.Expect(meta.FindStatusCondition(p.Status.Conditions, outboxv1.ConditionSlotReplaced)).To(BeNil())
		g.Expect(p.Status.Replication.LastReplaced).NotTo(BeNil())
		g.Expect(*p.Status.Replication.LastReplaced).To(Equal(rec))
	}, testSlotReplacedFor+10*time.Second, 500*time.Millisecond).Should(Succeed())
	Expect(time.Now()).To(BeTemporally(">=", rec.Time.Add(testSlotReplacedFor)), "the condition went before its window")
}

var _ = Describe("a replaced replication slot", func() {
	It("shows a slot dropped out from under the operator in status and as SlotReplaced for its window", func() {
		p, slot, db := slotPipeline("dropped")
		_, err := db.Exec(`SELECT pg_drop_replication_slot($1)`, slot)
		Expect(err).NotTo(HaveOccurred())
		expectReplacedThenGone(p, slot, outboxv1.ReasonSlotMissing, db)
	})

	It("shows a slot PostgreSQL invalidated (max_slot_wal_keep_size) in status and as SlotReplaced for its window", func() {
		p, slot, db := slotPipeline("invalidated")
		// Keep no WAL for slots, then move past the slot's segment and checkpoint:
		// PostgreSQL invalidates the slot (nobody reads it here) as it would a stuck
		// slot in production. The setting is server-wide, so it is reset at once.
		set := func(v string) {
			_, err := db.Exec(`ALTER SYSTEM SET max_slot_wal_keep_size = ` + v)
			Expect(err).NotTo(HaveOccurred())
			_, err = db.Exec(`SELECT pg_reload_conf()`)
			Expect(err).NotTo(HaveOccurred())
		}
		set("'1MB'")
		DeferCleanup(set, "DEFAULT")
		table, err := pgident.NewTable("public", "outbox_event")
		Expect(err).NotTo(HaveOccurred())
		// Each round moves to a new WAL segment and checkpoints, until the operator
		// reports the replacement (checked first, so its new slot is left alone).
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(p), p)).To(Succeed())
			if p.Status.Replication.LastReplaced != nil {
				return
			}
			insertRow(db, table, "SENT", "")
			for _, q := range []string{`SELECT pg_switch_wal()`, `CHECKPOINT`} {
				_, err := db.Exec(q)
				g.Expect(err).NotTo(HaveOccurred())
			}
			g.Expect(p.Status.Replication.LastReplaced).NotTo(BeNil())
		}, 60*time.Second, time.Second).Should(Succeed())
		set("DEFAULT")
		expectReplacedThenGone(p, slot, outboxv1.ReasonSlotInvalidated, db)
	})
})

var _ = Describe("changing spec.source.table of a LogicalReplication pipeline", func() {
	It("moves the publication to exactly the new table and keeps the slot", func() {
		p, slot, db := slotPipeline("moved")
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(p), p)).To(Succeed())
			g.Expect(p.Status.Replication.PublicationTable).To(Equal("public.outbox_event"))
		}).Should(Succeed())
		confirmed := p.Status.Replication.ConfirmedLSN // no reader here: only a new slot would move it
		switchTable(p, db)
		Eventually(func(g Gomega) {
			tables := publicationTables(g, db, slot)
			g.Expect(tables).To(Equal([]string{"public.outbox_next"}))

			g.Expect(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(p), p)).To(Succeed())
			g.Expect(p.Status.ObservedGeneration).To(Equal(p.Generation))
			g.Expect(p.Status.Replication.PublicationTable).To(Equal("public.outbox_next"))
			g.Expect(conditionOf(outboxv1.ConditionDegraded)(p)).To(Equal("False/" + outboxv1.ReasonHealthy))
		}).Should(Succeed())
		// Still inserts only (the relay's own updates must not come back), and the same
		// slot: moving the publication is no replacement.
		var ins, upd bool
		Expect(db.QueryRow(`SELECT pubinsert, pubupdate FROM pg_publication WHERE pubname = $1`, slot).Scan(&ins, &upd)).To(Succeed())
		Expect([]bool{ins, upd}).To(Equal([]bool{true, false}))
		Expect(p.Status.Replication.LastReplaced).To(BeNil())
		var now string
		Expect(db.QueryRow(`SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&now)).To(Succeed())
		Expect(now).To(Equal(confirmed), "the slot was replaced")
	})
})

var _ = Describe("a publication the operator cannot move", func() {
	It("is Degraded PublicationMismatch until the DSN's user owns the new table, then moves", func() {
		ns := newNamespace()
		dsn, db, _ := migratedDB()
		// The DSN's user owns the first table only (ALTER PUBLICATION ... SET TABLE needs
		// ownership of the new one); it reads every table, also those made later, so the
		// status is not masked (explicit grants: pg_read_all_data is PostgreSQL 14+).
		role := strings.ReplaceAll(ns, "-", "_")
		for _, q := range []string{
			`CREATE ROLE ` + role + ` LOGIN REPLICATION`,
			`GRANT SELECT ON ALL TABLES IN SCHEMA public TO ` + role,
			`ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT ON TABLES TO ` + role,
			`GRANT CREATE ON DATABASE ` + pgident.Quote(dbName(db)) + ` TO ` + role,
			`ALTER TABLE outbox_event OWNER TO ` + role,
		} {
			_, err := db.Exec(q)
			Expect(err).NotTo(HaveOccurred(), q)
		}
		p, slot := slotPipelineWith(ns, "unmovable", strings.Replace(dsn, "postgres://postgres@", "postgres://"+role+"@", 1))
		switchTable(p, db)
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(p), p)).To(Succeed())
			g.Expect(p.Status.ObservedGeneration).To(Equal(p.Generation))
			c := condition(p.Status.Conditions, outboxv1.ConditionDegraded)
			g.Expect(c.Reason).To(Equal(outboxv1.ReasonPublicationMismatch))
			g.Expect(c.Message).To(ContainSubstring("covers public.outbox_event, not spec.source.table public.outbox_next"))
			g.Expect(p.Status.Replication.PublicationTable).To(Equal("public.outbox_event"))
		}).Should(Succeed())
		Expect(publicationTables(Default, db, slot)).To(Equal([]string{"public.outbox_event"}))

		_, err := db.Exec(`ALTER TABLE outbox_next OWNER TO ` + role)
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			g.Expect(publicationTables(g, db, slot)).To(Equal([]string{"public.outbox_next"}))
			g.Expect(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(p), p)).To(Succeed())
			g.Expect(p.Status.Replication.PublicationTable).To(Equal("public.outbox_next"))
			g.Expect(conditionOf(outboxv1.ConditionDegraded)(p)).To(Equal("False/" + outboxv1.ReasonHealthy))
		}).Should(Succeed())
	})
})

// dbName is the name of the database db is connected to.
func dbName(db *sql.DB) string {
	var name string
	Expect(db.QueryRow(`SELECT current_database()`).Scan(&name)).To(Succeed())
	return name
}
