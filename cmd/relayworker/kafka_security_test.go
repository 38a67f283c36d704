package main_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/outbox-operator/outbox-operator/internal/testenv/kafkatest"
	"github.com/outbox-operator/outbox-operator/internal/testenv/relaytest"
)

// relayEnv is the environment the operator gives a relay pod, secrets included.
func relayEnv(t *testing.T, dsn string, b *kafkatest.Broker, extra ...string) []string {
	return append([]string{"OUTBOX_DSN=" + dsn, "KAFKA_BROKERS=" + b.AddrList(), "RELAY_WORKER_ID=" + t.Name()}, extra...)
}

// relayArgs: no endpoints, quick polls and short, bounded retries.
var relayArgs = []string{"relay", "--metrics-addr=", "--health-addr=", "--poll-interval=100ms",
	"--min-backoff=200ms", "--max-backoff=400ms", "--max-attempts=1000", "--log-level=debug"}

// relayAll inserts n events for topic, runs a relay with env until all are SENT and
// checks the broker stored them.
func relayAll(t *testing.T, b *kafkatest.Broker, topic string, env func(dsn string) []string, args ...string) *child {
	t.Helper()
	dsn, db := migrated(t)
	const n = 20
	relaytest.Insert(t, db, relaytest.Many(topic, topic, n)...)
	p := spawn(t, env(dsn), append(append([]string{}, relayArgs...), args...)...)
	relaytest.Eventually(t, 20*time.Second, "all SENT", func() bool { return relaytest.CountStatus(t, db)["SENT"] == n })
	if got := b.Count(topic); got != n {
		t.Fatalf("broker holds %d records of %s, want %d", got, topic, n)
	}
	p.Stop(t)
	return p
}

// failsPaused runs a relay that cannot reach the broker's data path and checks that it
// pauses claiming with code instead of burning the event's attempts (never DEAD, never
// sent, retry_count unchanged), reports it in the worker-status table, and probes with
// a backoff, not in a hot loop (the caller counts connections).
func failsPaused(t *testing.T, b *kafkatest.Broker, topic string, code string, env func(dsn string) []string, args ...string) *child {
	t.Helper()
	dsn, db := migrated(t)
	id := topic + "-1"
	relaytest.Insert(t, db, relaytest.Ev{ID: id, AggID: id, Version: 1, Topic: topic})
	p := spawn(t, env(dsn), append(append([]string{}, relayArgs...), args...)...)
	relaytest.Eventually(t, 30*time.Second, "worker reports the broker down with "+code, func() bool {
		var n int
		_ = db.QueryRow(`SELECT count(*) FROM public.outbox_event_workers
			WHERE NOT broker_up AND broker_error_code = $1`, code).Scan(&n)
		return n == 1
	})
	time.Sleep(3 * time.Second) // several probe rounds
	p.Stop(t)
	if s := stateOf(t, db, id); s.status != "PENDING" || s.retries != 0 {
		t.Fatalf("after the paused outage: %+v; want PENDING with retry_count 0", s)
	}
	if got := b.Count(topic); got != 0 {
		t.Fatalf("broker holds %d records of %s; want none", got, topic)
	}
	return p
}

// saslCounter counts SASL handshakes (one per connection attempt) and, for PLAIN,
// answers a wrong password the way Apache Kafka does (SaslAuthenticate error 58,
// SASL_AUTHENTICATION_FAILED) where kfake would just close the connection.
type saslCounter struct {
	b          *kafkatest.Broker
	handshakes atomic.Int64
	user, pass string
}

func (s *saslCounter) install(plain bool) {
	s.b.Cluster.ControlKey(int16(kmsg.SASLHandshake), func(kmsg.Request) (kmsg.Response, error, bool) {
		s.b.Cluster.KeepControl()
		s.handshakes.Add(1)
		return nil, nil, false
	})
	if !plain {
		return
	}
	s.b.Cluster.ControlKey(int16(kmsg.SASLAuthenticate), func(req kmsg.Request) (kmsg.Response, error, bool) {
		s.b.Cluster.KeepControl()
		ar := req.(*kmsg.SASLAuthenticateRequest)
		parts := bytes.Split(ar.SASLAuthBytes, []byte{0}) // authzid \0 user \0 password
		if len(parts) != 3 || (string(parts[1]) == s.user && string(parts[2]) == s.pass) {
			return nil, nil, false
		}
		resp := ar.ResponseKind().(*kmsg.SASLAuthenticateResponse)
		resp.ErrorCode = 58
		msg := "Authentication failed: Invalid username or password"
		resp.ErrorMessage = &msg
		return resp, nil, true
	})
}

