// transport.go: the broker connection layer, with the worker's TLS and SASL settings
// (docs/worker-contract.md, relay flags --kafka-*).

package publish

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"
)

// newTransport is the connection layer with the TLS and SASL settings of o.
func newTransport(o Options) (*kafka.Transport, error) {
	tr := &kafka.Transport{DialTimeout: 5 * time.Second, IdleTimeout: 30 * time.Second, MetadataTTL: 10 * time.Second}
	if o.TLS || o.TLSCAFile != "" {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if o.TLSCAFile != "" {
			pem, err := os.ReadFile(o.TLSCAFile)
			if err != nil {
				return nil, fmt.Errorf("kafka TLS CA file: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("kafka TLS CA file %s holds no PEM certificate", o.TLSCAFile)
			}
			cfg.RootCAs = pool
		}
		tr.TLS = cfg
	}
	if o.SASLMechanism != "" {
		var mech sasl.Mechanism
		switch o.SASLMechanism {
		case "plain":
			mech = plain.Mechanism{Username: o.SASLUsername, Password: o.SASLPassword}
		case "scram-sha-256", "scram-sha-512":
			algo := scram.SHA256
			if o.SASLMechanism == "scram-sha-512" {
				algo = scram.SHA512
			}
			m, err := scram.Mechanism(algo, o.SASLUsername, o.SASLPassword)
			if err != nil {
				return nil, fmt.Errorf("kafka SASL: %w", err)
			}
			mech = m
		default:
			return nil, fmt.Errorf("kafka SASL mechanism %q not supported", o.SASLMechanism)
		}
		tr.SASL = mech
	}
	return tr, nil
}
