package plugin

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
)

// traceAggregate prints an aggregate's rows per pipeline that has any (on a v2 table,
// with the older versions of its v1 history). Archived rows are not listed: the
// archive is indexed by event_id only, and scanning it could take minutes.
func (c *traceCmd) traceAggregate(ctx context.Context, s *session, pipes pipelineSet, ta traceArgs) error {
	found, skipped := 0, 0
	for _, p := range pipes.items {
		db, table, err := pipelineDB(ctx, s, p, c.timeout)
		if err == nil {
			var l aggregateListing
			err = db.read(ctx, func(ctx context.Context, tx *sql.Tx) error {
				var err error
				l, err = aggregateRows(ctx, tx, table, ta.aggType, ta.aggID, c.limit)
				return err
			})
			db.Close()
			if errors.Is(err, errTableMissing) {
				err = tableMissing(p, table)
			}
			if err == nil && l.len() > 0 {
				found++
				renderAggregate(c.out, p.Namespace+"/"+p.Name, table, ta, l, c.limit)
			}
		}
		if err != nil {
			if pipes.explicit {
				return err
			}
			skipped++
			fmt.Fprintf(c.warn, "warning: skipped %s\n", oneLine(err.Error()))
		}
	}
	if found == 0 {
		return aggregateNotFound(pipes, ta, skipped)
	}
	return nil
}

func aggregateNotFound(pipes pipelineSet, ta traceArgs, skipped int) error {
	agg := ta.aggType + "/" + ta.aggID
	if pipes.explicit {
		p := pipes.items[0]
		return fmt.Errorf("aggregate %s has no rows in table %s of pipeline %q (archived rows are not searched)", agg, tableName(p), p.Name)
	}
	if skipped == len(pipes.items) {
		return fmt.Errorf("could not search any pipeline of namespace %q for aggregate %s (warnings above)", pipes.namespace, agg)
	}
	msg := fmt.Sprintf("aggregate %s has no rows in the tables of the %d pipelines in namespace %q (archived rows are not searched)",
		agg, len(pipes.items), pipes.namespace)
	if skipped > 0 {
		msg += fmt.Sprintf("; %d of them could not be searched (warnings above)", skipped)
	}
	return errors.New(msg)
}

// renderAggregate prints the table's versions, then, on a v2 table, the older ones
// from the v1 history (the whole is the newest limit versions).
func renderAggregate(out io.Writer, pipeline string, table pgident.Table, ta traceArgs, l aggregateListing, limit int) {
	where := table.String()
	if l.v2 {
		where += " (contract v2)"
	}
	fmt.Fprintf(out, "AGGREGATE %s/%s  pipeline %s  table %s", ta.aggType, ta.aggID, pipeline, where)
	if l.len() == limit {
		fmt.Fprintf(out, "  (newest %d versions; --limit shows more)", limit)
	}
	fmt.Fprintln(out)
	if len(l.rows) > 0 {
		aggregateTable(out, l.rows)
	}
	if len(l.history) > 0 {
		// Its statuses stopped at the upgrade, like one event's from the history.
		fmt.Fprintf(out, "V1 HISTORY  table %s (moved aside by the upgrade to contract v2; status as of the upgrade)\n", historyTable(table))
		aggregateTable(out, l.history)
	}
	fmt.Fprintln(out)
}

func aggregateTable(out io.Writer, rows []eventRow) {
	t := newTable(out, "VERSION", "EVENT ID", "EVENT TYPE", "STATUS", "ATTEMPTS", "LAST ERROR", "CREATED", "SENT")
	for _, r := range rows {
		t.row(itoa(r.AggregateVersion), r.EventID, r.EventType, r.Status, itoa(r.RetryCount),
			r.LastErrorCode.String, timestamp(r.CreatedAt), timestamp(r.SentAt.Time))
	}
	_ = t.flush()
}
