package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
	"github.com/outbox-operator/outbox-operator/internal/testenv/localstack"
	"github.com/outbox-operator/outbox-operator/outbox"
)

const ns = "shop"

// loadSamples decodes config/samples/<file> into objs, in document order.
func loadSamples(file string, objs ...client.Object) {
	Expect(localstack.DecodeSample(stack.Root, file, ns, objs...)).To(Succeed())
}

var _ = Describe("an OutboxPipeline applied from the samples", Ordered, func() {
	var (
		ctx      = context.Background()
		db       *sql.DB
		pipeline outboxv1.OutboxPipeline
		relayPod = []string{}
	)

	BeforeAll(func() {
		Expect(stack.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		dsn, err := stack.PG.CreateDatabase(ctx, "shop")
		Expect(err).NotTo(HaveOccurred())
		db, err = sql.Open("postgres", dsn)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(db.Close)
		// Topics exist before events flow, as a platform team would provision them; the
		// relay never auto-creates topics.
		Expect(stack.Broker.CreateTopic("orders", 3)).To(Succeed())
		Expect(stack.Broker.CreateTopic("orders-replayed", 1)).To(Succeed())
		_, err = db.Exec(`CREATE TABLE orders (order_id text PRIMARY KEY, version bigint NOT NULL)`)
		Expect(err).NotTo(HaveOccurred())

		// The sample as a user would apply it, pointed at this machine's database and
		// broker, with a short status interval so the test need not wait long.
		var secret corev1.Secret
		loadSamples("outbox_v1alpha1_outboxpipeline.yaml", &secret, &pipeline)
		secret.StringData["dsn"] = dsn
		pipeline.Spec.Sink.Brokers = stack.Broker.Addrs()
		pipeline.Spec.Monitoring.StatusInterval = &metav1.Duration{Duration: 5 * time.Second}
		// Contract v1 pinned: the specs below write and read v1's status columns; the
		// sample as is (the default, v2) is what `make demo` runs.
		pipeline.Spec.Source.Contract = outboxv1.ContractV1
		Expect(stack.Client.Create(ctx, &secret)).To(Succeed())
		Expect(stack.Client.Create(ctx, &pipeline)).To(Succeed())
	})

	It("renders a relay Deployment that gets its secrets by reference only", func() {
		var d appsv1.Deployment
		Eventually(func() error {
			return stack.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: pipeline.Name + "-relay"}, &d)
		}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
		ctr := d.Spec.Template.Spec.Containers[0]
		var dsnEnv *corev1.EnvVar
		for i := range ctr.Env {
			if ctr.Env[i].Name == "OUTBOX_DSN" {
				dsnEnv = &ctr.Env[i]
			}
		}
		Expect(dsnEnv).NotTo(BeNil())
		Expect(dsnEnv.Value).To(BeEmpty())
		Expect(dsnEnv.ValueFrom.SecretKeyRef.Name).To(Equal("orders-db"))
		Expect(*d.Spec.Template.Spec.AutomountServiceAccountToken).To(BeFalse())

		// Play kubelet: run the pod template (migrate init container, then two relay
		// workers) as local processes.
		Expect(stack.RunDeployment(ctx, ns, d.Name, 2)).To(Succeed())
		relayPod = append(relayPod, d.Name+"-0", d.Name+"-1")
	})

	It("delivers every committed event to Kafka, in order per aggregate", func() {
		const aggregates, versions = 20, 10
		pub, err := outbox.New("public", "outbox_event")
		Expect(err).NotTo(HaveOccurred())
		// Versions are written in separate transactions, aggregates interleaved, the
		// way an application would: business row and event commit together.
		for v := 1; v <= versions; v++ {
			for a := 0; a < aggregates; a++ {
				orderID := fmt.Sprintf("order-%02d", a)
				tx, err := db.BeginTx(ctx, nil)
				Expect(err).NotTo(HaveOccurred())
				_, err = tx.Exec(`INSERT INTO orders VALUES ($1, $2) ON CONFLICT (order_id) DO UPDATE SET version = EXCLUDED.version`, orderID, v)
				Expect(err).NotTo(HaveOccurred())
				Expect(pub.Publish(ctx, tx, outbox.Event{
					EventID:          outbox.EventID("order", orderID, strconv.Itoa(v)),
					AggregateType:    "Order",
					AggregateID:      orderID,
					AggregateVersion: int64(v),
					EventType:        "OrderUpdated",
					Destination:      "orders",
					Payload:          json.RawMessage(fmt.Sprintf(`{"order":%q,"version":%d}`, orderID, v)),
					Headers:          map[string]string{"tenant": "acme"},
				})).To(Succeed())
				Expect(tx.Commit()).To(Succeed())
			}
		}

		recs, err := stack.Broker.ReadAllWithin(60*time.Second, "orders", aggregates*versions)
		Expect(err).NotTo(HaveOccurred())
		seen := map[string]bool{}
		lastVersion := map[string]int{}
		for _, r := range recs {
			h := map[string]string{}
			for _, kv := range r.Headers {
				h[kv.Key] = string(kv.Value)
			}
			Expect(h).To(HaveKeyWithValue("tenant", "acme"))
			Expect(h).To(HaveKeyWithValue("event_type", "OrderUpdated"))
			Expect(string(r.Key)).To(Equal(h["aggregate_id"]))
			v, err := strconv.Atoi(h["aggregate_version"])
			Expect(err).NotTo(HaveOccurred())
			// A duplicate may repeat an old version; a new version never overtakes.
			if !seen[h["event_id"]] {
				Expect(v).To(Equal(lastVersion[h["aggregate_id"]]+1), "aggregate %s", h["aggregate_id"])
				lastVersion[h["aggregate_id"]] = v
			}
			seen[h["event_id"]] = true
		}
		Expect(seen).To(HaveLen(aggregates * versions))

		// The operator's status catches up from the table: nothing pending.
		Eventually(func(g Gomega) {
			var p outboxv1.OutboxPipeline
			g.Expect(stack.Client.Get(ctx, client.ObjectKeyFromObject(&pipeline), &p)).To(Succeed())
			g.Expect(p.Status.LastPublishTime).NotTo(BeNil())
			g.Expect(p.Status.Pending).To(BeZero())
			g.Expect(p.Status.Retrying).To(BeZero())
			g.Expect(p.Status.Dead).To(BeZero())
			g.Expect(p.Status.ObservedGeneration).To(Equal(p.Generation))
		}, 45*time.Second, time.Second).Should(Succeed())
	})

	It("replays dead letters declaratively with their original ids", func() {
		// Five events that died earlier (say, a message-size limit since raised).
		var ids []string
		for i := 0; i < 5; i++ {
			id := fmt.Sprintf("dead-%d", i)
			ids = append(ids, id)
			_, err := db.Exec(`INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, aggregate_version, event_type,
				destination, message_key, payload, status, retry_count, last_error_code, last_error_message, created_at)
				VALUES ($1, 'Order', $1, 1, 'OrderPlaced', 'orders-replayed', $1, '{}', 'DEAD', 3, 'MESSAGE_TOO_LARGE', 'too big', '2026-06-01T00:00:00Z')`, id)
			Expect(err).NotTo(HaveOccurred())
		}
		var replay outboxv1.DeadLetterReplay
		loadSamples("outbox_v1alpha1_deadletterreplay.yaml", &replay)
		replay.Spec.CanarySize = ptrTo[int32](2)
		Expect(stack.Client.Create(ctx, &replay)).To(Succeed())

		var jobName string
		Eventually(func(g Gomega) {
			g.Expect(stack.Client.Get(ctx, client.ObjectKeyFromObject(&replay), &replay)).To(Succeed())
			g.Expect(replay.Status.JobName).NotTo(BeEmpty())
			jobName = replay.Status.JobName
		}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
		Expect(stack.RunJob(ctx, ns, jobName)).To(Succeed())

		recs, err := stack.Broker.ReadAllWithin(30*time.Second, "orders-replayed", len(ids))
		Expect(err).NotTo(HaveOccurred())
		var got []string
		for _, r := range recs {
			for _, h := range r.Headers {
				if h.Key == "event_id" {
					got = append(got, string(h.Value))
				}
			}
		}
		Expect(got).To(ConsistOf(ids))

		// The audit record's counts reach the CR status.
		Eventually(func(g Gomega) {
			g.Expect(stack.Client.Get(ctx, client.ObjectKeyFromObject(&replay), &replay)).To(Succeed())
			g.Expect(replay.Status.Matched).To(BeEquivalentTo(5))
			g.Expect(replay.Status.Succeeded).To(BeEquivalentTo(5))
			g.Expect(replay.Status.DeadAgain).To(BeZero())
		}, 45*time.Second, time.Second).Should(Succeed())
	})

	It("archives old SENT rows from the RetentionPolicy's CronJob and shows the counts", func() {
		// Age 50 of the delivered events past the sample's 7-day SENT retention.
		res, err := db.Exec(`UPDATE outbox_event SET sent_at = now() - interval '200 hours'
			WHERE event_id IN (SELECT event_id FROM outbox_event WHERE status = 'SENT' ORDER BY event_id LIMIT 50)`)
		Expect(err).NotTo(HaveOccurred())
		Expect(res.RowsAffected()).To(BeEquivalentTo(50))

		var policy outboxv1.RetentionPolicy
		loadSamples("outbox_v1alpha1_retentionpolicy.yaml", &policy)
		Expect(stack.Client.Create(ctx, &policy)).To(Succeed())
		var cronJob string
		Eventually(func(g Gomega) {
			g.Expect(stack.Client.Get(ctx, client.ObjectKeyFromObject(&policy), &policy)).To(Succeed())
			g.Expect(policy.Status.CronJobName).NotTo(BeEmpty())
			cronJob = policy.Status.CronJobName
		}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
		Expect(stack.RunCronJobOnce(ctx, ns, cronJob)).To(Succeed())

		var archived, left int
		Expect(db.QueryRow(`SELECT count(*) FROM outbox_event_archive`).Scan(&archived)).To(Succeed())
		Expect(db.QueryRow(`SELECT count(*) FROM outbox_event WHERE sent_at < now() - interval '168 hours'`).Scan(&left)).To(Succeed())
		Expect(archived).To(Equal(50))
		Expect(left).To(BeZero())

		// The worker recorded the run in <table>_archive_runs; the CronJob's status
		// change wakes the operator, which shows the run's counts.
		Eventually(func(g Gomega) {
			g.Expect(stack.Client.Get(ctx, client.ObjectKeyFromObject(&policy), &policy)).To(Succeed())
			g.Expect(policy.Status.LastSentArchived).To(HaveValue(BeEquivalentTo(50)))
			g.Expect(policy.Status.LastRunError).To(BeEmpty())
		}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	})

	It("stops the workers on SIGTERM without leaving rows SENDING", func() {
		for _, pod := range relayPod {
			Expect(stack.StopProc(pod, 30*time.Second)).To(Succeed(), "worker %s must exit 0 on SIGTERM", pod)
		}
		var sending int
		Expect(db.QueryRow(`SELECT count(*) FROM outbox_event WHERE status = 'SENDING'`).Scan(&sending)).To(Succeed())
		Expect(sending).To(BeZero())
	})
})

func ptrTo[T any](v T) *T { return &v }
