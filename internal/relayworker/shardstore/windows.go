// windows.go: from the rows of a read to where each shard's cursor goes. Pure.

package shardstore

import "fmt"

// windows groups the rows of a read by shard (a sentinel has Seq 0) and says which
// windows are exhausted: every shard but the last of the batch was read to its end
// (the read moves to the next shard only then), so was the last one when the batch is
// not full (rows, sentinels included, fewer than limit), and a sentinel says so for a
// window read in parts. It refuses rows out of the order the advance relies on: a
// shard's rows together, seq ascending, its sentinel last.
func windows(rows []Event, limit int) ([]Window, error) {
	var ws []Window
	seen := map[int16]bool{}
	for _, r := range rows {
		if len(ws) == 0 || ws[len(ws)-1].Shard != r.Shard {
			if seen[r.Shard] {
				return nil, fmt.Errorf("the rows of shard %d are not together", r.Shard)
			}
			seen[r.Shard] = true
			ws = append(ws, Window{Shard: r.Shard, Token: r.Token, LoTick: r.LoTick, HiTick: r.HiTick, HiStamp: r.HiStamp})
		}
		w := &ws[len(ws)-1]
		switch {
		case w.Done:
			return nil, fmt.Errorf("shard %d has rows after its sentinel", r.Shard)
		case r.Seq == 0:
			w.Done = true
		case r.Seq <= w.Last:
			return nil, fmt.Errorf("shard %d: seq %d after %d", r.Shard, r.Seq, w.Last)
		case r.LoTick != w.LoTick || r.HiTick != w.HiTick || r.HiStamp != w.HiStamp || r.Token != w.Token:
			return nil, fmt.Errorf("shard %d: rows of two windows", r.Shard)
		default:
			w.Last = r.Seq
			w.Events++
		}
	}
	for i := range ws {
		if i < len(ws)-1 || len(rows) < limit {
			ws[i].Done = true
		}
	}
	return ws, nil
}
