package payments

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/outbox-operator/outbox-operator/inbox"
	"github.com/outbox-operator/outbox-operator/outbox"
)

// DefaultTopic is the Kafka topic the shop's order events go to.
const DefaultTopic = "payments"

// Event types of the order aggregate.
const (
	AggregateOrder        = "order"
	EventOrderPlaced      = "OrderPlaced"      // version 1: the order exists, PENDING
	EventPaymentSucceeded = "PaymentSucceeded" // version 2: the order is PAID
)

// OrderState is the order as every event of it carries it (event-carried state): a
// consumer never has to call the shop back to learn it.
type OrderState struct {
	OrderID     string `json:"orderId"`
	UserID      string `json:"userId"`
	AmountCents int64  `json:"amountCents"`
	Currency    string `json:"currency"`
	Status      string `json:"status"`
}

// PaymentSucceeded is the payload of EventPaymentSucceeded.
type PaymentSucceeded struct {
	OrderState
	PaymentID string `json:"paymentId"`
	Phone     string `json:"phone"`
}

// OrderPlacedID is the event id of an order's OrderPlaced event.
func OrderPlacedID(orderID string) string { return outbox.EventID("order-placed", orderID) }

// PaymentSucceededID is the event id of the payment of an order. It is derived from
// the business fact, so a callback retried after a lost COMMIT produces the same id
// and Reconcile can find every derived result from the orders table alone.
func PaymentSucceededID(orderID, paymentID string) string {
	return outbox.EventID("payment-succeeded", orderID, paymentID)
}

// decode reads an event payload of schema version 1 into v. Its errors are
// Permanent (no retry can fix a payload) and never quote the payload: they end up in
// logs and in the parking table's error_message.
func decode(m inbox.Message, v any) error {
	if m.EventVersion > 1 {
		return inbox.Permanent(fmt.Errorf("%s schema version %d is newer than this consumer", m.EventType, m.EventVersion))
	}
	if err := json.Unmarshal(m.Payload, v); err != nil {
		return inbox.Permanent(fmt.Errorf("decode %s: %s", m.EventType, describeJSONError(err)))
	}
	return nil
}

// describeJSONError says where a payload is wrong without saying what it contains.
func describeJSONError(err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("invalid JSON at byte %d", syn.Offset)
	case errors.As(err, &typ):
		return fmt.Sprintf("field %q is not a %s", typ.Field, typ.Type)
	}
	return "invalid payload"
}
