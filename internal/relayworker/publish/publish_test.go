package publish

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/outbox-operator/outbox-operator/internal/relayworker/event"
)

func TestClassify(t *testing.T) {
	dialErr := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	readTimeout := &net.OpError{Op: "read", Net: "tcp", Err: timeoutErr{}}
	cases := []struct {
		name  string
		err   error
		class Class
		code  string
	}{
		{"broker down (dial refused)", dialErr, Transient, CodeBrokerUnavailable},
		{"conn refused wrapped", fmt.Errorf("x: %w", syscall.ECONNREFUSED), Transient, CodeBrokerUnavailable},
		{"dns", &net.DNSError{Err: "no such host", Name: "kafka"}, Transient, CodeBrokerUnavailable},
		{"leader change", kafka.NotLeaderForPartition, Transient, CodeLeaderChange},
		{"leader not available", kafka.LeaderNotAvailable, Transient, CodeLeaderChange},
		{"not enough replicas", kafka.NotEnoughReplicas, Transient, CodeNotEnoughReplicas},
		{"other retriable", kafka.NetworkException, Transient, CodeBrokerRetriable},
		{"unrecognised kafka error is not DEAD", kafka.UnsupportedVersion, Transient, CodeKafkaError},
		{"unrecognised error is not DEAD", errors.New("weird"), Transient, CodeSendFailed},
		// Pitfall: a timeout after the request went out is an unknown outcome -> RETRY, never DEAD.
		{"context deadline", context.DeadlineExceeded, Unknown, CodeSendTimeoutUnknown},
		{"context deadline wrapped", fmt.Errorf("write: %w", context.DeadlineExceeded), Unknown, CodeSendTimeoutUnknown},
		{"context canceled", context.Canceled, Unknown, CodeSendTimeoutUnknown},
		{"broker request timed out", kafka.RequestTimedOut, Unknown, CodeSendTimeoutUnknown},
		{"read timeout", readTimeout, Unknown, CodeSendTimeoutUnknown},
		{"connection reset", fmt.Errorf("x: %w", syscall.ECONNRESET), Unknown, CodeConnLostUnknown},
		{"eof", io.EOF, Unknown, CodeConnLostUnknown},
		{"too large (broker)", kafka.MessageSizeTooLarge, Permanent, CodeMessageTooLarge},
		{"too large (client)", kafka.MessageTooLargeError{}, Permanent, CodeMessageTooLarge},
		{"record list too large", kafka.RecordListTooLarge, Permanent, CodeMessageTooLarge},
		{"invalid record", kafka.InvalidRecord, Permanent, CodeInvalidRecord},
		{"invalid topic", kafka.InvalidTopic, Permanent, CodeInvalidTopic},
		{"topic authorization", kafka.TopicAuthorizationFailed, Permanent, CodeAuthorizationFailed},
		// A wrong or rotated SASL secret is the deployment's fault, not the event's.
		{"sasl authentication", kafka.SASLAuthenticationFailed, Transient, CodeAuthenticationFailed},
		{"sasl mechanism", kafka.UnsupportedSASLMechanism, Transient, CodeAuthenticationFailed},
		{"tls unknown CA", &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}, Transient, CodeTLSFailed},
		{"tls unknown CA in dial", &net.OpError{Op: "dial", Net: "tcp", Err: x509.UnknownAuthorityError{}}, Transient, CodeTLSFailed},
		{"tls to plaintext listener", tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}, Transient, CodeTLSFailed},
		{"unknown topic", kafka.UnknownTopicOrPartition, TopicMissing, CodeTopicNotFound},
		{"write errors element", kafka.WriteErrors{kafka.MessageSizeTooLarge}[0], Permanent, CodeMessageTooLarge},
	}
	for _, c := range cases {
		class, code := Classify(c.err)
		if class != c.class || code != c.code {
			t.Errorf("%s: got %s/%s, want %s/%s", c.name, class, code, c.class, c.code)
		}
		// BrokerCodes restates the Transient and Unknown codes (a paused relay frees
		// RETRY rows carrying them): hold the list to what Classify returns.
		broker := slices.Contains(BrokerCodes, code)
		if want := class == Transient || class == Unknown; broker != want {
			t.Errorf("%s: code %s (%s) in BrokerCodes = %v, want %v", c.name, code, class, broker, want)
		}
	}
	if c, code := Classify(nil); c != 0 || code != "" {
		t.Error("nil error classified")
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

// Pitfall: kafka-go's zero Writer is RequireNone + round robin + 1s batch timeout.
func TestWriterIsDurableAndKeyed(t *testing.T) {
	w, err := NewWriter(Options{Brokers: []string{"127.0.0.1:9092"}, BatchSize: 300})
	if err != nil {
		t.Fatal(err)
	}
	if w.RequiredAcks != kafka.RequireAll {
		t.Errorf("RequiredAcks = %v, want RequireAll", w.RequiredAcks)
	}
	if _, ok := w.Balancer.(*kafka.Murmur2Balancer); !ok {
		t.Errorf("Balancer = %T, want *kafka.Murmur2Balancer", w.Balancer)
	}
	if w.BatchTimeout <= 0 || w.BatchTimeout > 10*time.Millisecond {
		t.Errorf("BatchTimeout = %s, want a few ms", w.BatchTimeout)
	}
	if w.WriteTimeout <= 0 || w.ReadTimeout <= 0 {
		t.Error("timeouts not explicit")
	}
	if w.AllowAutoTopicCreation {
		t.Error("writer auto-creates topics")
	}
	if w.BatchSize != 300 || w.Async {
		t.Errorf("BatchSize %d Async %v", w.BatchSize, w.Async)
	}
	// Same key -> same partition, whatever else changes.
	b := w.Balancer
	p1 := b.Balance(kafka.Message{Key: []byte("order-1"), Value: []byte("a")}, 0, 1, 2, 3, 4, 5)
	for i := 0; i < 20; i++ {
		if p := b.Balance(kafka.Message{Key: []byte("order-1"), Value: []byte{byte(i)}}, 0, 1, 2, 3, 4, 5); p != p1 {
			t.Fatalf("key order-1 went to partitions %d and %d", p1, p)
		}
	}
}

func TestMessageMapping(t *testing.T) {
	row := &event.Row{EventID: "e", AggregateType: "order", AggregateID: "o", AggregateVersion: 3, EventType: "paid",
		EventVersion: 2, Destination: "orders", MessageKey: "k", Payload: []byte(`{"a": 1}`), Headers: []byte(`{"x": "1", "y": "2"}`)}
	m, err := Format{}.Message(row)
	if err != nil {
		t.Fatal(err)
	}
	if m.Topic != "orders" || string(m.Key) != "k" || string(m.Value) != `{"a": 1}` {
		t.Fatalf("%+v", m)
	}
	got := map[string]string{}
	for _, h := range m.Headers {
		got[h.Key] = string(h.Value)
	}
	want := map[string]string{"event_id": "e", "event_type": "paid", "event_version": "2", "aggregate_type": "order",
		"aggregate_id": "o", "aggregate_version": "3", "x": "1", "y": "2"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("headers %v", got)
	}
	bad := []struct {
		mut  func(*event.Row)
		code string
	}{
		{func(r *event.Row) { r.Headers = []byte(`{"x": 1}`) }, CodeInvalidHeaders},
		{func(r *event.Row) { r.Headers = []byte(`["x"]`) }, CodeInvalidHeaders},
		{func(r *event.Row) { r.Headers = []byte(`"x"`) }, CodeInvalidHeaders},
		{func(r *event.Row) { r.Headers = []byte(`{"x": {"y": "z"}}`) }, CodeInvalidHeaders},
		{func(r *event.Row) { r.Headers = []byte(`{"event_id": "spoof"}`) }, CodeInvalidHeaders},
		{func(r *event.Row) { r.Destination = "" }, CodeEmptyDestination},
		{func(r *event.Row) { r.Destination = "  " }, CodeEmptyDestination},
		{func(r *event.Row) { r.Destination = "a/b" }, CodeInvalidTopic},
		{func(r *event.Row) { r.Payload = nil }, CodeInvalidPayload},
	}
	for i, b := range bad {
		r := *row
		b.mut(&r)
		_, err := Format{}.Message(&r)
		var be *BadEventError
		if !errors.As(err, &be) || be.Code != b.code {
			t.Errorf("case %d: %v, want %s", i, err, b.code)
		}
	}
	r := *row
	r.Headers = []byte("null")
	if _, err := (Format{}).Message(&r); err != nil {
		t.Errorf("JSON null headers: %v", err)
	}
}

func TestChunkKeepsOrderAndLimit(t *testing.T) {
	msg := func(n int) kafka.Message { return kafka.Message{Value: make([]byte, n-32)} } // Size(msg(n)) == n
	msgs := []kafka.Message{msg(400), msg(300), msg(500), msg(2000), msg(100), msg(100)}
	got := fmt.Sprint(chunk(msgs, []int{0, 1, 2, 3, 4, 5}, 1000))
	// 400+300 fit, +500 does not; 2000 alone exceeds the limit but still goes (alone).
	if want := "[[0 1] [2] [3] [4 5]]"; got != want {
		t.Fatalf("chunks %s, want %s", got, want)
	}
	if got := fmt.Sprint(chunk(msgs, []int{4, 5}, 1000)); got != "[[4 5]]" {
		t.Fatalf("small batch split: %s", got)
	}
	if got := chunk(msgs, nil, 1000); len(got) != 0 {
		t.Fatalf("empty input: %v", got)
	}
}

func TestRetryableHoldsBackLaterVersions(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{kafka.MessageSizeTooLarge, false}, // DEAD does not block successors
		{kafka.NotLeaderForPartition, true},
		{context.DeadlineExceeded, true},
		{ErrNotSent, true},
	} {
		if got := retryable(c.err); got != c.want {
			t.Errorf("retryable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
