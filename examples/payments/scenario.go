package payments

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/go-logr/logr"

	"github.com/outbox-operator/outbox-operator/outbox"
)

// Scenario is what cmd/payments runs against a live stack (`make demo`): place
// orders, pay most of them through the callback, run the three consumer groups, and
// reconcile until every derived result is there or Wait has passed. The relay is not
// part of it: the stack's relay workers publish the outbox table.
type Scenario struct {
	DB      *sql.DB
	Brokers []string
	Topic   string
	Orders  int // orders placed; every tenth stays PENDING
	// Poison pays one order in a currency the points programme rejects: the points
	// group parks it, the other groups handle it.
	Poison  bool
	SMSRate float64
	Wait    time.Duration
	Log     logr.Logger
	// Gateway is the SMS provider (default: a FakeGateway failing every 10th call).
	Gateway *FakeGateway
}

// Run returns the last reconciliation report; it is OK unless Wait ran out.
func (s Scenario) Run(ctx context.Context) (Report, error) {
	if err := Migrate(ctx, s.DB); err != nil {
		return Report{}, err
	}
	if err := EnsureTopic(ctx, s.Brokers, s.Topic, 3); err != nil {
		return Report{}, err
	}
	if s.Gateway == nil {
		s.Gateway = &FakeGateway{FailEvery: 10}
	}
	appCtx, stop := context.WithCancel(ctx)
	defer stop()
	app := &App{DB: s.DB, Brokers: s.Brokers, Topic: s.Topic, Log: s.Log, Gateway: s.Gateway, SMSRate: s.SMSRate}
	done := make(chan error, 1)
	go func() { done <- app.Run(appCtx) }()

	prefix := "ord-" + runID() + "-"
	paid, err := s.produce(ctx, prefix)
	if err != nil {
		return Report{}, err
	}
	s.Log.Info("orders placed; callbacks done without waiting for any consumer", "orders", s.Orders, "paid", paid, "orderPrefix", prefix)
	rep, err := s.awaitReconciled(ctx, prefix)
	stop()
	if appErr := <-done; appErr != nil && err == nil {
		err = appErr
	}
	return rep, err
}

// produce places s.Orders orders and pays all but every tenth; it returns how many
// were paid.
func (s Scenario) produce(ctx context.Context, prefix string) (int, error) {
	shop := NewShop(s.DB, outbox.Default(), s.Topic)
	paid := 0
	for i := range s.Orders {
		o := SampleOrder(prefix, i)
		if s.Poison && i == 0 {
			o.Currency = PoisonCurrency
		}
		if err := shop.PlaceOrder(ctx, o); err != nil {
			return paid, err
		}
		if i%10 == 9 {
			continue
		}
		if _, err := shop.HandlePaymentCallback(ctx, PaymentCallback{OrderID: o.OrderID, PaymentID: "pay-" + o.OrderID}); err != nil {
			return paid, err
		}
		paid++
	}
	return paid, nil
}

// awaitReconciled polls Reconcile until it is OK or s.Wait has passed.
func (s Scenario) awaitReconciled(ctx context.Context, prefix string) (Report, error) {
	deadline := time.Now().Add(s.Wait)
	for {
		rep, err := Reconcile(ctx, s.DB, ReconcileOptions{OrderPrefix: prefix, Deliveries: s.Gateway})
		if err != nil || rep.OK() || time.Now().After(deadline) {
			return rep, err
		}
		select {
		case <-ctx.Done():
			return rep, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// PoisonCurrency is ISO 4217's code for testing: valid JSON, valid order, but not a
// currency the points programme credits.
const PoisonCurrency = "XTS"

// SampleOrder is the i-th order of a run: 20 users, amounts from 1.00 to 99.99.
func SampleOrder(prefix string, i int) Order {
	return Order{
		OrderID:     fmt.Sprintf("%s%05d", prefix, i),
		UserID:      fmt.Sprintf("%suser-%02d", prefix, i%20),
		AmountCents: 100 + int64(i*37)%9900,
		Currency:    "EUR",
		Phone:       fmt.Sprintf("+4915550%05d", i),
	}
}

// runID tells the orders of one run from those of earlier runs in the same database.
func runID() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return time.Now().UTC().Format("20060102T150405") + hex.EncodeToString(b)
}
