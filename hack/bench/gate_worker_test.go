package main

import (
	"reflect"
	"testing"
)

func TestSegments(t *testing.T) {
	r := func(shard int16, seq int64) gateRow { return gateRow{shard: shard, hiTick: 7, seq: seq} }
	for _, tc := range []struct {
		name  string
		rows  []gateRow
		batch int
		want  []segment
	}{
		{"short batch: every window read to its end", []gateRow{r(3, 10), r(3, 11), r(5, 2)}, 4,
			[]segment{{3, 7, 11, true, 2}, {5, 7, 2, true, 1}}},
		{"full batch: the last shard is read in part", []gateRow{r(3, 10), r(5, 2), r(5, 4)}, 3,
			[]segment{{3, 7, 10, true, 1}, {5, 7, 4, false, 2}}},
		{"full batch ending in a sentinel: the last window is exhausted", []gateRow{r(3, 10), r(5, 2), r(5, 0)}, 3,
			[]segment{{3, 7, 10, true, 1}, {5, 7, 2, true, 1}}},
		{"only a sentinel: a window read in parts before closes", []gateRow{r(9, 0)}, 1,
			[]segment{{9, 7, 0, true, 0}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := segments(tc.rows, tc.batch); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("segments = %+v, want %+v", got, tc.want)
			}
		})
	}
}
