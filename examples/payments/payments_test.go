package payments_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outbox-operator/outbox-operator/examples/payments"
	"github.com/outbox-operator/outbox-operator/inbox"
	"github.com/outbox-operator/outbox-operator/outbox"
)

const (
	paidOrders    = 200
	pendingOrders = 10
	prefix        = "ord-"
)

// TestPaymentSucceededPropagatesExactlyOnce runs the whole scenario on real parts
// (PostgreSQL, a Kafka-protocol broker, the relay worker) with the faults a
// deployment meets: offset commits that fail after the transaction committed, every
// fifth message delivered twice, a flaky SMS gateway, one poison event, and the
// search consumer down while the others work. Every derived result must exist
// exactly once, and only the poison may be parked, in the points group only.
func TestPaymentSucceededPropagatesExactlyOnce(t *testing.T) {
	s := newStack(t)
	ctx := context.Background()
	shop := payments.NewShop(s.db, outbox.Default(), topic)
	for i := range paidOrders + pendingOrders {
		if err := shop.PlaceOrder(ctx, order(i)); err != nil {
			t.Fatal(err)
		}
	}
	pay(t, shop, 0, paidOrders/2) // no consumer is running: the callback needs none
	callbacksAreIdempotent(t, shop)

	gw := &payments.FakeGateway{FailEvery: 5}
	var seen outcomes
	var faults crashes
	stopFirst := runApp(t, s, gw, &seen, &faults, payments.GroupPoints, payments.GroupNotification)
	pay(t, shop, paidOrders/2, paidOrders) // while they run

	events := paidOrders + pendingOrders + paidOrders // OrderPlaced each, PaymentSucceeded each paid
	poisonID := payments.PaymentSucceededID(order(0).OrderID, paymentID(0))
	dups := redeliver(t, s.broker, events, func(i int, r *kgo.Record) bool {
		return i%5 == 0 || header(r, inbox.HeaderEventID) == poisonID
	})

	// Search is down: points and notification finish without it.
	eventually(t, 120*time.Second, "points and SMS for every payment", func() string {
		return mismatches(t, s, gw, "points", "sms")
	})
	if n := count(t, s, `SELECT count(*) FROM payments.order_search`); n != 0 {
		t.Fatalf("%d search rows, but the search consumer never ran", n)
	}
	stopSearch := runApp(t, s, gw, &seen, &faults, payments.GroupSearch)
	eventually(t, 120*time.Second, "every derived result", func() string { return mismatches(t, s, gw) })
	eventually(t, 60*time.Second, "every group at the end of the topic", func() string { return caughtUp(t, s) })
	stopFirst()
	stopSearch()

	rep := reconcile(t, s, gw)
	if !rep.OK() || rep.Paid != paidOrders || rep.Orders != paidOrders+pendingOrders {
		t.Fatalf("after the redeliveries:\n%s", rep)
	}
	redeliveriesWereDuplicates(t, &seen, dups)
	onlyThePoisonIsParked(t, s, rep, poisonID)
	oneSMSPerPayment(t, s, gw)
	for _, g := range payments.AllGroups {
		if faults.of(g) == 0 {
			t.Errorf("group %s: no commit failure was injected", g)
		}
	}
	noSecretsIn(t, s.logs.String(), s.dsn)
	for _, g := range payments.AllGroups {
		t.Logf("group %s: %d commit crashes, outcomes applied %d, duplicate %d, parked %d", g, faults.of(g),
			seen.get(g, inbox.Applied), seen.get(g, inbox.Duplicate), seen.get(g, inbox.Parked))
	}
}

func order(i int) payments.Order {
	o := payments.SampleOrder(prefix, i)
	if i == 0 {
		o.Currency = payments.PoisonCurrency
	}
	return o
}

func paymentID(i int) string { return fmt.Sprintf("pay-%05d", i) }

func pay(t *testing.T, shop *payments.Shop, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		res, err := shop.HandlePaymentCallback(context.Background(), payments.PaymentCallback{OrderID: order(i).OrderID, PaymentID: paymentID(i)})
		if err != nil || res != payments.Paid {
			t.Fatalf("callback of order %d: %v, %v", i, res, err)
		}
	}
}

// callbacksAreIdempotent: a repeated callback writes no second event; another
// payment of a paid order and an unknown order are refused.
func callbacksAreIdempotent(t *testing.T, shop *payments.Shop) {
	t.Helper()
	ctx := context.Background()
	if res, err := shop.HandlePaymentCallback(ctx, payments.PaymentCallback{OrderID: order(1).OrderID, PaymentID: paymentID(1)}); err != nil || res != payments.AlreadyPaid {
		t.Fatalf("repeated callback: %v, %v; want AlreadyPaid", res, err)
	}
	if _, err := shop.HandlePaymentCallback(ctx, payments.PaymentCallback{OrderID: order(1).OrderID, PaymentID: "other"}); !errors.Is(err, payments.ErrPaidByOtherPayment) {
		t.Fatalf("second payment: %v", err)
	}
	if _, err := shop.HandlePaymentCallback(ctx, payments.PaymentCallback{OrderID: "no-such-order", PaymentID: "p"}); !errors.Is(err, payments.ErrUnknownOrder) {
		t.Fatalf("unknown order: %v", err)
	}
}

// runApp runs the given groups with fast retries, crashing commits and outcome
// counting; the returned stop waits for them.
func runApp(t *testing.T, s *stack, gw *payments.FakeGateway, seen *outcomes, faults *crashes, groups ...string) (stop func()) {
	t.Helper()
	app := &payments.App{
		DB: s.db, Brokers: s.broker.Addrs(), Topic: topic, Log: s.logs.logger(), Gateway: gw,
		SMSRate: 500, Groups: groups, Wrap: faults.wrap, RestartDelay: 50 * time.Millisecond,
		Tune: func(group string, o *inbox.Options) {
			o.Backoff, o.MaxBackoff, o.Observe = 10*time.Millisecond, 100*time.Millisecond, seen.observe(group)
		},
		TuneDispatch: func(o *inbox.DispatchOptions) {
			o.Poll, o.Backoff, o.MaxBackoff = 20*time.Millisecond, 10*time.Millisecond, 100*time.Millisecond
		},
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("app %v: %v", groups, err)
		}
	}
	t.Cleanup(stop)
	return stop
}
