package verdict

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/outbox-operator/outbox-operator/internal/backoff"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/event"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/publish"
)

func TestDecide(t *testing.T) {
	bo := backoff.Policy{Min: 100 * time.Millisecond, Max: time.Second}
	grace := time.Minute
	young, old := &event.Row{Destination: "t"}, &event.Row{Destination: "t", Age: time.Hour}
	for _, c := range []struct {
		name      string
		row       *event.Row
		err       error
		release   bool
		kind      Kind
		code      string
		uncounted bool
	}{
		{"stored", young, nil, false, Sent, "", false},
		{"never sent behind an older write", young, publish.ErrNotSent, false, Release, "", false},
		{"too large: DEAD", young, kafka.MessageSizeTooLarge, false, Dead, publish.CodeMessageTooLarge, false},
		{"too large: DEAD also when the brokers are down", young, kafka.MessageSizeTooLarge, true, Dead, publish.CodeMessageTooLarge, false},
		{"missing topic inside the grace: an uncounted retry", young, kafka.UnknownTopicOrPartition, false, Retry, publish.CodeTopicNotFound, true},
		{"missing topic after the grace: DEAD", old, kafka.UnknownTopicOrPartition, false, Dead, publish.CodeTopicNotFound, false},
		{"transient: a counted retry", young, kafka.NotEnoughReplicas, false, Retry, publish.CodeNotEnoughReplicas, false},
		{"transient while the brokers are down: released", young, kafka.NotEnoughReplicas, true, Release, publish.CodeNotEnoughReplicas, false},
		{"unknown outcome: a counted retry", young, context.DeadlineExceeded, false, Retry, publish.CodeSendTimeoutUnknown, false},
	} {
		v := Decide(c.row, publish.Result{Err: c.err}, grace, bo, c.release)
		if v.Kind != c.kind || v.Code != c.code || v.Uncounted != c.uncounted {
			t.Errorf("%s: got kind %d code %q uncounted %v, want %d %q %v", c.name, v.Kind, v.Code, v.Uncounted, c.kind, c.code, c.uncounted)
		}
		if v.Kind == Retry && v.Delay <= 0 {
			t.Errorf("%s: a retry without a delay", c.name)
		}
	}
	v := Decide(old, publish.Result{Err: kafka.UnknownTopicOrPartition}, grace, bo, false)
	if !strings.Contains(v.Message, "grace") {
		t.Errorf("DEAD after the grace says %q, want the grace named", v.Message)
	}
	if v := Decide(young, publish.Result{Err: errors.New("x")}, grace, bo, false); v.Kind != Retry || v.Classified != true {
		t.Errorf("an unclassified error: %+v", v)
	}
}
