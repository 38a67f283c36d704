package controller

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
)

func validConsumer() *outboxv1.ConsumerTarget {
	return &outboxv1.ConsumerTarget{Group: "billing", DatabaseSecretRef: outboxv1.SecretKeyRef{Name: "billing-db", Key: "dsn"}}
}

// toConsumer turns the table's pipeline replay into a consumer replay, then applies mut.
func toConsumer(mut func(*outboxv1.DeadLetterReplay)) func(*outboxv1.DeadLetterReplay) {
	return func(r *outboxv1.DeadLetterReplay) {
		r.Spec.PipelineRef, r.Spec.Consumer = outboxv1.PipelineReference{}, validConsumer()
		mut(r)
	}
}

var _ = Describe("CRD validation", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	d := func(s string) *metav1.Duration {
		v, err := time.ParseDuration(s)
		Expect(err).NotTo(HaveOccurred())
		return &metav1.Duration{Duration: v}
	}

	DescribeTable("rejects bad pipelines with readable messages",
		func(mut func(*outboxv1.OutboxPipeline), want string) {
			p := newPipeline(ns, "bad", "db", mut)
			err := k8sClient.Create(suiteCtx, p)
			Expect(err).To(HaveOccurred())
			Expect(err.Error()).To(ContainSubstring(want))
		},
		Entry("invalid table name", func(p *outboxv1.OutboxPipeline) { p.Spec.Source.Table = "Orders; DROP TABLE x" },
			`spec.source.table: Invalid value`),
		Entry("table name too long for side tables", func(p *outboxv1.OutboxPipeline) {
			p.Spec.Source.Table = "a234567890123456789012345678901234567890123456789012"
		}, `spec.source.table: Too long`),
		Entry("invalid schema", func(p *outboxv1.OutboxPipeline) { p.Spec.Source.Schema = "1public" },
			`spec.source.schema: Invalid value`),
		Entry("lease not longer than poll interval", func(p *outboxv1.OutboxPipeline) {
			p.Spec.Relay.Lease = d("2s")
			p.Spec.Relay.PollInterval = d("2s")
		}, "relay.lease must be longer than relay.pollInterval"),
		Entry("max backoff below min backoff", func(p *outboxv1.OutboxPipeline) {
			p.Spec.Relay.MinBackoff = d("10s")
			p.Spec.Relay.MaxBackoff = d("1s")
		}, "relay.maxBackoff must be at least relay.minBackoff"),
		Entry("batch size too big", func(p *outboxv1.OutboxPipeline) { p.Spec.Relay.BatchSize = 20000 },
			"spec.relay.batchSize: Invalid value: 20000: spec.relay.batchSize in body should be less than or equal to 10000"),
		Entry("negative batch size", func(p *outboxv1.OutboxPipeline) { p.Spec.Relay.BatchSize = -1 },
			"spec.relay.batchSize"),
		Entry("missing DSN secret reference", func(p *outboxv1.OutboxPipeline) { p.Spec.Source.DSNSecretRef = outboxv1.SecretKeyRef{} },
			"spec.source.dsnSecretRef.name"),
		Entry("no brokers", func(p *outboxv1.OutboxPipeline) { p.Spec.Sink.Brokers = nil },
			"spec.sink.brokers: Required value"),
		Entry("broker without port", func(p *outboxv1.OutboxPipeline) { p.Spec.Sink.Brokers = []string{"kafka"} },
			"spec.sink.brokers[0]: Invalid value"),
		Entry("unknown SASL mechanism", func(p *outboxv1.OutboxPipeline) {
			p.Spec.Sink.SASL = &outboxv1.KafkaSASL{Mechanism: "gssapi",
				UsernameSecretRef: outboxv1.SecretKeyRef{Name: "k", Key: "u"}, PasswordSecretRef: outboxv1.SecretKeyRef{Name: "k", Key: "p"}}
		}, `spec.sink.sasl.mechanism: Unsupported value: "gssapi"`),
		Entry("CA without TLS", func(p *outboxv1.OutboxPipeline) {
			p.Spec.Sink.TLS = &outboxv1.KafkaTLS{CASecretRef: &outboxv1.SecretKeyRef{Name: "ca", Key: "ca.crt"}}
		}, "tls.caSecretRef is set but tls.enabled is false"),
		Entry("status interval too short", func(p *outboxv1.OutboxPipeline) { p.Spec.Monitoring.StatusInterval = d("1s") },
			"monitoring.statusInterval must be at least 5s"),
		Entry("name not a DNS label", func(p *outboxv1.OutboxPipeline) { p.Name = "9-orders" },
			"metadata.name must start with a letter"),
		Entry("unknown source mode", func(p *outboxv1.OutboxPipeline) { p.Spec.Source.Mode = "Wal" },
			`spec.source.mode: Unsupported value: "Wal"`),
		Entry("unknown message format", func(p *outboxv1.OutboxPipeline) { p.Spec.Message.Format = "CloudEvent" },
			`spec.message.format: Unsupported value: "CloudEvent"`),
		Entry("zero CDC hand-over", func(p *outboxv1.OutboxPipeline) { p.Spec.Relay.CDCHandoverAfter = d("0s") },
			"relay.cdcHandoverAfter must be positive"),
		Entry("unknown table contract", func(p *outboxv1.OutboxPipeline) { p.Spec.Source.Contract = "v3" },
			`spec.source.contract: Unsupported value: "v3"`),
		Entry("shard count not a power of two", func(p *outboxv1.OutboxPipeline) { p.Spec.Source.Shards = 384 },
			"source.shards must be a power of two from 1 to 32768"),
		Entry("shard count above 32768", func(p *outboxv1.OutboxPipeline) { p.Spec.Source.Shards = 65536 },
			"source.shards must be a power of two from 1 to 32768"),
		Entry("contract v2 with a replication slot", func(p *outboxv1.OutboxPipeline) {
			p.Spec.Source.Contract, p.Spec.Source.Mode = outboxv1.ContractV2, outboxv1.SourceLogicalReplication
		}, "mode LogicalReplication reads contract v1 tables only and source.contract is v2 (the default when not set): set source.contract: v1"),
		Entry("a replication slot without a contract (the default, v2)", func(p *outboxv1.OutboxPipeline) {
			p.Spec.Source.Contract, p.Spec.Source.Mode = "", outboxv1.SourceLogicalReplication
		}, "set source.contract: v1 to stream a v1 table (docs/cdc.md)"),
		Entry("negative shard count", func(p *outboxv1.OutboxPipeline) { p.Spec.Source.Shards = -2 },
			"source.shards must be a power of two from 1 to 32768"),
	)

	It("rejects a literal DSN: the field does not exist", func() {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "outbox.dev/v1alpha1", "kind": "OutboxPipeline",
			"metadata": map[string]any{"name": "literal", "namespace": ns},
			"spec": map[string]any{
				"source": map[string]any{"dsn": "postgres://u:p@db/app"},
				"sink":   map[string]any{"brokers": []any{"k:9092"}},
			},
		}}
		err := k8sClient.Create(suiteCtx, u)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("spec.source.dsnSecretRef: Required value"))
	})

	DescribeTable("rejects bad replays",
		func(mut func(*outboxv1.DeadLetterReplay), want string) {
			r := &outboxv1.DeadLetterReplay{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad"},
				Spec: outboxv1.DeadLetterReplaySpec{
					PipelineRef: outboxv1.PipelineReference{Name: "p"},
					Selector:    outboxv1.ReplaySelector{EventType: "X"},
					Reason:      "because",
				},
			}
			mut(r)
			err := k8sClient.Create(suiteCtx, r)
			Expect(err).To(HaveOccurred())
			Expect(err.Error()).To(ContainSubstring(want))
		},
		Entry("empty selector", func(r *outboxv1.DeadLetterReplay) { r.Spec.Selector = outboxv1.ReplaySelector{} },
			"selector must set at least one of"),
		Entry("no reason", func(r *outboxv1.DeadLetterReplay) { r.Spec.Reason = "" }, "spec.reason"),
		Entry("inverted time range", func(r *outboxv1.DeadLetterReplay) {
			a, b := metav1.NewTime(time.Now()), metav1.NewTime(time.Now().Add(-time.Hour))
			r.Spec.Selector.CreatedAfter, r.Spec.Selector.CreatedBefore = &a, &b
		}, "selector.createdAfter must be before selector.createdBefore"),
		Entry("rate too high", func(r *outboxv1.DeadLetterReplay) { r.Spec.Rate = 100000 }, "spec.rate"),
		Entry("aggregate id without type", func(r *outboxv1.DeadLetterReplay) { r.Spec.Selector.AggregateID = "42" },
			"selector.aggregateID needs selector.aggregateType"),
		Entry("pipeline and consumer", func(r *outboxv1.DeadLetterReplay) { r.Spec.Consumer = validConsumer() },
			"set exactly one of spec.pipelineRef (replay a pipeline's DEAD outbox events) and spec.consumer"),
		Entry("neither pipeline nor consumer", func(r *outboxv1.DeadLetterReplay) { r.Spec.PipelineRef = outboxv1.PipelineReference{} },
			"set exactly one of spec.pipelineRef"),
		Entry("consumer with aggregate type", toConsumer(func(r *outboxv1.DeadLetterReplay) { r.Spec.Selector.AggregateType = "Order" }),
			"selector.aggregateType, selector.aggregateID and selector.destination select DEAD outbox events; with spec.consumer select parked messages by eventIDs, eventType, errorCode, createdAfter or createdBefore"),
		Entry("consumer with destination", toConsumer(func(r *outboxv1.DeadLetterReplay) { r.Spec.Selector.Destination = "orders" }),
			"selector.destination select DEAD outbox events"),
		Entry("consumer with dry run", toConsumer(func(r *outboxv1.DeadLetterReplay) { r.Spec.DryRun = true }),
			"dryRun is not available with spec.consumer"),
		Entry("consumer with an empty selector", toConsumer(func(r *outboxv1.DeadLetterReplay) { r.Spec.Selector = outboxv1.ReplaySelector{} }),
			"selector must set at least one of"),
		Entry("consumer without group", toConsumer(func(r *outboxv1.DeadLetterReplay) { r.Spec.Consumer.Group = "" }),
			"spec.consumer.group"),
		Entry("consumer schema not an identifier", toConsumer(func(r *outboxv1.DeadLetterReplay) { r.Spec.Consumer.Schema = "Inbox; DROP" }),
			"spec.consumer.schema: Invalid value"),
		Entry("consumer without database secret", toConsumer(func(r *outboxv1.DeadLetterReplay) {
			r.Spec.Consumer.DatabaseSecretRef = outboxv1.SecretKeyRef{}
		}), "spec.consumer.databaseSecretRef.name"),
		Entry("consumer limit too high", toConsumer(func(r *outboxv1.DeadLetterReplay) { r.Spec.Consumer.Limit = 20000 }),
			"spec.consumer.limit"),
	)

	It("accepts a consumer target and defaults its schema and limit", func() {
		r := &outboxv1.DeadLetterReplay{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "consumer"},
			Spec: outboxv1.DeadLetterReplaySpec{
				Consumer: validConsumer(),
				Selector: outboxv1.ReplaySelector{EventType: "PaymentSucceeded", CreatedAfter: &metav1.Time{Time: time.Now().Add(-time.Hour)}},
				Reason:   "handler fixed",
			},
		}
		Expect(k8sClient.Create(suiteCtx, r)).To(Succeed())
		Expect(r.Spec.Consumer.Schema).To(Equal("public"))
		Expect(r.Spec.Consumer.Limit).To(Equal(int32(1000)))
		Expect(r.Spec.Rate).To(Equal(int32(100)))
		Expect(r.Spec.PipelineRef.Name).To(BeEmpty())
	})

	DescribeTable("rejects bad retention policies",
		func(mut func(*outboxv1.RetentionPolicy), want string) {
			rp := &outboxv1.RetentionPolicy{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad"},
				Spec:       outboxv1.RetentionPolicySpec{PipelineRef: outboxv1.PipelineReference{Name: "p"}},
			}
			mut(rp)
			err := k8sClient.Create(suiteCtx, rp)
			Expect(err).To(HaveOccurred())
			Expect(err.Error()).To(ContainSubstring(want))
		},
		Entry("sent retention too short", func(rp *outboxv1.RetentionPolicy) { rp.Spec.SentRetention = d("10m") },
			"sentRetention must be at least 1h"),
		Entry("dead retention too short", func(rp *outboxv1.RetentionPolicy) { rp.Spec.DeadRetention = d("1h") },
			"deadRetention must be at least 24h"),
		Entry("unknown mode", func(rp *outboxv1.RetentionPolicy) { rp.Spec.Mode = "Truncate" }, `spec.mode: Unsupported value: "Truncate"`),
	)
})
