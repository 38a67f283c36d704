package plugin

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// pipelineSet is what a trace searches: one named pipeline, or every pipeline of the
// namespace.
type pipelineSet struct {
	namespace string
	explicit  bool
	items     []*outboxv1.OutboxPipeline
}

func findPipelines(ctx context.Context, s *session, name string) (pipelineSet, error) {
	ps := pipelineSet{namespace: s.namespace, explicit: name != ""}
	if name != "" {
		var p outboxv1.OutboxPipeline
		err := s.c.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: name}, &p)
		if apierrors.IsNotFound(err) {
			return ps, fmt.Errorf("pipeline %q not found in namespace %q (kubectl outbox status lists them)", name, s.namespace)
		}
		if err != nil {
			return ps, fmt.Errorf("get OutboxPipeline %s/%s: %w", s.namespace, name, err)
		}
		ps.items = []*outboxv1.OutboxPipeline{p.WithDefaults()}
		return ps, nil
	}
	var list outboxv1.OutboxPipelineList
	if err := s.c.List(ctx, &list, client.InNamespace(s.namespace)); err != nil {
		return ps, listError("OutboxPipelines", err)
	}
	if len(list.Items) == 0 {
		return ps, fmt.Errorf("no OutboxPipelines in namespace %q; use -n NAMESPACE", s.namespace)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	for i := range list.Items {
		ps.items = append(ps.items, list.Items[i].WithDefaults())
	}
	return ps, nil
}

// notFound says where the event was looked for.
func (ps pipelineSet) notFound(id string, skipped int) error {
	if ps.explicit {
		p := ps.items[0]
		return fmt.Errorf("event %q not found in table %s of pipeline %q (also not archived)", id, tableName(p), p.Name)
	}
	if skipped == len(ps.items) {
		return fmt.Errorf("could not search any pipeline of namespace %q for event %q (warnings above)", ps.namespace, id)
	}
	where := make([]string, len(ps.items))
	for i, p := range ps.items {
		where[i] = fmt.Sprintf("%s (%s)", p.Name, tableName(p))
	}
	msg := fmt.Sprintf("event %q not found in the tables of pipelines %s in namespace %q (also not archived)",
		id, strings.Join(where, ", "), ps.namespace)
	if skipped > 0 {
		msg += fmt.Sprintf("; %d of them could not be searched (warnings above)", skipped)
	}
	return errors.New(msg)
}

func tableName(p *outboxv1.OutboxPipeline) string {
	return p.Spec.Source.Schema + "." + p.Spec.Source.Table
}

// pipelineDB validates the pipeline's table name and connects with its DSN Secret
// (spec.source.dsnSecretRef, the Secret the operator and the relay use).
func pipelineDB(ctx context.Context, s *session, p *outboxv1.OutboxPipeline, timeout time.Duration) (*database, pgident.Table, error) {
	table, err := pgident.NewTable(p.Spec.Source.Schema, p.Spec.Source.Table)
	if err != nil {
		return nil, table, fmt.Errorf("pipeline %q: %v; fix spec.source", p.Name, err)
	}
	src := dsnSource{owner: fmt.Sprintf("pipeline %q", p.Name), ns: p.Namespace, ref: p.Spec.Source.DSNSecretRef}
	dsn, err := readDSN(ctx, s.c, src)
	if err != nil {
		return nil, table, err
	}
	db, err := connect(ctx, dsn, src, timeout)
	return db, table, err
}

// tableMissing is the message for a pipeline whose outbox table does not exist.
func tableMissing(p *outboxv1.OutboxPipeline, t pgident.Table) error {
	return fmt.Errorf("pipeline %q: table %s does not exist in the database of Secret %q key %q (run `relayworker migrate` or set spec.source.migrate: true)",
		p.Name, t, p.Spec.Source.DSNSecretRef.Name, p.Spec.Source.DSNSecretRef.Key)
}

// location is where an event was found in one pipeline.
type location struct {
	p     *outboxv1.OutboxPipeline
	table pgident.Table
	row   *eventRow // a v1-shaped row (a v2 table: from its v1 history); nil: none
	v2    *v2Row    // the event in a table of contract v2 (trace_v2.go)
	// history says row came from the v1 history an upgrade to contract v2 moved
	// aside (trace_history.go): the pipeline's table is v2 now.
	history bool
	audits  []auditEntry
}

// found reports whether the pipeline holds the event.
func (l location) found() bool { return l.row != nil || l.v2 != nil }

// archived reports whether the row came from <table>_archive.
func (l location) archived() bool { return l.row != nil && l.row.ArchivedAt.Valid }

// rowTable is the table row was read from before any archive: the pipeline's table,
// or the v1 table an upgrade renamed aside.
func (l location) rowTable() pgident.Table {
	if l.history {
		return historyTable(l.table)
	}
	return l.table
}

func (l location) archiveTable() pgident.Table { return l.rowTable().WithSuffix(schema.ArchiveSuffix) }

// locate looks the event up in the pipeline's outbox table, then its archive (on a v2
// table: its status view, its v2 archive, then the v1 history an upgrade moved
// aside), and reads the replay audit entries that mention it.
func locate(ctx context.Context, s *session, p *outboxv1.OutboxPipeline, id string, timeout time.Duration) (location, error) {
	db, table, err := pipelineDB(ctx, s, p, timeout)
	if err != nil {
		return location{}, err
	}
	defer db.Close()
	loc := location{p: p, table: table}
	err = db.read(ctx, func(ctx context.Context, tx *sql.Tx) error {
		c, err := schema.DetectContractTx(ctx, tx, table)
		if err != nil {
			return err
		}
		if c.Version == schema.ContractV2 {
			if loc.v2, err = findV2(ctx, tx, table, id); err != nil || loc.v2 != nil {
				return err
			}
			if loc.v2, err = findV2Archived(ctx, tx, table, id); err != nil || loc.v2 != nil {
				return err
			}
			loc.row, err = findInHistory(ctx, tx, table, id)
			loc.history = loc.row != nil
			return err
		}
		if loc.row, err = findEvent(ctx, tx, table, id); err != nil || loc.row != nil {
			return err
		}
		loc.row, err = findArchived(ctx, tx, table, id)
		return err
	})
	if err == nil && loc.found() {
		err = db.read(ctx, func(ctx context.Context, tx *sql.Tx) error {
			var err error
			loc.audits, err = replayAudits(ctx, tx, table, id)
			return err
		})
	}
	if errors.Is(err, errTableMissing) {
		return loc, tableMissing(p, table)
	}
	return loc, err
}
