package shardstore

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/schema"
)

func TestFairShare(t *testing.T) {
	for _, c := range []struct{ shards, live, want int }{
		{256, 1, 256}, {256, 2, 128}, {256, 3, 86}, {256, 0, 256}, {8, 3, 3}, {1, 4, 1}, {256, 300, 1},
	} {
		if got := FairShare(c.shards, c.live); got != c.want {
			t.Errorf("FairShare(%d, %d) = %d, want %d", c.shards, c.live, got, c.want)
		}
	}
}

func TestPlanLeases(t *testing.T) {
	// rows builds 8 shard rows from a string: '.' free, 'x' expired (someone else's),
	// 'o' someone else's, 'm' mine at a boundary, 'p' mine mid-window.
	rows := func(s string) []ShardLease {
		var out []ShardLease
		for i, c := range s {
			r := ShardLease{Shard: int16(i), AtBoundary: c != 'p'}
			switch c {
			case 'x':
				r.Owner, r.Expired = "other", true
			case 'o':
				r.Owner = "other"
			case 'm', 'p':
				r.Owner = "me"
			}
			out = append(out, r)
		}
		return out
	}
	mine := func(tok string) bool { return tok == "me" }
	for _, c := range []struct {
		name string
		rows string
		live int
		want LeasePlan
	}{
		{"alone takes all", "........", 1, LeasePlan{Take: 8}},
		{"second of two takes half of the free", "oooo....", 2, LeasePlan{Take: 4}},
		{"takes expired ones", "xxxxoooo", 2, LeasePlan{Take: 4}},
		{"at its share", "mmmmoooo", 2, LeasePlan{}},
		{"others hold the rest, over their share: nothing to take, look again soon", "mmoooooo", 2, LeasePlan{Soon: true}},
		{"a worker joins: the other holds everything", "oooooooo", 2, LeasePlan{Soon: true}},
		{"under share but the others are at theirs (8 over 3: 3, 3, 2)", "mmoooooo", 3, LeasePlan{}},
		{"third worker joins: the first releases over ceil(8/3)=3", "mmmmmooo", 3, LeasePlan{Release: []int16{4, 3}}},
		{"mid-window shards stay", "mmmppooo", 3, LeasePlan{Release: []int16{2, 1}}},
		{"all mid-window: release later", "pppppooo", 3, LeasePlan{}},
		{"under share with few free, the other over its share", "mm.ooooo", 2, LeasePlan{Take: 1, Soon: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := PlanLeases(rows(c.rows), mine, c.live)
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("PlanLeases(%s, live %d) = %+v, want %+v", c.rows, c.live, got, c.want)
			}
		})
	}
}

func ev(id, agg string, held bool) Event {
	e := Event{Held: held}
	e.EventID, e.AggregateType, e.AggregateID = id, "order", agg
	return e
}

