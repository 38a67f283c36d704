// peer_v1relay.go: the straightforward v1 relay (hack/bench/peers/v1relay): one FOR
// UPDATE SKIP LOCKED claim statement, a kafka-go Writer with BatchSize = the claim
// batch, an owner-fenced mark, on this product's table (relayworker migrate), so it
// loads, inserts and settles as the relay peer does.

package main

import (
	"fmt"
	"strconv"
)

type v1Peer struct {
	*relayPeer // the table: migrate, load, producers' INSERT, settled
	bin        string
}

func (s *stack) v1() *v1Peer {
	return &v1Peer{relayPeer: s.relay("straightforward v1 relay", nil, false), bin: s.v1Bin}
}

func (p *v1Peer) start(_, relayDSN, brokers string, n int) ([]*proc, error) {
	var ps []*proc
	for i := 0; i < n; i++ {
		pr, err := spawn(fmt.Sprintf("v1relay %d", i), p.bin, nil, "--dsn", relayDSN, "--brokers", brokers,
			"--batch-size", "500", "--lease", "30s", "--poll-interval", "200ms", "--worker-id", "bench-v1-"+strconv.Itoa(i))
		if err != nil {
			return ps, err
		}
		ps = append(ps, pr)
	}
	return ps, nil
}
