package publish

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/segmentio/kafka-go"
)

// Class is what the relay does with a failed publish.
type Class int

const (
	// Transient: the message was not stored; RETRY with backoff.
	Transient Class = iota + 1
	// Unknown: the broker may or may not have stored it (timeout or connection lost
	// after the request went out); RETRY, a duplicate is allowed and counted.
	Unknown
	// Permanent: retrying cannot help; DEAD with the code.
	Permanent
	// TopicMissing: the destination topic does not exist; the relay retries it until
	// --unknown-topic-grace has passed since the event was created, then DEAD.
	TopicMissing
)

func (c Class) String() string {
	switch c {
	case Transient:
		return "transient"
	case Unknown:
		return "unknown"
	case Permanent:
		return "permanent"
	case TopicMissing:
		return "topic-missing"
	}
	return "none"
}

// Stable error codes stored in last_error_code and used as metric labels.
const (
	CodeBrokerUnavailable   = "BROKER_UNAVAILABLE"
	CodeLeaderChange        = "LEADER_CHANGE"
	CodeNotEnoughReplicas   = "NOT_ENOUGH_REPLICAS"
	CodeBrokerRetriable     = "BROKER_RETRIABLE"
	CodeKafkaError          = "KAFKA_ERROR"
	CodeSendFailed          = "SEND_FAILED"
	CodeSendTimeoutUnknown  = "SEND_TIMEOUT_UNKNOWN"
	CodeConnLostUnknown     = "CONNECTION_LOST_UNKNOWN"
	CodeMessageTooLarge     = "MESSAGE_TOO_LARGE"
	CodeInvalidRecord       = "INVALID_RECORD"
	CodeInvalidTopic        = "INVALID_TOPIC"
	CodeTopicNotFound       = "TOPIC_NOT_FOUND"
	CodeAuthorizationFailed = "AUTHORIZATION_FAILED"
	// CodeAuthenticationFailed: the broker refused the worker's SASL credentials or
	// mechanism. Transient, not DEAD: it is a property of the deployment (a wrong or
	// rotated Secret), not of the event, so fixing the Secret must let the backlog flow
	// on. Like every broker-wide code it pauses the worker without counting attempts.
	CodeAuthenticationFailed = "AUTHENTICATION_FAILED"
	// CodeTLSFailed: the TLS handshake with a broker failed (unknown CA, wrong host
	// name, plaintext listener). Transient for the same reason as authentication.
	CodeTLSFailed        = "TLS_HANDSHAKE_FAILED"
	CodeInvalidHeaders   = "INVALID_HEADERS"
	CodeInvalidPayload   = "INVALID_PAYLOAD"
	CodeEmptyDestination = "EMPTY_DESTINATION"
)

// BrokerCodes are the codes of the Transient and Unknown classes: failures of the
// brokers or of the way to them, not of one message. A batch that fails with only
// these and stores nothing pauses the worker instead of counting attempts; the RETRY
// rows a worker marked with one of them as an outage began are made claimable again
// when it resumes (relay/parked.go).
var BrokerCodes = []string{CodeBrokerUnavailable, CodeLeaderChange, CodeNotEnoughReplicas, CodeBrokerRetriable,
	CodeKafkaError, CodeSendFailed, CodeSendTimeoutUnknown, CodeConnLostUnknown, CodeAuthenticationFailed, CodeTLSFailed}

// Classify maps a publish error to a class and a stable code. It is a pure function.
// Anything it does not recognise is Transient: retried with backoff and bounded by
// --max-attempts, so an unexpected error can never make events DEAD on first sight.
func Classify(err error) (Class, string) {
	if err == nil {
		return 0, ""
	}
	var tooLarge kafka.MessageTooLargeError
	if errors.As(err, &tooLarge) {
		return Permanent, CodeMessageTooLarge
	}
	var kerr kafka.Error
	if errors.As(err, &kerr) {
		switch kerr {
		case kafka.MessageSizeTooLarge, kafka.RecordListTooLarge:
			return Permanent, CodeMessageTooLarge
		case kafka.InvalidRecord:
			return Permanent, CodeInvalidRecord
		case kafka.InvalidTopic:
			return Permanent, CodeInvalidTopic
		case kafka.TopicAuthorizationFailed, kafka.ClusterAuthorizationFailed:
			// An ACL denies this principal the topic: per destination, so per event.
			return Permanent, CodeAuthorizationFailed
		case kafka.SASLAuthenticationFailed, kafka.UnsupportedSASLMechanism, kafka.IllegalSASLState:
			return Transient, CodeAuthenticationFailed
		case kafka.UnknownTopicOrPartition:
			return TopicMissing, CodeTopicNotFound
		case kafka.RequestTimedOut:
			// The broker timed out waiting for replicas: the write may be stored.
			return Unknown, CodeSendTimeoutUnknown
		case kafka.NotLeaderForPartition, kafka.LeaderNotAvailable, kafka.FencedLeaderEpoch, kafka.UnknownLeaderEpoch, kafka.PreferredLeaderNotAvailable:
			return Transient, CodeLeaderChange
		case kafka.NotEnoughReplicas, kafka.NotEnoughReplicasAfterAppend:
			return Transient, CodeNotEnoughReplicas
		}
		if kerr.Temporary() {
			return Transient, CodeBrokerRetriable
		}
		return Transient, CodeKafkaError
	}
	// A context deadline or cancellation from WriteMessages can arrive after the broker
	// stored the messages: unknown outcome, never DEAD.
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return Unknown, CodeSendTimeoutUnknown
	}
	if isTLS(err) {
		return Transient, CodeTLSFailed
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Op == "dial" {
		return Transient, CodeBrokerUnavailable
	}
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH) {
		return Transient, CodeBrokerUnavailable
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return Transient, CodeBrokerUnavailable
	}
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		return Unknown, CodeSendTimeoutUnknown
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed) {
		return Unknown, CodeConnLostUnknown
	}
	return Transient, CodeSendFailed
}

// isTLS reports a failed TLS handshake: the certificate did not verify or the peer
// does not speak TLS.
func isTLS(err error) bool {
	var verify *tls.CertificateVerificationError
	var unknownCA x509.UnknownAuthorityError
	var host x509.HostnameError
	var invalid x509.CertificateInvalidError
	var header tls.RecordHeaderError
	var alert tls.AlertError
	return errors.As(err, &verify) || errors.As(err, &unknownCA) || errors.As(err, &host) ||
		errors.As(err, &invalid) || errors.As(err, &header) || errors.As(err, &alert)
}
