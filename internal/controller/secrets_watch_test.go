package controller

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
	"github.com/outbox-operator/outbox-operator/internal/outboxstats"
)

// Secrets are read when they change, not on every pass (issue 19): the manager
// watches their metadata and fetches a Secret's data only when its resourceVersion
// moved.
var _ = Describe("Referenced Secrets (issue 19)", func() {
	It("are not read while nothing changes", func() {
		ns := newNamespace()
		dsn, _, _ := migratedDB()
		createSecret(ns, "db", map[string]string{"dsn": dsn})
		Expect(k8sClient.Create(suiteCtx, newPipeline(ns, "steady", "db"))).To(Succeed()) // statusInterval 5s
		Eventually(getPipeline(ns, "steady")).Should(
			WithTransform(conditionOf(outboxv1.ConditionDegraded), Equal("False/"+outboxv1.ReasonHealthy)))
		gets := secretGets(ns)
		firstRead := seriesValue("outbox_pipeline_status_read_timestamp_seconds", ns, "steady")()
		before, start := gets(), time.Now()

		By("three status intervals of the manager's own passes")
		time.Sleep(16 * time.Second)
		n := gets() - before
		AddReportEntry("steady-state Secret GETs", fmt.Sprintf("%d Secret GETs in %s (%.2f/s), one pipeline, statusInterval 5s",
			n, time.Since(start).Round(time.Second), float64(n)/time.Since(start).Seconds()))
		Expect(seriesValue("outbox_pipeline_status_read_timestamp_seconds", ns, "steady")()).To(BeNumerically(">", firstRead+5),
			"the passes ran (they read the table) over the window")
		Expect(n).To(BeZero(), "no Secret GET while the Secret is unchanged")
	})
})

var _ = Describe("A rotated or deleted Secret (issue 19)", func() {
	// slowPipeline reads every minute: what happens sooner is the Secret watch's doing.
	slowPipeline := func(ns, name string) *outboxv1.OutboxPipeline {
		return newPipeline(ns, name, "db", func(p *outboxv1.OutboxPipeline) {
			p.Spec.Monitoring.StatusInterval = &metav1.Duration{Duration: time.Minute}
		})
	}
	secretHash := func(ns, name string) func() string {
		return func() string {
			var dep appsv1.Deployment
			Expect(k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: ns, Name: name + "-relay"}, &dep)).To(Succeed())
			return dep.Spec.Template.Annotations[AnnotationSecretHash]
		}
	}

	It("uses the new credentials within 30 s and rolls the workers", func() {
		ns := newNamespace()
		dsn, db, t := migratedDB()
		// The test server trusts loopback, so a password is never checked: the rotation
		// is to a new role, and the old one may no longer log in.
		oldRole, newRole := fmt.Sprintf("rot_old_%s", strings.ReplaceAll(ns, "-", "_")), fmt.Sprintf("rot_new_%s", strings.ReplaceAll(ns, "-", "_"))
		for _, role := range []string{oldRole, newRole} {
			_, err := db.Exec(`CREATE ROLE ` + role + ` LOGIN SUPERUSER`)
			Expect(err).NotTo(HaveOccurred())
		}
		asRole := func(role string) string {
			return strings.Replace(dsn, "postgres://postgres@", "postgres://"+role+"@", 1)
		}
		secret := createSecret(ns, "db", map[string]string{"dsn": asRole(oldRole)})
		Expect(k8sClient.Create(suiteCtx, slowPipeline(ns, "rotated"))).To(Succeed())
		Eventually(getPipeline(ns, "rotated")).Should(And(
			HaveField("Status.Workers", "0/2"),
			WithTransform(conditionOf(outboxv1.ConditionDegraded), Equal("False/"+outboxv1.ReasonHealthy)),
		))
		hashBefore := secretHash(ns, "rotated")()

		By("a row the next read will see, then the old credentials revoked and their sessions ended")
		insertRow(db, t, "PENDING", "")
		_, err := db.Exec(`ALTER ROLE ` + oldRole + ` NOLOGIN`)
		Expect(err).NotTo(HaveOccurred())
		_, err = db.Exec(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1`, oldRole)
		Expect(err).NotTo(HaveOccurred())

		By("the Secret updated with the new credentials")
		Expect(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(secret), secret)).To(Succeed())
		secret.Data = map[string][]byte{"dsn": []byte(asRole(newRole))}
		Expect(k8sClient.Update(suiteCtx, secret)).To(Succeed())
		rotated := time.Now()
		Eventually(func(g Gomega) {
			p := getPipeline(ns, "rotated")()
			g.Expect(p.Status.Pending).To(Equal(int64(1)), "a read after the rotation succeeded")
			g.Expect(conditionOf(outboxv1.ConditionDegraded)(p)).To(Equal("False/" + outboxv1.ReasonHealthy))
			g.Expect(secretHash(ns, "rotated")()).NotTo(Equal(hashBefore), "the workers roll")
		}, "30s", "100ms").Should(Succeed())
		delay := time.Since(rotated)
		AddReportEntry("rotation delay", fmt.Sprintf("rotated Secret used after %s (statusInterval 1m)", delay.Round(10*time.Millisecond)))
		var n int
		Expect(db.QueryRow(`SELECT count(*) FROM pg_stat_activity WHERE usename = $1 AND application_name = $2`,
			newRole, outboxstats.ApplicationName).Scan(&n)).To(Succeed())
		Expect(n).To(BeNumerically(">", 0), "the operator reads as the new role")
	})

	It("says SecretNotFound as soon as the Secret is deleted", func() {
		ns := newNamespace()
		dsn, _, _ := migratedDB()
		secret := createSecret(ns, "db", map[string]string{"dsn": dsn})
		Expect(k8sClient.Create(suiteCtx, slowPipeline(ns, "orphan"))).To(Succeed())
		Eventually(getPipeline(ns, "orphan")).Should(
			WithTransform(conditionOf(outboxv1.ConditionDegraded), Equal("False/"+outboxv1.ReasonHealthy)))

		Expect(k8sClient.Delete(suiteCtx, secret)).To(Succeed())
		Eventually(getPipeline(ns, "orphan"), "30s").Should(
			WithTransform(conditionOf(outboxv1.ConditionReady), Equal("False/"+outboxv1.ReasonSecretNotFound)))
		Expect(condition(getPipeline(ns, "orphan")().Status.Conditions, outboxv1.ConditionReady).Message).To(Equal(
			`Secret "db" referenced by spec.source.dsnSecretRef was not found in namespace "` + ns +
				`"; create it there (Secrets of other namespaces cannot be referenced)`))

		By("created again, it is read again")
		createSecret(ns, "db", map[string]string{"dsn": dsn})
		Eventually(getPipeline(ns, "orphan"), "30s").Should(
			WithTransform(conditionOf(outboxv1.ConditionReady), Not(Equal("False/"+outboxv1.ReasonSecretNotFound))))
	})
})

