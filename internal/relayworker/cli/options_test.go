package cli

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/outbox-operator/outbox-operator/internal/relayworker/config"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/publish"
)

func noEnv(string) (string, bool) { return "", false }

// Every flag reaches its work package: with every flag set, no field of the mapped
// Options is left zero, except the ones no flag sets (named per call).
func TestOptionsCarryEveryFlag(t *testing.T) {
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	rel := must(config.ParseRelay([]string{"--dsn=d", "--brokers=k:1", "--worker-id=w", "--kafka-tls", "--kafka-tls-ca-file=" + ca,
		"--kafka-sasl-mechanism=plain", "--kafka-sasl-username=u", "--kafka-sasl-password=pw",
		"--message-format=cloudevents", "--cloudevents-source=/x"}, noEnv))(t)
	// Feed is the logical-replication reader itself, not a flag (cdcOptions below).
	allSet(t, "relay", relayOptions(rel, "jsonb"), "StatsInterval", "LeaseMargin", "Rand", "Feed")
	allSet(t, "publish", publishOptions(rel), "BatchTimeout", "WriteTimeout", "MaxMessageBytes")
	allSet(t, "store", storeOptions(&rel.Common), "HandoverAfter")
	cdcRel := must(config.ParseRelay([]string{"--dsn=d", "--brokers=k:1", "--source-mode=logical-replication",
		"--slot=s", "--publication=p", "--cdc-create-slot"}, noEnv))(t)
	allSet(t, "relay store (logical replication)", relayStoreOptions(cdcRel))
	allSet(t, "cdc", cdcOptions(cdcRel), "MaxQueued", "Log")
	mig := must(config.ParseMigrate([]string{"--dsn=d", "--notify-trigger"}, noEnv))(t)
	allSet(t, "migrate", migrateOptions(mig))
	rep := must(config.ParseReplay([]string{"--dsn=d", "--replay-id=r", "--reason=fixed", "--dry-run",
		"--event-ids=a", "--event-type=T", "--aggregate-type=A", "--aggregate-id=1", "--error-code=X", "--destination=t",
		"--created-after=2026-01-01T00:00:00Z", "--created-before=2026-02-01T00:00:00Z"}, noEnv))(t)
	allSet(t, "replay", replayOptions(rep), "PollEvery")
	arc := must(config.ParseArchive([]string{"--dsn=d", "--consumer-log-retention=2h", "--policy=ns/p"}, noEnv))(t)
	allSet(t, "archive", archiveOptions(arc))
}

// The message format reaches the relay: native by default, CloudEvents with the given
// or derived ce_source and the payload column's content-type.
func TestMessageFormatOptions(t *testing.T) {
	cases := []struct {
		args    []string
		payload string
		want    publish.Format
	}{
		{nil, "jsonb", publish.Format{}},
		{[]string{"--message-format=cloudevents"}, "jsonb",
			publish.Format{CloudEvents: true, Source: "/outbox-operator/public/outbox_event", ContentType: "application/json"}},
		{[]string{"--message-format=cloudevents", "--cloudevents-source=/outbox-operator/shop/orders"}, "bytea",
			publish.Format{CloudEvents: true, Source: "/outbox-operator/shop/orders"}},
		{[]string{"--message-format=cloudevents", "--schema=shop", "--table=orders_outbox"}, "text",
			publish.Format{CloudEvents: true, Source: "/outbox-operator/shop/orders_outbox", ContentType: "text/plain; charset=utf-8"}},
	}
	for _, c := range cases {
		rel := must(config.ParseRelay(append([]string{"--dsn=d", "--brokers=k:1"}, c.args...), noEnv))(t)
		if got := relayOptions(rel, c.payload).Format; got != c.want {
			t.Errorf("%v %s: %+v, want %+v", c.args, c.payload, got, c.want)
		}
	}
	if _, err := config.ParseRelay([]string{"--dsn=d", "--brokers=k:1", "--message-format=CloudEvent"}, noEnv); err == nil {
		t.Error("--message-format=CloudEvent accepted")
	}
}

func must[T any](v T, err error) func(*testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// allSet fails for every zero field of the struct v (nested structs too) not in unset.
func allSet(t *testing.T, what string, v any, unset ...string) {
	t.Helper()
	skip := map[string]bool{}
	for _, u := range unset {
		skip[u] = true
	}
	var walk func(path string, rv reflect.Value)
	walk = func(path string, rv reflect.Value) {
		for i := 0; i < rv.NumField(); i++ {
			f, fv := rv.Type().Field(i), rv.Field(i)
			switch {
			case skip[f.Name]:
			case f.Type.Kind() == reflect.Struct:
				walk(path+f.Name+".", fv)
			case fv.IsZero():
				t.Errorf("%s: %s%s is not set by any flag", what, path, f.Name)
			}
		}
	}
	walk("", reflect.ValueOf(v))
}

// TestInboxReplayNamesTheRequester: inbox records who asked for every replay, so a
// DeadLetterReplay that names nobody is recorded as itself.
func TestInboxReplayNamesTheRequester(t *testing.T) {
	_, o := inboxReplayOptions(&config.InboxReplay{ReplayID: "shop/fix/u-1"})
	if o.RequestedBy != "DeadLetterReplay shop/fix/u-1" || o.Key != "shop/fix/u-1" {
		t.Fatalf("RequestedBy %q Key %q", o.RequestedBy, o.Key)
	}
	if _, o := inboxReplayOptions(&config.InboxReplay{ReplayID: "shop/fix/u-1", RequestedBy: "oncall"}); o.RequestedBy != "oncall" {
		t.Fatalf("RequestedBy %q, want oncall", o.RequestedBy)
	}
}
