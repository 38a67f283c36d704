// workload.go: the events every peer relays (issue 7's workload): 10,000 aggregates
// with about ten versions each, interleaved in insert order; one aggregate type per
// topic (2 topics x 6 partitions), key = aggregate id, ~300-byte JSON payloads, a
// headers object on every second event.

package main

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
)

type event struct {
	seq     int
	agg     int
	version int64
}

// workload is one run's events plus how to name them.
type workload struct {
	run        string // prefix of event ids, unique per run
	topics     [2]string
	aggregates int
	events     []event
}

func newWorkload(run string, n, aggregates int, seed uint64) *workload {
	w := &workload{run: run, aggregates: aggregates,
		topics: [2]string{run + ".orders", run + ".payments"}}
	rng := rand.New(rand.NewPCG(seed, 7))
	versions := make([]int64, aggregates)
	w.events = make([]event, n)
	for i := range w.events {
		a := rng.IntN(aggregates)
		versions[a]++
		w.events[i] = event{seq: i, agg: a, version: versions[a]}
	}
	return w
}

// latencyWorkload has no events up front: producers make them as they go.
func latencyWorkload(run string, aggregates int) *workload {
	return &workload{run: run, aggregates: aggregates,
		topics: [2]string{run + ".orders", run + ".payments"}}
}

func (w *workload) eventID(seq int) string { return w.run + "-" + strconv.Itoa(seq) }

// seqOf parses an event id back to its sequence number (-1: not this run's).
func (w *workload) seqOf(id []byte) int {
	s := string(id)
	if !strings.HasPrefix(s, w.run+"-") {
		return -1
	}
	n, err := strconv.Atoi(s[len(w.run)+1:])
	if err != nil {
		return -1
	}
	return n
}

func (w *workload) aggType(agg int) string {
	if agg%2 == 0 {
		return "order"
	}
	return "payment"
}

func (w *workload) topic(agg int) string     { return w.topics[agg%2] }
func (w *workload) aggID(agg int) string     { return fmt.Sprintf("agg-%05d", agg) }
func (w *workload) eventType(agg int) string { return w.aggType(agg) + ".changed" }

// payload is ~300 bytes of JSON.
func (w *workload) payload(e event) string {
	return fmt.Sprintf(`{"id":"%s","version":%d,"status":"confirmed","amount":{"value":%d,"currency":"EUR"},`+
		`"customer":{"id":"c-%06d","segment":"retail","country":"DE"},"lines":[{"sku":"sku-%04d","qty":%d,"price":1999},`+
		`{"sku":"sku-%04d","qty":1,"price":499}],"note":"benchmark payload padded to about three hundred bytes"}`,
		w.aggID(e.agg), e.version, 1000+e.seq%9000, e.agg*7%1000000, e.seq%10000, 1+e.seq%5, (e.seq*3)%10000)
}

// headers is a JSON object on every second event, SQL NULL otherwise.
func (w *workload) headers(e event) any {
	if e.seq%2 == 1 {
		return nil
	}
	return fmt.Sprintf(`{"traceparent":"00-%032x-%016x-01","tenant":"t-%d"}`, e.seq, e.agg, e.agg%50)
}
