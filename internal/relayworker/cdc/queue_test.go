package cdc

import (
	"slices"
	"testing"
	"time"
)

func TestQueueConfirmsOnlyFinishedPrefix(t *testing.T) {
	q := newQueue(100, time.Minute)
	q.commit(200, []string{"a1", "b1"}, []string{"A", "B"})
	if got := q.confirmable(); got != 100 {
		t.Fatalf("nothing done yet: confirmable %d, want 100", got)
	}
	ids, done1 := q.take(10)
	if !slices.Equal(ids, []string{"a1", "b1"}) {
		t.Fatalf("first take %v, want [a1 b1]", ids)
	}
	q.commit(300, []string{"a2", "c1"}, []string{"A", "C"})
	q.commit(400, nil, nil) // a transaction with nothing of ours
	// a2 waits while a1 is in an unfinished batch: a claim would see a1 SENDING and
	// leave a2 to polling. c1, behind it in commit order, is free to go.
	ids2, done2 := q.take(10)
	if !slices.Equal(ids2, []string{"c1"}) {
		t.Fatalf("second take %v, want [c1] (A is in flight)", ids2)
	}
	done2(nil)
	if got := q.confirmable(); got != 100 {
		t.Fatalf("the first transaction is unfinished: confirmable %d, want 100", got)
	}
	done1(nil)
	if got := q.confirmable(); got != 200 {
		t.Fatalf("after the first batch: confirmable %d, want 200 (a2's transaction is not done)", got)
	}
	ids, done3 := q.take(10)
	if !slices.Equal(ids, []string{"a2"}) {
		t.Fatalf("third take %v, want [a2]", ids)
	}
	q.idle(500)
	if got := q.confirmable(); got != 200 {
		t.Fatalf("the idle position must wait for the batch in flight: %d", got)
	}
	done3(nil)
	done3(nil) // idempotent
	if got := q.confirmable(); got != 500 {
		t.Fatalf("all done: confirmable %d, want 500 (the idle position)", got)
	}
}

func TestQueueTakeKeepsCommitOrderAndLimit(t *testing.T) {
	q := newQueue(0, time.Minute)
	q.commit(10, []string{"a1", "b1", "a2", "c1"}, []string{"A", "B", "A", "C"})
	ids, done := q.take(2)
	if !slices.Equal(ids, []string{"a1", "b1"}) {
		t.Fatalf("take(2) = %v", ids)
	}
	done(nil)
	ids, _ = q.take(10)
	if !slices.Equal(ids, []string{"a2", "c1"}) {
		t.Fatalf("rest = %v, want commit order", ids)
	}
	if q.len() != 0 {
		t.Fatal("queue not empty")
	}
}

// An id the claim could not take yet goes back to the front of the queue and keeps
// its transaction unconfirmed; past the retry window it is polling's.
func TestQueueRetriesUnclaimedIDsForAWhile(t *testing.T) {
	q := newQueue(0, time.Minute)
	q.commit(10, []string{"a2"}, []string{"A"}) // committed before its older version
	q.commit(20, []string{"a1", "b1"}, []string{"A", "B"})
	ids, done := q.take(1)
	if !slices.Equal(ids, []string{"a2"}) {
		t.Fatalf("take %v", ids)
	}
	done([]string{"a2"})
	if got := q.confirmable(); got != 0 {
		t.Fatalf("a2 is not done: confirmable %d", got)
	}
	ids, done = q.take(10)
	if !slices.Equal(ids, []string{"a2", "a1", "b1"}) {
		t.Fatalf("retry take %v, want a2 first again, then the rest", ids)
	}
	done(nil)
	if got := q.confirmable(); got != 20 {
		t.Fatalf("confirmable %d, want 20", got)
	}

	q = newQueue(0, 0) // no retry window: polling takes what a claim left at once
	q.commit(10, []string{"x"}, []string{"X"})
	_, done = q.take(10)
	done([]string{"x"})
	if q.len() != 0 || q.confirmable() != 10 {
		t.Fatalf("without a retry window the entry must be done: queued %d, confirmable %d", q.len(), q.confirmable())
	}
}

// A full batch stops the scan; what it skipped stays in front of the unread rest, in
// commit order.
func TestQueueTakeStopsAtTheBatchAndKeepsOrder(t *testing.T) {
	q := newQueue(0, time.Minute)
	q.commit(10, []string{"a1", "b1"}, []string{"A", "B"})
	_, done1 := q.take(1) // a1
	q.commit(20, []string{"a2", "c1", "d1", "e1"}, []string{"A", "C", "D", "E"})
	ids, done2 := q.take(2)
	if !slices.Equal(ids, []string{"b1", "c1"}) {
		t.Fatalf("take(2) = %v, want [b1 c1] (a2 held behind a1)", ids)
	}
	done1(nil)
	done2(nil)
	ids, _ = q.take(10)
	if !slices.Equal(ids, []string{"a2", "d1", "e1"}) {
		t.Fatalf("rest = %v, want [a2 d1 e1]", ids)
	}
}
