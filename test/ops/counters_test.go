package ops

import (
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
)

// Every increase() in an alert also counts series born inside its range
// (`x unless last_over_time(x[<lookback>] offset <range>)`): the relay's and the
// inbox's labelled counters appear with their first event, and increase() over a
// series whose first sample is already 1 is 0. "Born" is read over a range, not as
// `x offset <range>`, which a failed scrape's staleness marker or a gap of a few
// minutes would empty (the scenarios "one failed scrape of a relay pod" and
// "Prometheus down for 25 minutes"). TestAlertsFireOnTheirScenario shows it for the
// alerts of today; this keeps a new counter alert from forgetting it.
func TestCounterAlertsCountNewSeries(t *testing.T) {
	for _, r := range alerts(t) {
		e, err := promQL.ParseExpr(r.Expr.String())
		if err != nil {
			t.Fatalf("%s: %v", r.Alert, err)
		}
		increases := map[string]time.Duration{} // metric -> range
		newSeries := map[string]time.Duration{} // metric -> offset of `x unless x offset d`
		parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
			switch n := n.(type) {
			case *parser.Call:
				if n.Func.Name != "increase" && n.Func.Name != "rate" {
					return nil
				}
				if ms, ok := n.Args[0].(*parser.MatrixSelector); ok {
					increases[ms.VectorSelector.(*parser.VectorSelector).Name] = ms.Range
				}
			case *parser.BinaryExpr:
				l, lok := n.LHS.(*parser.VectorSelector)
				if n.Op != parser.LUNLESS || !lok || l.OriginalOffset != 0 {
					return nil
				}
				if c, ok := n.RHS.(*parser.Call); ok && c.Func.Name == "last_over_time" {
					if ms, ok := c.Args[0].(*parser.MatrixSelector); ok {
						if vs := ms.VectorSelector.(*parser.VectorSelector); vs.Name == l.Name && ms.Range >= time.Hour {
							newSeries[l.Name] = vs.OriginalOffset
						}
					}
				}
			}
			return nil
		})
		for name, rng := range increases {
			if off, ok := newSeries[name]; !ok || off != rng {
				d := model.Duration(rng)
				t.Errorf("%s: increase(%s[%v]) misses the first event of a new series; add `(%s unless last_over_time(%s[1h] offset %v)) or` before it",
					r.Alert, name, d, name, name, d)
			}
		}
	}
}
