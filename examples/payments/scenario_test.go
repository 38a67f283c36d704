package payments_test

import (
	"context"
	"testing"
	"time"

	"github.com/outbox-operator/outbox-operator/examples/payments"
	"github.com/outbox-operator/outbox-operator/inbox"
)

// TestScenarioAsTheCommandRunsIt runs what cmd/payments runs (Scenario, default
// consumer options, a topic it creates itself) against the relay, and expects a
// clean report with the poison parked in the points group.
func TestScenarioAsTheCommandRunsIt(t *testing.T) {
	s := newStack(t)
	sc := payments.Scenario{
		DB: s.db, Brokers: s.broker.Addrs(), Topic: "payments-run", Orders: 30, Poison: true,
		SMSRate: 100, Wait: 2 * time.Minute, Log: s.logs.logger(), Gateway: &payments.FakeGateway{FailEvery: 4},
	}
	rep, err := sc.Run(context.Background())
	if err != nil || !rep.OK() {
		t.Fatalf("scenario: %v\n%s", err, rep)
	}
	if rep.Orders != 30 || rep.Paid != 27 || len(rep.Parked) != 1 ||
		rep.Parked[0].Group != payments.GroupPoints || rep.Parked[0].Code != inbox.CodePermanent {
		t.Fatalf("report:\n%s", rep)
	}
	noSecretsIn(t, s.logs.String(), s.dsn)
}
