package schema

import (
	"slices"
	"testing"
)

func TestPlannerSettingsRenderForSessionAndTransaction(t *testing.T) {
	ss := []Setting{{"enable_seqscan", "off"}, {"random_page_cost", "1.1"}}
	if got, want := SetStatements(ss), []string{`SET enable_seqscan = off`, `SET random_page_cost = 1.1`}; !slices.Equal(got, want) {
		t.Errorf("SetStatements = %q, want %q", got, want)
	}
	if got, want := SetLocal(ss), `SELECT set_config('enable_seqscan', 'off', true), set_config('random_page_cost', '1.1', true)`; got != want {
		t.Errorf("SetLocal = %q, want %q", got, want)
	}
}
