package plugin

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
)

// A replay of a consumer group's parked messages (spec.consumer) needs no pipeline.

func TestReplayConsumerPreviewCreatesNothing(t *testing.T) {
	ns := newNamespace(t)
	r := plugin(t, "replay", "-n", ns, "--consumer-group", "billing", "--consumer-db", "billing-db/dsn",
		"--error-code", "retries_exhausted", "--reason", "INC-9: handler fixed").mustSucceed(t)
	if n := len(replays(t, ns)); n != 0 {
		t.Fatalf("a preview created %d DeadLetterReplays", n)
	}
	for _, want := range []string{
		"Server-side dry run: nothing was created.",
		`replaying consumer group "billing"'s matching parked messages`,
		"kind: DeadLetterReplay", "generateName: billing-replay-", "errorCode: retries_exhausted",
		"group: billing", "name: billing-db", "key: dsn",
		"schema: public", "limit: 1000", "rate: 100", // defaults the API server applied
		"requestedBy: alice",
		`Next: add --confirm to create it and start the replay: a running consumer of group "billing"`,
		"at most 1000, oldest first",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("preview lacks %q:\n%s", want, r.stdout)
		}
	}
	for _, bad := range []string{"pipelineRef", "dryRun: true"} {
		if strings.Contains(r.stdout, bad) {
			t.Errorf("preview of a consumer replay has %q:\n%s", bad, r.stdout)
		}
	}
}

func TestReplayConsumerConfirmCreates(t *testing.T) {
	ns := newNamespace(t)
	plugin(t, "replay", "-n", ns, "--consumer-group", "Billing.V2", "--consumer-db", "billing-db/dsn",
		"--event-id", "e1,e2", "--reason", "INC-9: handler fixed", "--confirm").mustSucceed(t)
	got := replays(t, ns)
	if len(got) != 1 {
		t.Fatalf("--confirm should create one replay, got %d", len(got))
	}
	s := got[0].Spec
	if s.Consumer == nil || s.Consumer.Group != "Billing.V2" || s.Consumer.Schema != "public" || s.Consumer.Limit != 1000 ||
		s.Consumer.DatabaseSecretRef != (outboxv1.SecretKeyRef{Name: "billing-db", Key: "dsn"}) ||
		s.PipelineRef.Name != "" || s.DryRun || strings.Join(s.Selector.EventIDs, ",") != "e1,e2" {
		t.Fatalf("want a consumer replay of e1,e2 without pipelineRef or dryRun, got %+v (consumer %+v)", s, s.Consumer)
	}
	if !strings.HasPrefix(got[0].Name, "billing-v2-replay-") {
		t.Errorf("generated name %q does not start with billing-v2-replay-", got[0].Name)
	}

	plugin(t, "replay", "-n", ns, "--name", "unpark", "--consumer-group", "billing", "--consumer-db", "inbox-db/url",
		"--consumer-schema", "inbox", "--limit", "50", "--event-type", "InvoiceDue", "--created-before", "2026-05-01T00:00:00Z",
		"--rate", "5", "--requested-by", "INC-9", "--reason", "INC-9: handler fixed", "--dry-run=false", "--confirm").mustSucceed(t)
	var rp outboxv1.DeadLetterReplay
	if err := kube.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "unpark"}, &rp); err != nil {
		t.Fatal(err)
	}
	s = rp.Spec
	if s.Consumer == nil || s.Consumer.Schema != "inbox" || s.Consumer.Limit != 50 || s.Consumer.DatabaseSecretRef.Key != "url" ||
		s.PipelineRef.Name != "" || s.DryRun || s.Rate != 5 || s.RequestedBy != "INC-9" || s.Selector.EventType != "InvoiceDue" ||
		!s.Selector.CreatedBefore.Time.Equal(time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("spec does not follow the flags: %+v (consumer %+v)", s, s.Consumer)
	}
}

