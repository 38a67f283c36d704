// probes.go: the two changes a team makes and waits for. A 50-row insert into one
// pipeline's table, until its status shows the rows as pending; and a rotated
// password: the role gets a new one (and its sessions end, so the old one is no use),
// the status shows the read failing, the Secret gets the new DSN, and the wait is
// until a read works again.

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
	"github.com/outbox-operator/outbox-operator/outbox"
)

const probeRows = 50

// rowProbe inserts probeRows events with the producer library in one transaction and
// returns how long until the pipeline's status shows them (0: not within 3 x the
// status interval).
func (s *stack) rowProbe(ctx context.Context) (time.Duration, error) {
	pub, err := outbox.New(rowProbe.table.Schema, rowProbe.table.Name)
	if err != nil {
		return 0, err
	}
	events := make([]outbox.Event, probeRows)
	for i := range events {
		id := fmt.Sprintf("probe-%d", i)
		events[i] = outbox.Event{EventID: id, AggregateType: "order", AggregateID: id, AggregateVersion: 1,
			EventType: "OrderPlaced", Destination: "orders", Payload: json.RawMessage(`{"probe":true}`)}
	}
	tx, err := s.db.super.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	if err := pub.Publish(ctx, tx, events...); err != nil {
		_ = tx.Rollback()
		return 0, err
	}
	if err := tx.Commit(); err != nil {
		return 0, err
	}
	t0 := time.Now()
	for time.Since(t0) < 3**statusInterval {
		var p outboxv1.OutboxPipeline
		if err := s.cl.admin.Get(ctx, rowProbe.key(), &p); err != nil {
			return 0, err
		}
		if p.Status.Pending >= probeRows {
			return time.Since(t0), nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return 0, nil
}

// rotationResult: whether the old password was seen failing, and how long after the
// Secret update the new one worked (0: not within the wait).
type rotationResult struct {
	oldFailed bool
	delay     time.Duration
}

func (s *stack) rotationProbe(ctx context.Context) (rotationResult, error) {
	var res rotationResult
	const newPassword = "rot-password-2"
	if err := s.db.rotate(ctx, rotRole, newPassword); err != nil {
		return res, err
	}
	reason, err := s.waitReason(ctx, 2**statusInterval+10*time.Second, func(r string) bool { return r == outboxv1.ReasonDatabaseUnreachable })
	if err != nil {
		return res, err
	}
	res.oldFailed = reason == outboxv1.ReasonDatabaseUnreachable
	var sec corev1.Secret
	if err := s.cl.admin.Get(ctx, client.ObjectKey{Namespace: rotProbe.namespace, Name: rotProbe.secret}, &sec); err != nil {
		return res, err
	}
	sec.Data = map[string][]byte{"dsn": []byte(s.db.dsn(rotRole, newPassword))}
	if err := s.cl.admin.Update(ctx, &sec); err != nil {
		return res, err
	}
	t0 := time.Now()
	reason, err = s.waitReason(ctx, 60*time.Second+2**statusInterval, func(r string) bool {
		return r != "" && r != outboxv1.ReasonDatabaseUnreachable
	})
	if err != nil {
		return res, err
	}
	if reason != "" && reason != outboxv1.ReasonDatabaseUnreachable {
		res.delay = time.Since(t0)
	}
	return res, nil
}

// waitReason polls the password probe's Ready reason until done(reason) or timeout,
// and returns the last reason seen.
func (s *stack) waitReason(ctx context.Context, timeout time.Duration, done func(string) bool) (string, error) {
	t0 := time.Now()
	for {
		reason, err := readReason(ctx, s.cl.admin, rotProbe)
		if err != nil || done(reason) || time.Since(t0) > timeout {
			return reason, err
		}
		time.Sleep(200 * time.Millisecond)
	}
}
