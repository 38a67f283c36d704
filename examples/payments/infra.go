package payments

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	_ "github.com/lib/pq" // driver "postgres"
	"github.com/segmentio/kafka-go"

	"github.com/outbox-operator/outbox-operator/internal/redact"
)

// OpenDB opens and pings the database. Its errors never contain the DSN: a DSN that
// does not parse is quoted whole by the driver, password included.
func OpenDB(ctx context.Context, dsn string) (*sql.DB, error) {
	db, err := sql.Open("postgres", dsn)
	if err != nil {
		return nil, fmt.Errorf("payments: database DSN is not valid: %s", redact.DSN(err.Error(), dsn))
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := db.PingContext(pctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("payments: database unreachable: %s", redact.DSN(err.Error(), dsn))
	}
	return db, nil
}

// EnsureTopic creates topic if it does not exist: the relay never creates topics,
// and parks the events of a missing one as DEAD after its grace period. It is for
// development brokers (replication factor 1); in production the topic is created by
// whoever owns the cluster.
func EnsureTopic(ctx context.Context, brokers []string, topic string, partitions int) error {
	if len(brokers) == 0 {
		return errors.New("payments: no brokers")
	}
	var d kafka.Dialer
	conn, err := d.DialContext(ctx, "tcp", brokers[0])
	if err != nil {
		return fmt.Errorf("payments: dial broker %s: %w", brokers[0], err)
	}
	defer conn.Close()
	ctrl, err := conn.Controller()
	if err != nil {
		return fmt.Errorf("payments: find the controller: %w", err)
	}
	cc, err := d.DialContext(ctx, "tcp", net.JoinHostPort(ctrl.Host, strconv.Itoa(ctrl.Port)))
	if err != nil {
		return fmt.Errorf("payments: dial controller: %w", err)
	}
	defer cc.Close()
	// CreateTopics is idempotent: an existing topic is no error.
	if err := cc.CreateTopics(kafka.TopicConfig{Topic: topic, NumPartitions: partitions, ReplicationFactor: 1}); err != nil {
		return fmt.Errorf("payments: create topic %s: %w", topic, err)
	}
	return nil
}