// What a Secret's event wakes, looked up in the suite manager's cache with the
// controllers' own indexes.
var _ = Describe("The Secret watch's referrers", func() {
	It("are the pipelines naming the Secret, their replays and retention policies, and consumer replays naming it", func() {
		ns := newNamespace()
		ref := outboxv1.PipelineReference{Name: "orders"}
		objs := []client.Object{
			newPipeline(ns, "orders", "db"),
			newPipeline(ns, "other", "other-db"),
			&outboxv1.DeadLetterReplay{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "replay"}, Spec: outboxv1.DeadLetterReplaySpec{
				PipelineRef: ref, Selector: outboxv1.ReplaySelector{ErrorCode: "permanent"}, Reason: "test"}},
			&outboxv1.DeadLetterReplay{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "consumer"}, Spec: outboxv1.DeadLetterReplaySpec{
				Consumer: &outboxv1.ConsumerTarget{Group: "billing", DatabaseSecretRef: outboxv1.SecretKeyRef{Name: "db", Key: "dsn"}},
				Selector: outboxv1.ReplaySelector{ErrorCode: "permanent"}, Reason: "test"}},
			&outboxv1.RetentionPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nightly"}, Spec: outboxv1.RetentionPolicySpec{PipelineRef: ref}},
			&outboxv1.RetentionPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other"},
				Spec: outboxv1.RetentionPolicySpec{PipelineRef: outboxv1.PipelineReference{Name: "other"}}},
		}
		for _, o := range objs {
			Expect(k8sClient.Create(suiteCtx, o)).To(Succeed())
		}
		w := secretWatch{c: suiteCache}
		names := func(reqs []reconcile.Request) []string {
			var out []string
			for _, r := range reqs {
				Expect(r.Namespace).To(Equal(ns))
				out = append(out, r.Name)
			}
			return out
		}
		Eventually(func(g Gomega) {
			g.Expect(names(w.pipelines(suiteCtx, ns, "db"))).To(ConsistOf("orders"))
			g.Expect(names(w.replays(suiteCtx, ns, "db"))).To(ConsistOf("replay", "consumer"))
			g.Expect(names(w.retentionPolicies(suiteCtx, ns, "db"))).To(ConsistOf("nightly"))
			g.Expect(names(w.retentionPolicies(suiteCtx, ns, "other-db"))).To(ConsistOf("other"))
			g.Expect(names(w.replays(suiteCtx, ns, "unrelated"))).To(BeEmpty())
		}).Should(Succeed())
	})
})
