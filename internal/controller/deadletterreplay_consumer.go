/*
Copyright 2026 The outbox-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package controller

// A DeadLetterReplay with spec.consumer: the consumer database's Secret, and the
// consumer group's record of the replay request (message_consume_replay, read with
// inbox.ReplayStatus) in the status. The Job decides the phase, as for an outbox
// replay; the record gives the counts and says why a failed Job failed.

import (
	"context"
	"database/sql"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
	"github.com/outbox-operator/outbox-operator/inbox"
	"github.com/outbox-operator/outbox-operator/internal/outboxstats"
	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/redact"
)

// consumerDSNPath names the consumer database's Secret reference in messages.
const consumerDSNPath = "spec.consumer.databaseSecretRef"

// resolveConsumer reads the consumer database's DSN from the replay's own namespace
// with reader, like a pipeline's. A missing Secret or key is a
// *refProblem.
func resolveConsumer(ctx context.Context, reader client.Reader, rp *outboxv1.DeadLetterReplay) (dsn string, err error) {
	t := rp.Spec.Consumer
	if err := pgident.Validate("schema", t.Schema); err != nil {
		return "", &refProblem{outboxv1.ReasonInvalidSpec, "spec.consumer.schema: " + err.Error()}
	}
	ref := NamedRef{Path: consumerDSNPath, Ref: t.DatabaseSecretRef}
	values, err := readSecretRefs(ctx, reader, rp.Namespace, []NamedRef{ref})
	if err != nil {
		return "", err
	}
	return string(values.Data[ref.Ref]), nil
}

// consumerPoolKey: the consumer database Secret key as a user of its database's pool
// (one user for all the replays naming it). It cannot meet a pipeline's key (namespace/pipeline): names hold no '/'.
// forgetConsumerPool closes a finished consumer replay's pool: nothing else reads that
// database, and a later replay of the same consumer opens it again.
func (r *DeadLetterReplayReconciler) forgetConsumerPool(rp *outboxv1.DeadLetterReplay) {
	if c := rp.Spec.Consumer; c != nil {
		r.Pools.Forget(consumerPoolKey(rp.Namespace, c.DatabaseSecretRef))
	}
}

func consumerPoolKey(namespace string, ref outboxv1.SecretKeyRef) string {
	return namespace + "/consumer-db/" + ref.Name + "/" + ref.Key
}

// readConsumerReplay copies the consumer group's record of the request into the
// status, best effort like readAudit: the read is bounded by outboxstats.Timeout, and
// a failed read keeps the last counts.
func (r *DeadLetterReplayReconciler) readConsumerReplay(ctx context.Context, rp *outboxv1.DeadLetterReplay, st *outboxv1.DeadLetterReplayStatus) {
	t := rp.Spec.Consumer
	dsn, err := resolveConsumer(ctx, secretReader(r.secrets, r.APIReader), rp)
	if err != nil {
		return
	}
	var rec inbox.ReplayState
	var found bool
	err = r.Pools.Read(ctx, consumerPoolKey(rp.Namespace, t.DatabaseSecretRef), dsn, func(db *sql.DB) (err error) {
		rctx, cancel := context.WithTimeout(ctx, outboxstats.Timeout)
		defer cancel()
		rec, found, err = inbox.FindReplay(rctx, db, t.Schema, t.Group, st.ReplayID)
		return err
	})
	if err != nil {
		logf.FromContext(ctx).V(1).Info("could not read the consumer group's replay record", "error", dbErrorText(err, dsn))
		return
	}
	if found {
		mirrorConsumerReplay(rp, rec, dsn, st)
	}
}

// mirrorConsumerReplay maps the record onto the status: matched = selected, replayed
// = handled so far, succeeded = applied + duplicates (marked REPLAYED), deadAgain =
// failed again (still parked); the Ready message says where the request stands.
func mirrorConsumerReplay(rp *outboxv1.DeadLetterReplay, rec inbox.ReplayState, dsn string, st *outboxv1.DeadLetterReplayStatus) {
	done := int64(rec.Applied + rec.Duplicates)
	st.Matched, st.Replayed, st.Succeeded, st.DeadAgain = int64(rec.Selected), done+int64(rec.Failed), done, int64(rec.Failed)
	st.Consumer = &outboxv1.ConsumerReplayStatus{RequestID: rec.ReplayID, State: rec.Status,
		Applied: int64(rec.Applied), Duplicates: int64(rec.Duplicates)}
	reason, status, msg := consumerReadiness(rp, rec, dsn, st)
	if msg != "" {
		setCondition(&st.Conditions, rp.Generation, outboxv1.ConditionReady, status, reason, msg)
	}
}

// consumerReadiness is the Ready condition the record calls for: NoConsumer when the
// Job gave up on a request nobody took, the consumer's error when it failed the
// replay, the counts when it finished, and otherwise what the Job is waiting for. An
// empty message keeps the condition mirrorJob set.
func consumerReadiness(rp *outboxv1.DeadLetterReplay, rec inbox.ReplayState, dsn string, st *outboxv1.DeadLetterReplayStatus) (string, metav1.ConditionStatus, string) {
	group := rp.Spec.Consumer.Group
	switch {
	case st.Phase == outboxv1.ReplayFailed && rec.Status == inbox.ReplayRequested:
		return outboxv1.ReasonNoConsumer, metav1.ConditionFalse, fmt.Sprintf(
			"no running consumer of group %q took replay request %d before Job %s gave up; start a consumer of the group "+
				"(inbox.Consumer.Run). The request stays REQUESTED and a consumer that starts later serves it; "+
				"create a new DeadLetterReplay to follow a replay in this status (it takes over the messages still parked)",
			group, rec.ReplayID, st.JobName)
	case st.Phase == outboxv1.ReplayFailed && rec.Status == inbox.ReplayFailed:
		return outboxv1.ReasonJobFailed, metav1.ConditionFalse, fmt.Sprintf(
			"consumer group %q failed replay request %d after %d of %d messages: %s; see the consumer's log (replayId %d)",
			group, rec.ReplayID, st.Replayed, st.Matched, redact.DSN(rec.Error, dsn), rec.ReplayID)
	case st.Phase == outboxv1.ReplaySucceeded && rec.Selected == 0:
		return outboxv1.ReasonCompleted, metav1.ConditionTrue, fmt.Sprintf(
			"no parked message of consumer group %q matched the selector; nothing was replayed", group)
	case st.Phase == outboxv1.ReplaySucceeded:
		msg := fmt.Sprintf("replay request %d finished: %d applied, %d duplicates, %d failed again and stay parked",
			rec.ReplayID, rec.Applied, rec.Duplicates, rec.Failed)
		if rec.Selected >= int(rp.Spec.Consumer.Limit) {
			msg += fmt.Sprintf("; it took the limit of %d messages, so more may match: create another DeadLetterReplay", rp.Spec.Consumer.Limit)
		}
		return outboxv1.ReasonCompleted, metav1.ConditionTrue, msg
	case st.Phase == outboxv1.ReplayFailed:
		return "", "", ""
	case rec.Status == inbox.ReplayRequested:
		return outboxv1.ReasonJobCreated, metav1.ConditionTrue, fmt.Sprintf(
			"Job %s waits for a running consumer of group %q to take replay request %d (%d messages selected)",
			st.JobName, group, rec.ReplayID, rec.Selected)
	}
	return outboxv1.ReasonJobCreated, metav1.ConditionTrue, fmt.Sprintf(
		"consumer group %q replays request %d: %d of %d messages handled", group, rec.ReplayID, st.Replayed, st.Matched)
}
