// probe.go: is any broker answering? Used by a paused relay to decide when to resume.

package publish

import (
	"context"
	"errors"
	"fmt"

	"github.com/segmentio/kafka-go"
)

// Probe asks the brokers for the metadata of topics over fresh connections (the
// Writer's may hold a broken connection or stale metadata for a while), with the
// Writer's TLS and SASL settings. It succeeds when a broker answered and every
// partition of the topics that exist has a leader; a topic that does not exist is not
// the brokers' fault (the relay's missing-topic grace handles it).
func (p *Publisher) Probe(ctx context.Context, topics []string) error {
	tr, err := newTransport(p.opts)
	if err != nil {
		return err
	}
	defer tr.CloseIdleConnections()
	c := &kafka.Client{Addr: kafka.TCP(p.opts.Brokers...), Transport: tr}
	md, err := c.Metadata(ctx, &kafka.MetadataRequest{Topics: topics})
	if err != nil {
		return fmt.Errorf("broker probe: %w", err)
	}
	for _, t := range md.Topics {
		if t.Error != nil {
			if errors.Is(t.Error, kafka.UnknownTopicOrPartition) {
				continue
			}
			return fmt.Errorf("broker probe: topic %s: %w", t.Name, t.Error)
		}
		for _, pt := range t.Partitions {
			if pt.Error != nil {
				return fmt.Errorf("broker probe: %s/%d: %w", t.Name, pt.ID, pt.Error)
			}
			if pt.Leader.Host == "" {
				return fmt.Errorf("broker probe: %s/%d has no leader", t.Name, pt.ID)
			}
		}
	}
	return nil
}

// ResetConnections drops the Writer's pooled connections and cached metadata, so the
// first write after an outage dials afresh instead of failing on a dead connection.
func (p *Publisher) ResetConnections() {
	if tr, ok := p.w.Transport.(*kafka.Transport); ok {
		tr.CloseIdleConnections()
	}
}
