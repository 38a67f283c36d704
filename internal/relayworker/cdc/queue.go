// queue.go: the inserts logical replication delivered, waiting to be claimed, and the
// bookkeeping that says how far the slot may be confirmed.

package cdc

import (
	"sync"
	"time"

	"github.com/jackc/pglogrepl"
)

// entry is one delivered insert.
type entry struct {
	id    string
	agg   string // aggregate_type + "\x00" + aggregate_id: entries of one aggregate go out in order
	tx    *txn
	since time.Time // when it was queued first
}

// txn is one committed transaction of the stream, in commit order.
type txn struct {
	end         pglogrepl.LSN // the commit's end: confirming it says "all of it is done"
	outstanding int           // its entries not yet done (queued or in a batch)
}

// queue holds delivered entries until a claim takes them, and the transactions until
// every entry of theirs is done. The slot may be confirmed up to the end of the last
// transaction of the done prefix: the server re-sends every transaction that
// committed after the confirmed position, so nothing unfinished is ever confirmed.
type queue struct {
	mu sync.Mutex
	// again holds entries a claim could not take yet, ahead of entries in commit
	// order; both are taken from the front.
	again    []entry
	entries  []entry
	txns     []*txn
	inflight map[string]int // aggregate -> entries of it in unfinished batches
	done     pglogrepl.LSN  // confirmable position
	// idleEnd is a server position with nothing of ours before it (a keepalive's
	// WAL end or a heartbeat), confirmable once the queue and batches are empty.
	idleEnd pglogrepl.LSN
	// handoverAfter: an entry a claim could not take yet (an older version of its
	// aggregate had not arrived, or was in another worker's batch) goes back into the
	// queue for this long after it was first queued; then polling has it.
	handoverAfter time.Duration
}

func newQueue(start pglogrepl.LSN, handoverAfter time.Duration) *queue {
	return &queue{inflight: map[string]int{}, done: start, handoverAfter: handoverAfter}
}

// commit appends one committed transaction's entries (possibly none).
func (q *queue) commit(end pglogrepl.LSN, ids, aggs []string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	t := &txn{end: end, outstanding: len(ids)}
	q.txns = append(q.txns, t)
	now := time.Now()
	for i := range ids {
		q.entries = append(q.entries, entry{id: ids[i], agg: aggs[i], tx: t, since: now})
	}
	q.advance()
}

// idle records a server position with nothing of ours before it.
func (q *queue) idle(end pglogrepl.LSN) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if end > q.idleEnd {
		q.idleEnd = end
	}
	q.advance()
}

// len is the number of entries waiting to be taken.
func (q *queue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.again) + len(q.entries)
}

// take hands out up to max entries in commit order, skipping aggregates that have an
// entry in an unfinished batch (and everything of theirs behind it): a claim must not
// see a newer version while the older one is still SENDING in a batch of ours, or it
// would leave the newer one to polling. done must be called once the batch's marks are
// written (or it was given up), with the ids the claim could not take but that may
// still be claimable (PENDING, or not yet visible): they go back to the front of the
// queue, in order, for a while.
func (q *queue) take(max int) (ids []string, done func(retry []string)) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var taken []entry
	held := map[string]bool{}
	// scan takes from the front of list until the batch is full and compacts what it
	// skipped in place in front of the unread rest: the work is the part it read, not
	// the queue's length (up to MaxQueued while a backlog streams in).
	scan := func(list []entry) []entry {
		w, i := 0, 0
		for ; i < len(list) && len(taken) < max; i++ {
			e := list[i]
			if held[e.agg] || q.inflight[e.agg] > 0 {
				held[e.agg] = true
				list[w] = e
				w++
				continue
			}
			taken = append(taken, e)
			ids = append(ids, e.id)
		}
		copy(list[i-w:i], list[:w]) // memmove: keeps the skipped entries' order
		return list[i-w:]
	}
	q.again = scan(q.again)
	q.entries = scan(q.entries)
	for _, e := range taken {
		q.inflight[e.agg]++
	}
	var once sync.Once
	return ids, func(retry []string) { once.Do(func() { q.finish(taken, retry) }) }
}

func (q *queue) finish(batch []entry, retry []string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	again := map[string]bool{}
	for _, id := range retry {
		again[id] = true
	}
	var back []entry
	for _, e := range batch {
		if q.inflight[e.agg]--; q.inflight[e.agg] <= 0 {
			delete(q.inflight, e.agg)
		}
		if again[e.id] && time.Since(e.since) < q.handoverAfter {
			back = append(back, e) // still outstanding in its transaction
			continue
		}
		e.tx.outstanding--
	}
	if len(back) > 0 {
		q.again = append(back, q.again...)
	}
	q.advance()
}

// advance moves the confirmable position over the done prefix of transactions.
func (q *queue) advance() {
	n := 0
	for n < len(q.txns) && q.txns[n].outstanding == 0 {
		if q.txns[n].end > q.done {
			q.done = q.txns[n].end
		}
		n++
	}
	q.txns = q.txns[n:]
	if len(q.txns) == 0 && len(q.inflight) == 0 && q.idleEnd > q.done {
		q.done = q.idleEnd
	}
}

// confirmable is the position the slot may be confirmed to.
func (q *queue) confirmable() pglogrepl.LSN {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.done
}
