package plugin

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/outbox-operator/outbox-operator/internal/redact"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// maxErrorText bounds last_error_message in the output; the row has the whole text.
const maxErrorText = 500

// renderEvent prints one location as "field: value" lines, then its replay audit.
func renderEvent(out io.Writer, loc location) {
	r := loc.row
	where := loc.rowTable().String()
	if loc.archived() {
		where = loc.archiveTable().String() + " (archived)"
	}
	fmt.Fprintf(out, "EVENT %s  pipeline %s/%s  table %s\n", r.EventID, loc.p.Namespace, loc.p.Name, where)
	w := tabwriter.NewWriter(out, 0, 8, 1, ' ', 0)
	field := fieldPrinter(w)
	if loc.history {
		// First, so the row is never taken for the v2 table's.
		field("history", historyWhere(loc))
	}
	field("status", r.Status+historyStatus(loc))
	field("attempts", itoa(r.RetryCount)+nextRetry(r))
	field("last error", lastError(r))
	field("lease until", timestamp(r.LeaseUntil.Time))
	field("owner token", r.OwnerToken.String)
	field("aggregate", fmt.Sprintf("%s/%s version %d", r.AggregateType, r.AggregateID, r.AggregateVersion))
	field("event type", fmt.Sprintf("%s (event version %d)", r.EventType, r.EventVersion))
	field("destination", fmt.Sprintf("topic %s, key %s", r.Destination, r.MessageKey))
	field("created", timestamp(r.CreatedAt))
	field("sent", timestamp(r.SentAt.Time))
	field("updated", timestamp(r.UpdatedAt))
	field("broker", broker(r))
	if loc.archived() {
		field("archived", timestamp(r.ArchivedAt.Time))
	}
	_ = w.Flush()
	renderAudits(out, loc)
	fmt.Fprintln(out)
}

// nextRetry adds when a RETRY row is due again.
func nextRetry(r *eventRow) string {
	if r.Status != "RETRY" {
		return ""
	}
	return " (next retry " + timestamp(r.NextRetryAt) + ")"
}

func lastError(r *eventRow) string {
	if !r.LastErrorCode.Valid && !r.LastErrorMessage.Valid {
		return ""
	}
	msg := redact.Truncate(oneLine(r.LastErrorMessage.String), maxErrorText)
	if msg == "" {
		return r.LastErrorCode.String
	}
	return r.LastErrorCode.String + ": " + msg
}

func broker(r *eventRow) string {
	if !r.BrokerPartition.Valid {
		return ""
	}
	return fmt.Sprintf("partition %d, offset %d", r.BrokerPartition.Int64, r.BrokerOffset.Int64)
}

func renderAudits(out io.Writer, loc location) {
	at := loc.table.WithSuffix(schema.ReplayAuditSuffix).String()
	if len(loc.audits) == 0 {
		fmt.Fprintf(out, "REPLAY AUDIT (%s): no replay mentions this event\n", at)
		return
	}
	fmt.Fprintf(out, "REPLAY AUDIT (%s)\n", at)
	t := newTable(out, "REPLAY ID", "PHASE", "DRY RUN", "MATCHED", "REPLAYED", "SUCCEEDED", "DEAD AGAIN", "REQUESTED BY", "REASON", "STARTED", "FINISHED")
	for _, a := range loc.audits {
		t.row(a.ReplayID, a.Phase, fmt.Sprint(a.DryRun), itoa(a.Matched), itoa(a.Replayed), itoa(a.Succeeded), itoa(a.DeadAgain),
			a.RequestedBy, redact.Truncate(oneLine(a.Reason), 60), timestamp(a.StartedAt), timestamp(a.FinishedAt.Time))
	}
	_ = t.flush()
}

// renderConsumer prints which consumer groups of one database processed or parked the
// event.
func renderConsumer(out io.Writer, id string, ct consumerTrace) {
	fmt.Fprintf(out, "CONSUMERS (database from %s, schema %s)\n", ct.src, ct.schema)
	if len(ct.missing) > 0 {
		fmt.Fprintf(out, "  missing tables: %s (run inbox.Migrate in that database)\n", strings.Join(ct.missing, ", "))
	}
	if len(ct.consumed) == 0 {
		fmt.Fprintf(out, "  no consumer group has processed event %s\n", id)
	} else {
		t := newTable(out, "GROUP", "STATUS", "FIRST RECEIVED", "UPDATED")
		for _, r := range ct.consumed {
			t.row(r.Group, r.Status, timestamp(r.FirstReceived), timestamp(r.Updated))
		}
		_ = t.flush()
	}
	if len(ct.parked) == 0 {
		fmt.Fprintln(out, "  no consumer group has parked it")
	} else {
		fmt.Fprintln(out, "PARKED")
		t := newTable(out, "GROUP", "ERROR CODE", "ATTEMPTS", "STATUS", "TOPIC/PARTITION/OFFSET", "LAST SEEN")
		for _, r := range ct.parked {
			t.row(r.Group, r.ErrorCode, itoa(r.Attempts), r.Status, fmt.Sprintf("%s/%d/%d", r.Topic, r.Partition, r.Offset), timestamp(r.LastSeen))
		}
		_ = t.flush()
	}
	fmt.Fprintln(out)
}

// fieldPrinter prints one "  key:<tab>value" line of a trace (none for an empty value)
// to the tabwriter w.
func fieldPrinter(w io.Writer) func(k, v string) {
	return func(k, v string) {
		if v == "" {
			v = none
		}
		fmt.Fprintf(w, "  %s:\t%s\n", k, v)
	}
}