func TestPlanHolds(t *testing.T) {
	sent, fail, unsent, reject := Result{Outcome: Sent}, Result{Outcome: Failed, Code: "C", Message: "m", RetryIn: time.Second},
		Result{Outcome: Unsent, RetryIn: time.Second}, Result{Outcome: Rejected, Code: "BAD", Message: "no"}
	for _, c := range []struct {
		name    string
		events  []Event
		results []Result
		max     int
		want    string // id:state:attempts, space separated
	}{
		{"all sent", []Event{ev("a1", "a", false), ev("b1", "b", false)}, []Result{sent, sent}, 5, ""},
		{"failed holds back its aggregate only", []Event{ev("a1", "a", false), ev("b1", "b", false), ev("a2", "a", false)},
			[]Result{fail, sent, unsent}, 5, "a1:RETRY:1 a2:HELD:0"},
		{"failed at max attempts is DEAD and holds nothing back", []Event{ev("a1", "a", false), ev("a2", "a", false)},
			[]Result{fail, sent}, 1, "a1:DEAD:1"},
		{"rejected is DEAD and does not block", []Event{ev("a1", "a", false), ev("a2", "a", false)}, []Result{reject, sent}, 5, "a1:DEAD:0"},
		{"unsent is an uncounted RETRY and blocks", []Event{ev("a1", "a", false), ev("a2", "a", false)}, []Result{unsent, unsent}, 5,
			"a1:RETRY:0 a2:HELD:0"},
		{"flagged by the read", []Event{ev("a5", "a", true), ev("a6", "a", false)}, []Result{unsent, unsent}, 5, "a5:HELD:0 a6:HELD:0"},
		{"a flagged event that was sent anyway stays sent", []Event{ev("a5", "a", true)}, []Result{sent}, 5, ""},
		{"behind a HELD one a failure is HELD too", []Event{ev("a5", "a", true), ev("a6", "a", false)}, []Result{unsent, reject}, 5,
			"a5:HELD:0 a6:HELD:0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			for _, h := range PlanHolds(c.events, c.results, c.max) {
				got = append(got, h.EventID+":"+h.State+":"+itoa(h.Attempts))
				if h.State == schema.StatusDead && h.Attempts == 1 && h.Code != CodeMaxAttempts {
					t.Errorf("%s: DEAD by attempts has code %s", h.EventID, h.Code)
				}
			}
			if strings.Join(got, " ") != c.want {
				t.Fatalf("PlanHolds = %q, want %q", strings.Join(got, " "), c.want)
			}
		})
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestTransition(t *testing.T) {
	row := func(state string, attempts int) HoldRow {
		h := HoldRow{State: state, Attempts: attempts}
		h.EventID, h.Token = "e", "tok"
		return h
	}
	for _, c := range []struct {
		name   string
		row    HoldRow
		r      Result
		max    int
		want   Settlement
		wantOK bool
	}{
		{"sent RETRY is deleted", row(schema.StatusRetry, 2), Result{Outcome: Sent}, 5, Settlement{EventID: "e", Token: "tok", Delete: true}, true},
		{"sent HELD is deleted", row(schema.StatusHeld, 0), Result{Outcome: Sent}, 5, Settlement{EventID: "e", Token: "tok", Delete: true}, true},
		{"failed RETRY counts", row(schema.StatusRetry, 2), Result{Outcome: Failed, Code: "C", Message: "m", RetryIn: time.Second}, 5,
			Settlement{EventID: "e", Token: "tok", State: schema.StatusRetry, CountAttempt: true, RetryIn: time.Second, Code: "C", Message: "m"}, true},
		{"failed RETRY at max goes DEAD", row(schema.StatusRetry, 4), Result{Outcome: Failed, Code: "C", Message: "m"}, 5,
			Settlement{EventID: "e", Token: "tok", State: schema.StatusDead, CountAttempt: true, Code: CodeMaxAttempts, Message: "C: m"}, true},
		{"failed HELD becomes a RETRY", row(schema.StatusHeld, 0), Result{Outcome: Failed, Code: "C", RetryIn: time.Second}, 5,
			Settlement{EventID: "e", Token: "tok", State: schema.StatusRetry, CountAttempt: true, RetryIn: time.Second, Code: "C"}, true},
		{"unsent RETRY is rescheduled uncounted", row(schema.StatusRetry, 1), Result{Outcome: Unsent, RetryIn: time.Second}, 5,
			Settlement{EventID: "e", Token: "tok", State: schema.StatusRetry, RetryIn: time.Second}, true},
		{"unsent HELD stays", row(schema.StatusHeld, 0), Result{Outcome: Unsent}, 5, Settlement{}, false},
		{"rejected is DEAD", row(schema.StatusHeld, 0), Result{Outcome: Rejected, Code: "BAD"}, 5,
			Settlement{EventID: "e", Token: "tok", State: schema.StatusDead, Code: "BAD"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok := Transition(c.row, c.r, c.max)
			if ok != c.wantOK || got != c.want {
				t.Fatalf("Transition = %+v, %v; want %+v, %v", got, ok, c.want, c.wantOK)
			}
		})
	}
}

func TestWindows(t *testing.T) {
	row := func(shard int16, seq int64) Event { return Event{Shard: shard, Seq: seq, HiTick: 7, Token: "t"} }
	for _, c := range []struct {
		name  string
		rows  []Event
		limit int
		want  []Window
		err   string
	}{
		{"not full: every window done", []Event{row(1, 5), row(1, 9), row(2, 3)}, 10,
			[]Window{{Shard: 1, Token: "t", HiTick: 7, Last: 9, Done: true, Events: 2}, {Shard: 2, Token: "t", HiTick: 7, Last: 3, Done: true, Events: 1}}, ""},
		{"full: the last one goes on", []Event{row(1, 5), row(2, 3), row(2, 4)}, 3,
			[]Window{{Shard: 1, Token: "t", HiTick: 7, Last: 5, Done: true, Events: 1}, {Shard: 2, Token: "t", HiTick: 7, Last: 4, Events: 2}}, ""},
		{"full, the last one closed by its sentinel", []Event{row(1, 5), row(1, 0)}, 2,
			[]Window{{Shard: 1, Token: "t", HiTick: 7, Last: 5, Done: true, Events: 1}}, ""},
		{"only a sentinel", []Event{row(4, 0)}, 2, []Window{{Shard: 4, Token: "t", HiTick: 7, Done: true}}, ""},
		{"seq going back", []Event{row(1, 5), row(1, 4)}, 9, nil, "seq 4 after 5"},
		{"shard split", []Event{row(1, 5), row(2, 4), row(1, 6)}, 9, nil, "not together"},
		{"rows after the sentinel", []Event{row(1, 0), row(1, 6)}, 9, nil, "after its sentinel"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := windows(c.rows, c.limit)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("windows = %v, want error %q", err, c.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, c.want) {
				t.Fatalf("windows = %+v, %v; want %+v", got, err, c.want)
			}
		})
	}
}
