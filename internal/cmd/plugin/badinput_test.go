package plugin

import (
	"strings"
	"testing"
)

// The DSNs of the unreachable databases carry a password, so every test also proves
// that neither the DSN nor the password is printed.
const (
	secretPassword = "hunter2secret"
	refusedDSN     = "postgres://relay:" + secretPassword + "@127.0.0.1:1/app?sslmode=disable&connect_timeout=2"
	badPortDSN     = "postgres://relay:" + secretPassword + "@127.0.0.1:notaport/app"
)

func TestTraceBadInput(t *testing.T) {
	ns := newNamespace(t)
	o := newOutboxDB(t, "outbox_event")
	createSecret(t, ns, "db", map[string]string{"dsn": o.dsn})
	createSecret(t, ns, "wrong-key", map[string]string{"url": o.dsn, "user": "relay"})
	createSecret(t, ns, "refused", map[string]string{"dsn": refusedDSN})
	createSecret(t, ns, "bad-port", map[string]string{"dsn": badPortDSN})
	pipeline(t, ns, "no-secret", "absent", "")
	pipeline(t, ns, "no-key", "wrong-key", "")
	pipeline(t, ns, "no-table", "db", "nothere")
	pipeline(t, ns, "no-db", "refused", "")
	pipeline(t, ns, "bad-dsn", "bad-port", "")
	pipeline(t, ns, "orders", "db", "")
	o.insert(t, "ev-1", "o-1", 1, "")

	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unknown pipeline", []string{"trace", "ev-1", "-p", "nope"}, 1,
			`pipeline "nope" not found in namespace "` + ns + `"`},
		{"Secret missing", []string{"trace", "ev-1", "-p", "no-secret"}, 1,
			`pipeline "no-secret": Secret "absent" not found in namespace "` + ns + `"`},
		{"key missing", []string{"trace", "ev-1", "-p", "no-key"}, 1,
			`pipeline "no-key": Secret "wrong-key" has no key "dsn" (its keys: url, user)`},
		{"table missing", []string{"trace", "ev-1", "-p", "no-table"}, 1,
			`pipeline "no-table": table public.nothere does not exist in the database of Secret "db" key "dsn" (run ` + "`relayworker migrate`" + ` or set spec.source.migrate: true)`},
		{"database unreachable", []string{"trace", "ev-1", "-p", "no-db"}, 1,
			`pipeline "no-db": cannot reach the database with the DSN from Secret "refused" key "dsn": dial tcp 127.0.0.1:1: connect: connection refused`},
		{"DSN unusable", []string{"trace", "ev-1", "-p", "bad-dsn"}, 1,
			`pipeline "bad-dsn": cannot reach the database with the DSN from Secret "bad-port" key "dsn"`},
		{"consumer database unreachable", []string{"trace", "ev-1", "-p", "orders", "--consumer-db", "refused/dsn"}, 1,
			`--consumer-db refused/dsn: cannot reach the database with the DSN from Secret "refused" key "dsn"`},
		{"consumer Secret missing", []string{"trace", "ev-1", "-p", "orders", "--consumer-db", "gone/dsn"}, 1,
			`--consumer-db gone/dsn: Secret "gone" not found in namespace "` + ns + `"`},
		{"no event id", []string{"trace"}, 2, "trace needs one EVENT_ID (or --aggregate TYPE/ID)"},
		{"both modes", []string{"trace", "ev-1", "--aggregate", "order/o-1"}, 2, "give either EVENT_ID or --aggregate TYPE/ID, not both"},
		{"bad aggregate", []string{"trace", "--aggregate", "order"}, 2, `--aggregate "order": want TYPE/ID, e.g. order/o-42`},
		{"bad consumer-db", []string{"trace", "ev-1", "--consumer-db", "just-a-name"}, 2, `--consumer-db "just-a-name": want SECRET/KEY`},
		{"bad consumer schema", []string{"trace", "ev-1", "--consumer-schema", `x"; DROP TABLE y`}, 2, "--consumer-schema: consumer schema name"},
		{"all namespaces", []string{"trace", "ev-1", "-A"}, 2, "trace looks in one namespace; use -n NAMESPACE instead of -A"},
		{"unknown flag", []string{"trace", "ev-1", "--frobnicate"}, 2, "unknown flag: --frobnicate (see kubectl outbox trace --help)"},
		{"unknown command", []string{"tarce", "ev-1"}, 2, `unknown command "tarce"; the commands are status, trace, replay and version`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := plugin(t, append(tc.args, "-n", ns)...)
			r.mustFailWith(t, tc.code, tc.want)
			for _, s := range []string{secretPassword, "postgres://", o.dsn} {
				if strings.Contains(r.stdout+r.stderr, s) {
					t.Fatalf("output shows %q:\n%s%s", s, r.stdout, r.stderr)
				}
			}
		})
	}
}

// The plugin reads the DSN Secret with the user's own RBAC: a user who may read
// pipelines but not Secrets is told so, and nothing is borrowed from the operator.
func TestTraceUsesTheUsersOwnRBAC(t *testing.T) {
	ns, o := pipelineWithDB(t)
	o.insert(t, "ev-1", "o-1", 1, "")
	pluginAs(t, viewerConfig, "trace", "ev-1", "-n", ns, "-p", "orders").mustFailWith(t, 1,
		`pipeline "orders": you may not read Secret "db" in namespace "`+ns+`" (kubectl outbox reads it with your own credentials; it needs "get" on that Secret)`)
	pluginAs(t, viewerConfig, "status", "-n", ns).mustSucceed(t)
}
