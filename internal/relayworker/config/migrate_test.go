package config

import (
	"strings"
	"testing"
)

// migrate's contract flags: good combinations parse, bad ones are refused with a
// line naming the flag.
func TestMigrateContractFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		err  string // "" = accepted
	}{
		{[]string{}, ""},
		{[]string{"--contract", "v2"}, ""},
		{[]string{"--contract", "v2", "--shards", "64"}, ""},
		{[]string{"--contract", "v3"}, "--contract"},
		{[]string{"--shards", "64"}, ""},
		{[]string{"--contract", "v1"}, ""},
		{[]string{"--contract", "v1", "--shards", "64"}, "applies to --contract v2 only"},
		{[]string{"--shards", "3"}, "--shards"},
		{[]string{"--contract", "v2", "--shards", "3"}, "--shards"},
		{[]string{"--contract", "v2", "--shards", "65536"}, "--shards"},
		{[]string{"--contract", "v2", "--shards", "-4"}, "--shards"},
		{[]string{"--contract", "v2", "--upgrade-lock-timeout", "30s", "--upgrade-chunk-rows", "100"}, ""},
		{[]string{"--upgrade-chunk-rows", "1"}, ""}, // resuming a copy under the default --contract
		{[]string{"--contract", "v2", "--upgrade-lock-timeout", "0s"}, "--upgrade-lock-timeout (OUTBOX_UPGRADE_LOCK_TIMEOUT): upgrade lock timeout 0s: must be whole milliseconds from 1ms to 10m0s"},
		{[]string{"--contract", "v2", "--upgrade-lock-timeout", "1500us"}, "--upgrade-lock-timeout"},
		{[]string{"--contract", "v2", "--upgrade-lock-timeout", "11m"}, "--upgrade-lock-timeout"},
		{[]string{"--contract", "v2", "--upgrade-lock-timeout", "-1s"}, "--upgrade-lock-timeout"},
		{[]string{"--contract", "v2", "--upgrade-chunk-rows", "0"}, "--upgrade-chunk-rows (OUTBOX_UPGRADE_CHUNK_ROWS): upgrade chunk of 0 rows: must be from 1 to 1000000"},
		{[]string{"--contract", "v2", "--upgrade-chunk-rows", "1000001"}, "--upgrade-chunk-rows"},
	} {
		_, err := ParseMigrate(append([]string{"--dsn", "x"}, tc.args...), noEnv)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("ParseMigrate(%v): %v", tc.args, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("ParseMigrate(%v) = %v, want an error naming %q", tc.args, err, tc.err)
		}
	}
}
