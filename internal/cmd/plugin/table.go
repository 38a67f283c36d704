package plugin

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
)

// none is what an empty cell shows, so columns never collapse.
const none = "-"

// table writes aligned columns like kubectl get does.
type table struct{ w *tabwriter.Writer }

func newTable(out io.Writer, header ...string) *table {
	t := &table{w: tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)}
	t.row(header...)
	return t
}

func (t *table) row(cells ...string) {
	for i, c := range cells {
		if c == "" {
			cells[i] = none
		}
	}
	fmt.Fprintln(t.w, strings.Join(cells, "\t"))
}

func (t *table) flush() error { return t.w.Flush() }

// age is kubectl's short duration since t ("5m", "3d"), or none.
func age(t *metav1.Time, now time.Time) string {
	if t == nil || t.IsZero() {
		return none
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

// until is the short duration from now to t ("in 5m"), or none.
func until(t *metav1.Time, now time.Time) string {
	if t == nil || t.IsZero() {
		return none
	}
	d := t.Sub(now)
	if d < 0 {
		return duration.HumanDuration(-d) + " ago"
	}
	return "in " + duration.HumanDuration(d)
}

// timestamp is an RFC 3339 UTC time, or none.
func timestamp(t time.Time) string {
	if t.IsZero() {
		return none
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// readiness is "True", or "False (Reason)" so the reason is visible without -o wide.
func readiness(conds []metav1.Condition) string {
	c := meta.FindStatusCondition(conds, "Ready")
	switch {
	case c == nil:
		return "Unknown"
	case c.Status == metav1.ConditionTrue:
		return "True"
	}
	return string(c.Status) + " (" + c.Reason + ")"
}

// stale marks a status the operator has not caught up with yet: its counts describe
// an older spec.
func stale(generation, observed int64) string {
	if observed < generation {
		return " (stale)"
	}
	return ""
}

func itoa(n int64) string { return fmt.Sprintf("%d", n) }
