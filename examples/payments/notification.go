package payments

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/outbox-operator/outbox-operator/inbox"
)

// GroupNotification is the consumer group of the notification service.
const GroupNotification = "notification"

// KindSMS is the command kind of a "payment received" SMS.
const KindSMS = "send-sms"

// smsCommand is the payload of a KindSMS command: what the gateway call needs.
type smsCommand struct {
	Phone string `json:"phone"`
	Text  string `json:"text"`
}

// Notification sends one SMS per payment. The SMS cannot join the handler's
// transaction, so the handler enqueues a command in it (it commits with the dedup
// row or not at all) and Dispatch makes the call, with the event id as the
// provider's idempotency key.
type Notification struct {
	cmds *inbox.Commands
}

// NewNotification returns the notification service on db's command table.
func NewNotification(db *sql.DB) (*Notification, error) {
	cmds, err := inbox.NewCommands(db, Schema, GroupNotification)
	if err != nil {
		return nil, fmt.Errorf("payments: notification: %w", err)
	}
	return &Notification{cmds: cmds}, nil
}

// Commands is the notification group's command outbox (for Reconcile and tests).
func (n *Notification) Commands() *inbox.Commands { return n.cmds }

// Handle enqueues the SMS of a PaymentSucceeded event in the inbox's transaction.
func (n *Notification) Handle(ctx context.Context, tx *sql.Tx, m inbox.Message) (string, error) {
	if m.EventType != EventPaymentSucceeded {
		return "", nil
	}
	var ev PaymentSucceeded
	if err := decode(m, &ev); err != nil {
		return "", err
	}
	b, err := json.Marshal(smsCommand{Phone: ev.Phone, Text: "Payment received for order " + ev.OrderID + ". Thank you!"})
	if err != nil {
		return "", inbox.Permanent(fmt.Errorf("notification: encode SMS of order %s: %w", ev.OrderID, err))
	}
	if err := n.cmds.Enqueue(ctx, tx, inbox.Command{Kind: KindSMS, Key: m.EventID, Payload: b}); err != nil {
		return "", fmt.Errorf("notification: %w", err)
	}
	return "sms:" + m.EventID, nil
}

// Dispatch sends the enqueued SMS through gw until ctx ends. Set o.Rate: SMS
// providers limit the calls per second.
func (n *Notification) Dispatch(ctx context.Context, gw SMSGateway, o inbox.DispatchOptions) error {
	return n.cmds.Dispatch(ctx, func(ctx context.Context, cmd inbox.Command) error {
		if cmd.Kind != KindSMS {
			return inbox.Permanent(fmt.Errorf("notification: unknown command kind %q", cmd.Kind))
		}
		var sms smsCommand
		if err := json.Unmarshal(cmd.Payload, &sms); err != nil {
			return inbox.Permanent(fmt.Errorf("notification: decode command: %s", describeJSONError(err)))
		}
		return gw.Send(ctx, cmd.Key, sms.Phone, sms.Text)
	}, o)
}
