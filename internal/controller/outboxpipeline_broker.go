/*
Copyright 2026 The outbox-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package controller

import (
	"fmt"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/outboxstats"
)

// brokerUnavailableMessage is the Degraded message while at least one fresh worker
// reports that no Kafka broker answers; "" when none does.
//
// It says since WHEN (an absolute time, seconds precision like the status field), not
// for how long: the status is written only when it changed, and a "for 2m5s" would
// change on every pass, turning each pass of an outage into a status write and a watch
// event. The time changes only when the earliest report does. For the duration,
// status.brokerUnavailableSince holds the same time, `kubectl get -o wide` renders its
// age (BrokerDown column) and the transition Event is dated.
func brokerUnavailableMessage(w outboxstats.Workers) string {
	if w.BrokerDown == 0 {
		return ""
	}
	code := ""
	if w.BrokerErrorCode != "" {
		code = " (" + w.BrokerErrorCode + ")"
	}
	since := ""
	if !w.BrokerDownSince.IsZero() {
		since = " since " + w.BrokerDownSince.UTC().Truncate(time.Second).Format(time.RFC3339)
	}
	return fmt.Sprintf("%d of %d workers cannot write to any Kafka broker%s%s; claims are paused and no attempts are counted, "+
		"so nothing goes DEAD because of it. Check that the brokers answer from the relay pods' network and accept writes "+
		"(in-sync replicas for acks=all, broker maintenance) and the TLS/SASL Secrets; the workers resume by themselves, no replay is needed", w.BrokerDown, w.Reporting, code, since)
}

// brokerHint explains a WorkersNotReady with the workers' own reports: relay pods are
// not ready while their broker is unreachable.
func brokerHint(down int32) string {
	if down == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d report no reachable Kafka broker: see the Degraded condition)", down)
}
