package controller

import (
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
	"github.com/outbox-operator/outbox-operator/internal/outboxstats"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// eventsOf lists "Type/Reason" of the Events regarding object name in namespace ns.
func eventsOf(ns, name string) func() []string {
	return func() []string {
		var evs eventsv1.EventList
		Expect(k8sClient.List(suiteCtx, &evs, client.InNamespace(ns))).To(Succeed())
		var out []string
		for _, e := range evs.Items {
			if e.Regarding.Name == name {
				out = append(out, e.Type+"/"+e.Reason)
			}
		}
		return out
	}
}

var _ = Describe("OutboxPipeline broker reports", func() {
	It("is Degraded with BrokerUnavailable while a fresh worker reports no broker, and leaves it on recovery", func() {
		ns := newNamespace()
		dsn, db, t := migratedDB()
		createSecret(ns, "db", map[string]string{"dsn": dsn})
		workers := t.WithSuffix(schema.WorkersSuffix).Qualified()
		// Old enough for EventsDelayed: the broker outage must win, it explains the delay.
		insertRow(db, t, "PENDING", "created_at = now() - interval '10 minutes'")
		_, err := db.Exec(`INSERT INTO ` + workers + ` (worker_id, broker_up, broker_down_since, broker_error_code, heartbeat_at) VALUES
			('brk-relay-a', false, now() - interval '2 minutes', 'BROKER_UNAVAILABLE', now()),
			('brk-relay-b', true, NULL, NULL, now()),
			('brk-relay-gone', false, now() - interval '1 hour', 'AUTHENTICATION_FAILED', now() - interval '5 minutes')`)
		Expect(err).NotTo(HaveOccurred())
		Expect(k8sClient.Create(suiteCtx, newPipeline(ns, "brk", "db"))).To(Succeed())
		get := getPipeline(ns, "brk")

		Eventually(get, 20*time.Second).Should(And(
			HaveField("Status.BrokerUnavailableWorkers", int32(1)),
			HaveField("Status.BrokerUnavailableSince", Not(BeNil())),
			WithTransform(conditionOf(outboxv1.ConditionDegraded), Equal("True/"+outboxv1.ReasonBrokerUnavailable)),
		))
		cur := get()
		Expect(time.Since(cur.Status.BrokerUnavailableSince.Time)).To(BeNumerically("~", 2*time.Minute, 30*time.Second),
			"the stale worker's hour-old report is ignored")
		msg := condition(cur.Status.Conditions, outboxv1.ConditionDegraded).Message
		Expect(msg).To(HavePrefix("1 of 2 workers cannot write to any Kafka broker (BROKER_UNAVAILABLE) since " +
			cur.Status.BrokerUnavailableSince.UTC().Format(time.RFC3339) + "; claims are paused and no attempts are counted"))
		Expect(condition(cur.Status.Conditions, outboxv1.ConditionReady)).To(And(
			HaveField("Reason", outboxv1.ReasonWorkersNotReady),
			HaveField("Message", ContainSubstring("1 report no reachable Kafka broker"))))
		Eventually(eventsOf(ns, "brk")).Should(ContainElement(corev1.EventTypeWarning + "/" + outboxv1.ReasonBrokerUnavailable))

		By("a steady outage is not rewritten into the status on every pass (statusInterval is 5s)")
		Consistently(func() string { return get().ResourceVersion }, 7*time.Second, time.Second).
			Should(Equal(cur.ResourceVersion))

		By("the worker reaches its broker again")
		_, err = db.Exec(`UPDATE ` + workers + ` SET broker_up = true, broker_down_since = NULL, broker_error_code = NULL,
			heartbeat_at = now() WHERE worker_id LIKE 'brk-relay-_'`)
		Expect(err).NotTo(HaveOccurred())
		Eventually(get, 20*time.Second).Should(And(
			HaveField("Status.BrokerUnavailableWorkers", int32(0)),
			HaveField("Status.BrokerUnavailableSince", BeNil()),
			WithTransform(conditionOf(outboxv1.ConditionDegraded), Equal("True/"+outboxv1.ReasonEventsDelayed)),
		))
		Expect(condition(get().Status.Conditions, outboxv1.ConditionReady).Message).NotTo(ContainSubstring("Kafka"))
		Eventually(eventsOf(ns, "brk")).Should(ContainElement(corev1.EventTypeWarning + "/" + outboxv1.ReasonEventsDelayed))
	})
})

func TestBrokerUnavailableMessage(t *testing.T) {
	if m := brokerUnavailableMessage(outboxstats.Workers{Reporting: 2}); m != "" {
		t.Fatalf("no worker down: %q", m)
	}
	since := time.Date(2026, 5, 1, 10, 0, 0, 700_000_000, time.FixedZone("CEST", 2*3600))
	m := brokerUnavailableMessage(outboxstats.Workers{Reporting: 3, BrokerDown: 2, BrokerDownSince: since, BrokerErrorCode: "TLS_HANDSHAKE_FAILED"})
	want := "2 of 3 workers cannot write to any Kafka broker (TLS_HANDSHAKE_FAILED) since 2026-05-01T08:00:00Z; claims are paused"
	if len(m) < len(want) || m[:len(want)] != want {
		t.Fatalf("message %q, want prefix %q", m, want)
	}
	// A worker that says neither why nor since when still counts.
	m = brokerUnavailableMessage(outboxstats.Workers{Reporting: 1, BrokerDown: 1})
	if want := "1 of 1 workers cannot write to any Kafka broker; claims"; len(m) < len(want) || m[:len(want)] != want {
		t.Fatalf("message %q, want prefix %q", m, want)
	}
}