func TestReplayConsumerFollow(t *testing.T) {
	ns := newNamespace(t)
	go func() {
		ctx := context.Background()
		key := client.ObjectKey{Namespace: ns, Name: "unpark"}
		var rp outboxv1.DeadLetterReplay
		for kube.Get(ctx, key, &rp) != nil {
			time.Sleep(20 * time.Millisecond)
		}
		rp.Status = outboxv1.DeadLetterReplayStatus{Phase: "Running", Matched: 3, Replayed: 2, Succeeded: 2,
			ReplayedPerSecond: 4, EstimatedTimeRemaining: "1s",
			Consumer: &outboxv1.ConsumerReplayStatus{RequestID: 7, State: "RUNNING", Applied: 1, Duplicates: 1},
			Conditions: []metav1.Condition{{Type: "Ready", Status: "True", Reason: "JobCreated", Message: "Job unpark-replay started",
				LastTransitionTime: metav1.Now()}}}
		if err := kube.Status().Update(ctx, &rp); err != nil {
			t.Error(err)
			return
		}
		time.Sleep(300 * time.Millisecond)
		rp.Status.Phase, rp.Status.Replayed, rp.Status.Succeeded, rp.Status.DeadAgain = "Succeeded", 3, 2, 1
		rp.Status.EstimatedTimeRemaining = ""
		rp.Status.Consumer.State = "DONE"
		if err := kube.Status().Update(ctx, &rp); err != nil {
			t.Error(err)
		}
	}()
	r := plugin(t, "replay", "-n", ns, "--name", "unpark", "--consumer-group", "billing", "--consumer-db", "billing-db/dsn",
		"--error-code", "retries_exhausted", "--limit", "3", "--reason", "INC-3: replay", "--confirm", "--follow",
		"--poll-interval", "50ms", "--timeout", "30s").mustSucceed(t)
	for _, want := range []string{
		`deadletterreplay.outbox.dev/unpark created in namespace ` + ns + ` (replaying consumer group "billing"'s matching parked messages`,
		"phase Running consumer RUNNING matched 3 replayed 2 applied 1 duplicates 1 failed again 0 4/s ETA 1s Ready=True JobCreated: Job unpark-replay started",
		"phase Succeeded consumer DONE matched 3 replayed 3 applied 1 duplicates 1 failed again 1 4/s Ready=True",
		"replay finished: 3 parked messages matched, 3 replayed (1 applied, 1 duplicates), 1 failed again and stay parked; matched reached the limit 3, so more may match",
	} {
		if !strings.Contains(strings.Join(rows(r.stdout), "\n"), want) {
			t.Errorf("follow output lacks %q:\n%s", want, r.stdout)
		}
	}
}

