/*
Copyright 2026 The outbox-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package controllers

// The operator's own reads of a pipeline's database, for status only: one small pool
// per pipeline (outboxstats.Pools, shared by the three reconcilers), each read
// bounded by outboxstats.Timeout, and error text that never carries the DSN.

import (
	"github.com/outbox-operator/outbox-operator/internal/redact"
)

// poolKey names the pool of pipeline in namespace. Replays and retention policies use
// their pipeline's pool, so one pipeline opens one pool whoever reads it.
func poolKey(namespace, pipeline string) string { return namespace + "/" + pipeline }

// dbErrorText is err's text for a condition or a log line, without the DSN or its
// password (drivers can quote the DSN in a parse error).
func dbErrorText(err error, dsn string) string { return redact.DSN(err.Error(), dsn) }
