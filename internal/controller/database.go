/*
Copyright 2026 The outbox-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package controller

// The operator's own reads of a pipeline's database, for status only: one bounded pool
// per database, shared by every pipeline, replay and retention policy on it
// (outboxstats.Pools), each read bounded by outboxstats.Timeout, and error text that
// never carries the DSN.

import (
	"github.com/outbox-operator/outbox-operator/internal/redact"
)

// poolKey names pipeline in namespace as a user of its database's pool. Replays and
// retention policies read under their pipeline's key, so a pipeline is one user
// whoever reads for it, and deleting it (Forget) leaves the pool.
func poolKey(namespace, pipeline string) string { return namespace + "/" + pipeline }

// dbErrorText is err's text for a condition or a log line, without the DSN or its
// password (drivers can quote the DSN in a parse error).
func dbErrorText(err error, dsn string) string { return redact.DSN(err.Error(), dsn) }
