package cdc

import (
	"slices"
	"testing"
)

func TestQueueConfirmsOnlyFinishedPrefix(t *testing.T) {
	q := newQueue(100)
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
	done2()
	if got := q.confirmable(); got != 100 {
		t.Fatalf("the first transaction is unfinished: confirmable %d, want 100", got)
	}
	done1()
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
	done3()
	done3() // idempotent
	if got := q.confirmable(); got != 500 {
		t.Fatalf("all done: confirmable %d, want 500 (the idle position)", got)
	}
}

func TestQueueTakeKeepsCommitOrderAndLimit(t *testing.T) {
	q := newQueue(0)
	q.commit(10, []string{"a1", "b1", "a2", "c1"}, []string{"A", "B", "A", "C"})
	ids, done := q.take(2)
	if !slices.Equal(ids, []string{"a1", "b1"}) {
		t.Fatalf("take(2) = %v", ids)
	}
	done()
	ids, _ = q.take(10)
	if !slices.Equal(ids, []string{"a2", "c1"}) {
		t.Fatalf("rest = %v, want commit order", ids)
	}
	if q.len() != 0 {
		t.Fatal("queue not empty")
	}
}
