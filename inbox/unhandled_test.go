package inbox_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outbox-operator/outbox-operator/inbox"
)

// unhandledAge gathers inbox_oldest_unhandled_message_age_seconds of group/topic the
// way a scrape does; ok is false when the series does not exist.
func unhandledAge(t *testing.T, reg *prometheus.Registry, group, topic string) (age float64, ok bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "inbox_oldest_unhandled_message_age_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if len(labels) == 2 && labels["consumer_group"] == group && labels["topic"] == topic {
				return m.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}

// TestUnhandledAgeGrowsWhileAHandlerBlocks: a handler blocks on the first message;
// inbox_oldest_unhandled_message_age_seconds{consumer_group,topic} keeps growing
// from scrape to scrape while nothing commits (the lag and age gauges stay frozen),
// and reads 0 once the message is handled and its offset committed.
func TestUnhandledAgeGrowsWhileAHandlerBlocks(t *testing.T) {
	_, s := setup(t)
	b := topicWith(t, 1, event{"slow", "u1", 1, `{}`}.kafka(""), event{"next", "u2", 1, `{}`}.kafka(""))
	release := make(chan struct{})
	fn := func(ctx context.Context, tx *sql.Tx, m inbox.Message) (string, error) {
		if m.EventID == "slow" {
			select {
			case <-release:
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
		return "", nil
	}
	tl := newTally(2)
	o := fastOptions(tl)
	o.Metrics = inbox.NewMetrics()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(o.Metrics)
	c, err := inbox.NewConsumer(s, fn, o)
	if err != nil {
		t.Fatal(err)
	}
	startRun(t, c, reader(b, "points"))

	first := waitFor(t, 20*time.Second, "the stuck message's age above 0.5s", func() (float64, bool) {
		age, ok := unhandledAge(t, reg, "points", "payments")
		return age, ok && age > 0.5
	})
	waitFor(t, 20*time.Second, "the age to grow past the first reading", func() (float64, bool) {
		age, _ := unhandledAge(t, reg, "points", "payments")
		return age, age > first+0.5
	})
	close(release)
	<-tl.done
	waitFor(t, 20*time.Second, "the age to read 0 once everything is committed", func() (float64, bool) {
		age, ok := unhandledAge(t, reg, "points", "payments")
		return age, ok && age == 0
	})
}

// waitFor polls probe until it says done, and returns its last value; it fails the
// test with what it waited for after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, probe func() (float64, bool)) float64 {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		v, done := probe()
		if done {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s (last %v)", what, v)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