func TestReplayConsumerBadInput(t *testing.T) {
	ns := newNamespace(t)
	pipeline(t, ns, "orders", "db", "")
	base := []string{"replay", "-n", ns, "--consumer-group", "billing", "--consumer-db", "billing-db/dsn", "--reason", "INC-1: fixed"}
	with := func(extra ...string) []string { return append(append([]string{}, base...), extra...) }
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"pipeline and consumer", with("-p", "orders", "--event-type", "X"), 2, "--pipeline and --consumer-group are mutually exclusive"},
		{"no database", []string{"replay", "-n", ns, "--consumer-group", "billing", "--event-type", "X", "--reason", "abc"}, 2,
			"--consumer-group needs --consumer-db SECRET/KEY"},
		{"database without group", []string{"replay", "-n", ns, "-p", "orders", "--consumer-db", "billing-db/dsn", "--event-type", "X", "--reason", "abc"}, 2,
			"--consumer-db needs --consumer-group"},
		{"limit without group", []string{"replay", "-n", ns, "-p", "orders", "--limit", "5", "--event-type", "X", "--reason", "abc"}, 2,
			"--limit needs --consumer-group"},
		{"neither target", []string{"replay", "-n", ns, "--event-type", "X", "--reason", "abc"}, 2,
			"--pipeline is required (or --consumer-group with --consumer-db"},
		{"bad database ref", []string{"replay", "-n", ns, "--consumer-group", "billing", "--consumer-db", "billing-db", "--event-type", "X", "--reason", "abc"}, 2,
			`--consumer-db "billing-db": want SECRET/KEY`},
		{"no selector", base, 2, "give at least one selector flag (--event-id, --event-type, --error-code, --created-after, --created-before)"},
		{"aggregate type", with("--aggregate-type", "order"), 2,
			"--aggregate-type selects DEAD outbox events; with --consumer-group select parked messages by --event-id, --event-type, --error-code, --created-after or --created-before"},
		{"aggregate id", with("--event-type", "X", "--aggregate-id", "o-1"), 2, "--aggregate-id selects DEAD outbox events"},
		{"destination", with("--event-type", "X", "--destination", "orders"), 2, "--destination selects DEAD outbox events"},
		{"dry run", with("--event-type", "X", "--dry-run"), 2, "--dry-run is not available with --consumer-group"},
		{"dry run true", with("--event-type", "X", "--dry-run=true", "--confirm"), 2, "--dry-run is not available with --consumer-group"},
		{"canary", with("--event-type", "X", "--canary-size", "5"), 2, "--canary-size does not apply to --consumer-group"},
		{"max new dead", with("--event-type", "X", "--max-new-dead-percent", "5"), 2, "--max-new-dead-percent does not apply to --consumer-group"},
		{"limit too big", with("--event-type", "X", "--limit", "20000"), 2, "--limit 20000: want 1 to 10000 parked messages"},
		{"limit zero", with("--event-type", "X", "--limit", "0"), 2, "--limit 0: want 1 to 10000 parked messages"},
		{"bad schema", with("--event-type", "X", "--consumer-schema", "Billing"), 2, `--consumer-schema: consumer schema name "Billing" is not a valid identifier`},
		{"follow without confirm", with("--event-type", "X", "--follow"), 2, "--follow needs --confirm"},
		{"API server refuses", with("--event-type", "X", "--rate", "20000"), 1, "the API server refuses this DeadLetterReplay"},
		{"API server refuses confirmed", with("--event-type", "X", "--rate", "20000", "--confirm"), 1, "create DeadLetterReplay in namespace"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			plugin(t, tc.args...).mustFailWith(t, tc.code, tc.want)
		})
	}
	if n := len(replays(t, ns)); n != 0 {
		t.Fatalf("bad input created %d DeadLetterReplays", n)
	}
}

// The API server's own CEL rules back the plugin's checks: a consumer replay with an
// outbox-only selector or spec.dryRun is refused even when written by hand.
func TestReplayConsumerCELRules(t *testing.T) {
	ns := newNamespace(t)
	mk := func(mut func(*outboxv1.DeadLetterReplaySpec)) error {
		rp := &outboxv1.DeadLetterReplay{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "cel-"},
			Spec: outboxv1.DeadLetterReplaySpec{Reason: "INC-1", Selector: outboxv1.ReplaySelector{EventType: "X"},
				Consumer: &outboxv1.ConsumerTarget{Group: "g", DatabaseSecretRef: outboxv1.SecretKeyRef{Name: "db", Key: "dsn"}}}}
		mut(&rp.Spec)
		return kube.Create(context.Background(), rp, client.DryRunAll)
	}
	if err := mk(func(*outboxv1.DeadLetterReplaySpec) {}); err != nil {
		t.Fatalf("a plain consumer replay is refused: %v", err)
	}
	for name, mut := range map[string]func(*outboxv1.DeadLetterReplaySpec){
		"dryRun":      func(s *outboxv1.DeadLetterReplaySpec) { s.DryRun = true },
		"destination": func(s *outboxv1.DeadLetterReplaySpec) { s.Selector.Destination = "orders" },
		"both targets": func(s *outboxv1.DeadLetterReplaySpec) {
			s.PipelineRef = outboxv1.PipelineReference{Name: "orders"}
		},
	} {
		if err := mk(mut); err == nil {
			t.Errorf("%s: the API server accepts what the plugin refuses", name)
		}
	}
}
