package controller

import (
	"context"
	"io"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
	"github.com/outbox-operator/outbox-operator/internal/contract"
	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/cli"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// setContract changes a pipeline's spec.source.contract with a merge patch (no
// resourceVersion, so the controller's status writes cause no conflict) and returns
// the API server's answer.
func setContract(ns, name string, c outboxv1.TableContract) error {
	p := getPipeline(ns, name)()
	base := p.DeepCopy()
	p.Spec.Source.Contract = c
	return k8sClient.Patch(suiteCtx, p, client.MergeFrom(base))
}

// runInitContainer runs a rendered init container's command with the worker's own CLI,
// its environment as rendered and the DSN its secretKeyRef would resolve to.
func runInitContainer(ic corev1.Container, dsn string) error {
	env := podEnv(ic)
	return cli.Run(suiteCtx, ic.Args, func(k string) (string, bool) {
		if k == contract.EnvDSN {
			return dsn, true
		}
		return env(k)
	}, io.Discard, io.Discard)
}

var _ = Describe("table contract v2", func() {
	It("renders the v2 migrate, shows a v1 table as ContractMismatch until the rendered init container upgrades it, and lets the spec go back only while the table is v1", func() {
		ns := newNamespace()
		dsn, _, _ := migratedDB() // a v1 table
		createSecret(ns, "db", map[string]string{"dsn": dsn})
		Expect(k8sClient.Create(suiteCtx, newPipeline(ns, "up", "db", func(p *outboxv1.OutboxPipeline) {
			p.Spec.Source.Migrate, p.Spec.Source.Contract, p.Spec.Source.Shards = true, outboxv1.ContractV2, 64
		}))).To(Succeed())

		By("the migrate init container is told the contract and the shard count")
		Eventually(func() []string {
			var d appsv1.Deployment
			if err := k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: ns, Name: "up-relay"}, &d); err != nil {
				return nil
			}
			if len(d.Spec.Template.Spec.InitContainers) != 1 {
				return nil
			}
			return d.Spec.Template.Spec.InitContainers[0].Args
		}).Should(Equal([]string{"migrate", "--contract=v2", "--shards=64"}))

		By("until the upgrade, the v1 table is the Ready condition, naming who upgrades it")
		Eventually(getPipeline(ns, "up"), 20*time.Second).Should(And(
			HaveField("Status.TableContract", "v1"),
			WithTransform(conditionOf(outboxv1.ConditionReady), Equal("False/"+outboxv1.ReasonContractMismatch)),
		))
		Expect(condition(getPipeline(ns, "up")().Status.Conditions, outboxv1.ConditionReady).Message).
			To(ContainSubstring("follows table contract v1 and spec.source.contract is v2: the relay pods' migrate init container upgrades it"))

		By("the table is still v1, so the spec may go back, and forward again")
		Expect(setContract(ns, "up", outboxv1.ContractV1)).To(Succeed())
		Eventually(getPipeline(ns, "up"), 20*time.Second).Should(
			WithTransform(conditionOf(outboxv1.ConditionReady), Not(Equal("False/"+outboxv1.ReasonContractMismatch))))
		Expect(setContract(ns, "up", outboxv1.ContractV2)).To(Succeed())

		By("the rendered init container, run by the worker's own CLI, upgrades the table")
		var d appsv1.Deployment
		Eventually(func() []string {
			if err := k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: ns, Name: "up-relay"}, &d); err != nil {
				return nil
			}
			return d.Spec.Template.Spec.InitContainers[0].Args
		}).Should(Equal([]string{"migrate", "--contract=v2", "--shards=64"}))
		Expect(runInitContainer(d.Spec.Template.Spec.InitContainers[0], dsn)).To(Succeed())

		By("the table is v2 now: no mismatch, and the spec can no longer go back")
		Eventually(getPipeline(ns, "up"), 20*time.Second).Should(And(
			HaveField("Status.TableContract", "v2"),
			WithTransform(conditionOf(outboxv1.ConditionReady), Not(Equal("False/"+outboxv1.ReasonContractMismatch))),
		))
		err := setContract(ns, "up", outboxv1.ContractV1)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("a v2 table is never turned back into a v1 table"))
	})

	It("leaves a table made with the old default of 256 shards at 256 when spec.source.shards is unset, and shows the count in status", func() {
		ns := newNamespace()
		ctx, cancel := context.WithTimeout(suiteCtx, 20*time.Second)
		defer cancel()
		dsn, err := pgSrv.CreateDatabase(ctx, "old256")
		Expect(err).NotTo(HaveOccurred())
		t, err := pgident.NewTable("public", "outbox_event")
		Expect(err).NotTo(HaveOccurred())
		db := openDB(dsn)
		Expect(schema.MigrateV2(ctx, db, t, schema.V2Options{Shards: 256})).To(Succeed())
		_, err = db.ExecContext(ctx, `INSERT INTO `+t.Qualified()+` (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, event_version, destination, message_key, payload)
			VALUES ('e-1', 'order', 'o-1', 1, 'created', 1, 'orders', 'o-1', '{}')`)
		Expect(err).NotTo(HaveOccurred())
		createSecret(ns, "db", map[string]string{"dsn": dsn})
		Expect(k8sClient.Create(suiteCtx, newPipeline(ns, "old", "db", func(p *outboxv1.OutboxPipeline) {
			p.Spec.Source.Migrate, p.Spec.Source.Contract = true, outboxv1.ContractV2
		}))).To(Succeed())

		By("the stored spec has no shard count, and the init container names none")
		Expect(getPipeline(ns, "old")().Spec.Source.Shards).To(BeZero())
		var d appsv1.Deployment
		Eventually(func() []string {
			if err := k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: ns, Name: "old-relay"}, &d); err != nil || len(d.Spec.Template.Spec.InitContainers) != 1 {
				return nil
			}
			return d.Spec.Template.Spec.InitContainers[0].Args
		}).Should(Equal([]string{"migrate", "--contract=v2"}))

		By("the rendered init container, run by the worker's own CLI, keeps the table's 256 shards")
		Expect(runInitContainer(d.Spec.Template.Spec.InitContainers[0], dsn)).To(Succeed())
		c, err := schema.DetectContract(ctx, db, t)
		Expect(err).NotTo(HaveOccurred())
		Expect(c.Shards).To(Equal(256))
		Eventually(getPipeline(ns, "old"), 20*time.Second).Should(And(
			HaveField("Status.TableContract", "v2"), HaveField("Status.TableShards", int32(256))))
	})

	It("refuses to turn a pipeline of a v2 table back to v1, and one whose table was never read", func() {
		ns := newNamespace()
		ctx, cancel := context.WithTimeout(suiteCtx, 20*time.Second)
		defer cancel()
		dsn, err := pgSrv.CreateDatabase(ctx, "v2")
		Expect(err).NotTo(HaveOccurred())
		t, err := pgident.NewTable("public", "outbox_event")
		Expect(err).NotTo(HaveOccurred())
		Expect(schema.MigrateV2(ctx, openDB(dsn), t, schema.V2Options{Shards: 16})).To(Succeed())
		createSecret(ns, "db", map[string]string{"dsn": dsn})
		v2 := func(p *outboxv1.OutboxPipeline) {
			p.Spec.Source.Contract, p.Spec.Source.Shards = outboxv1.ContractV2, 16
		}
		Expect(k8sClient.Create(suiteCtx, newPipeline(ns, "two", "db", v2))).To(Succeed())
		Eventually(getPipeline(ns, "two"), 20*time.Second).Should(HaveField("Status.TableContract", "v2"))
		err = setContract(ns, "two", outboxv1.ContractV1)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("a v2 table is never turned back into a v1 table"))

		By("no status yet (the Secret is missing): refused too, nothing says the table is v1")
		Expect(k8sClient.Create(suiteCtx, newPipeline(ns, "unread", "nosuchsecret", v2))).To(Succeed())
		err = setContract(ns, "unread", outboxv1.ContractV1)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("spec.source.contract cannot go back from v2 to v1"))
	})
})