func TestSASL(t *testing.T) {
	for _, c := range []struct {
		kfake, flag string
		// wrongCode: PLAIN is answered as Apache Kafka does; kfake closes SCRAM
		// connections mid-exchange, which kafka-go reports as an unexpected EOF.
		wrongCode string
	}{
		{"PLAIN", "plain", "AUTHENTICATION_FAILED"},
		{"SCRAM-SHA-256", "scram-sha-256", "CONNECTION_LOST_UNKNOWN"},
		{"SCRAM-SHA-512", "scram-sha-512", "CONNECTION_LOST_UNKNOWN"},
	} {
		t.Run(c.kfake, func(t *testing.T) {
			const user, pass, wrong = "relay", "s3cret-Pa55word", "wr0ng-Pa55word"
			b, err := kafkatest.Start(3, kfake.EnableSASL(), kfake.Superuser(c.kfake, user, pass))
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			sc := &saslCounter{b: b, user: user, pass: pass}
			sc.install(c.flag == "plain")
			for _, tp := range []string{"sasl-ok", "sasl-wrong"} {
				if err := b.CreateTopic(tp, 3); err != nil {
					t.Fatal(err)
				}
			}
			// Secrets come from the environment, as the operator passes them.
			env := func(pw string) func(string) []string {
				return func(dsn string) []string {
					return relayEnv(t, dsn, b, "KAFKA_SASL_MECHANISM="+c.flag, "KAFKA_SASL_USERNAME="+user, "KAFKA_SASL_PASSWORD="+pw)
				}
			}
			ok := relayAll(t, b, "sasl-ok", env(pass))
			if strings.Contains(ok.Stderr(), pass) {
				t.Fatal("SASL password in the relay's log")
			}

			before := sc.handshakes.Load()
			p := failsPaused(t, b, "sasl-wrong", c.wrongCode, env(wrong))
			// kafka-go tries a connection a few times per write (metadata, produce,
			// MaxAttempts 3); the paused worker's probes are spaced by its backoff
			// (200 ms doubling), so a few seconds of pause cost a few dozen handshakes.
			hs := sc.handshakes.Load() - before
			t.Logf("%d SASL handshakes while paused", hs)
			if hs > 40 {
				t.Fatalf("%d SASL handshakes in a few seconds of pause: hot loop", hs)
			}
			logs := p.Stderr()
			for _, secret := range []string{pass, wrong} {
				if strings.Contains(logs, secret) {
					t.Fatalf("SASL password in the log:\n%s", logs)
				}
			}
			if !strings.Contains(logs, c.wrongCode) {
				t.Fatalf("the failure is not logged with its code %s:\n%s", c.wrongCode, logs)
			}
		})
	}
}

// tlsPKI writes a fresh CA certificate to a file and returns it with a server
// certificate for 127.0.0.1 signed by that CA.
func tlsPKI(t *testing.T) (caFile string, server tls.Certificate) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "outbox test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	srvTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kafka"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames: []string{"localhost"}}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, ca, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caFile = filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return caFile, tls.Certificate{Certificate: [][]byte{srvDER}, PrivateKey: srvKey}
}

func TestTLS(t *testing.T) {
	caFile, server := tlsPKI(t)
	b, err := kafkatest.Start(3, kfake.TLS(&tls.Config{Certificates: []tls.Certificate{server}, MinVersion: tls.VersionTLS12}))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, tp := range []string{"tls-ok", "tls-no-ca"} {
		if err := b.CreateTopic(tp, 3); err != nil {
			t.Fatal(err)
		}
	}
	env := func(dsn string) []string { return relayEnv(t, dsn, b) }

	t.Run("with the CA file", func(t *testing.T) {
		relayAll(t, b, "tls-ok", env, "--kafka-tls", "--kafka-tls-ca-file="+caFile)
	})
	t.Run("without the CA file", func(t *testing.T) {
		// The system roots do not know the test CA: every attempt fails the handshake,
		// the worker pauses and says why; nothing is dropped or counted.
		p := failsPaused(t, b, "tls-no-ca", "TLS_HANDSHAKE_FAILED", env, "--kafka-tls")
		const why = "certificate signed by unknown authority"
		if logs := p.Stderr(); !strings.Contains(logs, why) {
			t.Fatalf("the relay's log does not say %q:\n%s", why, logs)
		}
	})
}
