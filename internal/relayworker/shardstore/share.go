// share.go: which shards a worker takes and gives up. A pure decision over what
// LeaseState read; Rebalance applies it. The rule is Kafka's consumer group's: every
// live worker holds at most its fair share, so a joining worker gets shards within a
// lease and a leaving one's shards are taken over once its leases expire.

package shardstore

import "sort"

// ShardLease is one shard row as LeaseState read it.
type ShardLease struct {
	Shard int16
	// Owner is the token that holds the shard ("" when none).
	Owner string
	// Expired: lease_until is past (or unset) on the database clock.
	Expired bool
	// AtBoundary: no window is being read in parts (pos IS NULL), so handing the
	// shard over does not split a window between two owners.
	AtBoundary bool
}

// FairShare is ceil(shards / live): with every worker at most at its share, the
// shares cover every shard. live counts this worker (at least 1).
func FairShare(shards, live int) int {
	if live < 1 {
		live = 1
	}
	return (shards + live - 1) / live
}

// LeasePlan is what a worker does in one Rebalance.
type LeasePlan struct {
	// Take is how many free or expired shards to take (under one fresh token).
	Take int
	// Release are held shards to give up: over the share, and at a window boundary.
	Release []int16
	// Soon: after this round the worker is still under its share while the other
	// workers hold more than theirs (so one of them will release shards at its next
	// round): look again soon, not a lease/3 later. Without it released shards waited
	// up to lease/3 with no owner when a worker joined (the latency runs' 10 s tail).
	Soon bool
}

// PlanLeases decides a worker's take and release from the shard rows, which tokens
// are its own, and how many workers are live. Its own shards count whether or not
// their lease ran out (a renewal keeps them unless someone took them). Over its share
// it releases the highest-numbered shards that are at a window boundary (possibly
// fewer than the excess: the rest go at a later boundary); under it, it takes up to
// the missing number of shards that are free or expired, and says to look again soon
// when the others hold more than their shares (some of them will release).
func PlanLeases(shards []ShardLease, mine func(token string) bool, live int) LeasePlan {
	share := FairShare(len(shards), live)
	var held []ShardLease
	free := 0
	for _, s := range shards {
		switch {
		case s.Owner != "" && mine(s.Owner):
			held = append(held, s)
		case s.Owner == "" || s.Expired:
			free++
		}
	}
	var p LeasePlan
	if over := len(held) - share; over > 0 {
		sort.Slice(held, func(i, j int) bool { return held[i].Shard > held[j].Shard })
		for _, s := range held {
			if len(p.Release) == over {
				break
			}
			if s.AtBoundary {
				p.Release = append(p.Release, s.Shard)
			}
		}
		return p
	}
	p.Take = min(share-len(held), free)
	others := len(shards) - len(held) - free
	p.Soon = len(held)+p.Take < share && others > (max(live, 1)-1)*share
	return p
}
