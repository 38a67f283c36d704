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
