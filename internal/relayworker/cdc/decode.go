// decode.go: pgoutput messages to the event ids of committed inserts.

package cdc

import (
	"fmt"

	"github.com/jackc/pglogrepl"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
)

// decoded is what one message means to the queue.
type decoded struct {
	commit    bool // a transaction committed: ids/aggs are its inserts
	idle      bool // a position with nothing of ours before it (a heartbeat message)
	end       pglogrepl.LSN
	ids, aggs []string
}

// relation is what the decoder needs of the outbox table's relation message: where
// the columns it reads are. Columns are found by name, so a column added to the
// table (a new Relation message arrives first) changes nothing.
type relation struct {
	ours               bool
	id, aggType, aggID int
}

// decoder follows one stream's transactions.
type decoder struct {
	t           pgident.Table
	rels        map[uint32]relation
	inTxn       bool
	ids, aggs   []string
	undecodable int // inserts of ours without an event id since the last report
}

func newDecoder(t pgident.Table) *decoder {
	return &decoder{t: t, rels: map[uint32]relation{}}
}

func (d *decoder) decode(data []byte, at pglogrepl.LSN) (decoded, error) {
	msg, err := pglogrepl.Parse(data)
	if err != nil {
		return decoded{}, fmt.Errorf("decode pgoutput message: %w", err)
	}
	switch m := msg.(type) {
	case *pglogrepl.RelationMessage:
		d.rels[m.RelationID] = d.relation(m)
	case *pglogrepl.BeginMessage:
		d.inTxn, d.ids, d.aggs = true, nil, nil
	case *pglogrepl.InsertMessage:
		d.insert(m)
	case *pglogrepl.CommitMessage:
		d.inTxn = false
		out := decoded{commit: true, end: m.TransactionEndLSN, ids: d.ids, aggs: d.aggs}
		d.ids, d.aggs = nil, nil
		return out, nil
	case *pglogrepl.LogicalDecodingMessage:
		if !m.Transactional && !d.inTxn {
			return decoded{idle: true, end: at}, nil
		}
	}
	return decoded{}, nil
}

func (d *decoder) relation(m *pglogrepl.RelationMessage) relation {
	r := relation{ours: m.Namespace == d.t.Schema && m.RelationName == d.t.Name, id: -1, aggType: -1, aggID: -1}
	for i, c := range m.Columns {
		switch c.Name {
		case "event_id":
			r.id = i
		case "aggregate_type":
			r.aggType = i
		case "aggregate_id":
			r.aggID = i
		}
	}
	return r
}

func (d *decoder) insert(m *pglogrepl.InsertMessage) {
	r, ok := d.rels[m.RelationID]
	if !ok || !r.ours {
		return
	}
	text := func(i int) (string, bool) {
		if i < 0 || m.Tuple == nil || i >= len(m.Tuple.Columns) || m.Tuple.Columns[i].DataType != pglogrepl.TupleDataTypeText {
			return "", false
		}
		return string(m.Tuple.Columns[i].Data), true
	}
	id, ok := text(r.id)
	if !ok {
		d.undecodable++
		return
	}
	typ, _ := text(r.aggType)
	agg, _ := text(r.aggID)
	d.ids = append(d.ids, id)
	d.aggs = append(d.aggs, joinAgg(typ, agg))
}
