// peer_relayv2.go: this product on a table of contract v2 (docs/contract-v2.md):
// `relayworker migrate --contract v2` once, then the same `relayworker relay`
// processes with the same flags; the relay picks its v2 loop from the table. The
// producers' columns, COPY and INSERT are the relay peer's.

package main

import "database/sql"

type relayV2Peer struct {
	*relayPeer // load, producers' INSERT, start: the same binary and flags
}

func (s *stack) relayV2(label string, flags []string, notify bool) *relayV2Peer {
	return &relayV2Peer{relayPeer: s.relay(label, flags, notify)}
}

func (p *relayV2Peer) setup(dsn string) error {
	args := []string{"migrate", "--dsn", dsn, "--contract", "v2"}
	if p.notify {
		args = append(args, "--notify-trigger")
	}
	_, err := run(p.bin, args...)
	return err
}

// settled: no hold row waits (the outbox rows themselves carry no state).
func (p *relayV2Peer) settled(db *sql.DB) (bool, error) {
	var busy bool
	err := db.QueryRow(`SELECT EXISTS (SELECT 1 FROM public.outbox_event_hold WHERE state IN ('RETRY', 'HELD'))`).Scan(&busy)
	return !busy, err
}

// relayOf is the relay behind p, on either contract: its workers' metrics (stages)
// and profiles (-profile) are read the same way.
func relayOf(p peer) (*relayPeer, bool) {
	switch rp := p.(type) {
	case *relayPeer:
		return rp, true
	case *relayV2Peer:
		return rp.relayPeer, true
	}
	return nil, false
}
