package brokerpause

import (
	"context"
	"net"
	"syscall"
	"testing"

	"github.com/segmentio/kafka-go"

	"github.com/outbox-operator/outbox-operator/internal/relayworker/publish"
)

func TestBrokerWideTellsTheBrokersFailuresFromTheRows(t *testing.T) {
	ok := publish.Result{}
	refused := publish.Result{Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}
	timeout := publish.Result{Err: context.DeadlineExceeded}
	noLeader := publish.Result{Err: kafka.NotLeaderForPartition}
	tooLarge := publish.Result{Err: kafka.MessageSizeTooLarge}
	noTopic := publish.Result{Err: kafka.UnknownTopicOrPartition}
	notSent := publish.Result{Err: publish.ErrNotSent}
	for _, c := range []struct {
		name string
		res  []publish.Result
		down bool
		code string
	}{
		{"everything refused", []publish.Result{refused, refused}, true, publish.CodeBrokerUnavailable},
		{"timeouts everywhere (unknown outcome)", []publish.Result{timeout, timeout}, true, publish.CodeSendTimeoutUnknown},
		{"every partition without a leader", []publish.Result{noLeader, noLeader, notSent}, true, publish.CodeLeaderChange},
		{"a too-large message does not hide the outage", []publish.Result{tooLarge, refused}, true, publish.CodeBrokerUnavailable},
		{"one partition failed while another stored", []publish.Result{ok, noLeader}, false, ""},
		{"unknown outcome for one message while others stored", []publish.Result{timeout, ok}, false, ""},
		{"a broker answered unknown topic", []publish.Result{noTopic, refused}, false, ""},
		{"only permanent failures", []publish.Result{tooLarge}, false, ""},
		{"all stored", []publish.Result{ok, ok}, false, ""},
	} {
		down, code, _ := BrokerWide(c.res)
		if down != c.down || code != c.code {
			t.Errorf("%s: BrokerWide = %v %q, want %v %q", c.name, down, code, c.down, c.code)
		}
	}
}

// answered tells a trial a broker answered (it resumes a paused worker) from one that
// never reached a broker.
func TestAnsweredNeedsABrokersAnswer(t *testing.T) {
	ok := publish.Result{}
	refused := publish.Result{Err: kafka.NotEnoughReplicas}
	brokerTooLarge := publish.Result{Err: kafka.MessageSizeTooLarge}
	localTooLarge := publish.Result{Err: kafka.MessageTooLargeError{}}
	noTopic := publish.Result{Err: kafka.UnknownTopicOrPartition}
	notSent := publish.Result{Err: publish.ErrNotSent}
	for _, c := range []struct {
		name string
		res  []publish.Result
		want bool
	}{
		{"stored", []publish.Result{refused, ok}, true},
		{"broker refused a message as too large", []publish.Result{brokerTooLarge, refused}, true},
		{"unknown topic", []publish.Result{noTopic}, true},
		{"every write refused", []publish.Result{refused, notSent}, false},
		{"too large to send, never sent", []publish.Result{localTooLarge, notSent}, false},
		{"nothing published", nil, false},
	} {
		if got := Answered(c.res); got != c.want {
			t.Errorf("%s: answered = %v, want %v", c.name, got, c.want)
		}
	}
}
