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

func replays(t *testing.T, ns string) []outboxv1.DeadLetterReplay {
	t.Helper()
	var l outboxv1.DeadLetterReplayList
	if err := kube.List(context.Background(), &l, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	return l.Items
}

func TestReplayPreviewCreatesNothing(t *testing.T) {
	ns := newNamespace(t)
	pipeline(t, ns, "orders", "db", "")
	r := plugin(t, "replay", "-n", ns, "-p", "orders", "--error-code", "MESSAGE_TOO_LARGE", "--reason", "INC-9: limit raised").mustSucceed(t)
	if n := len(replays(t, ns)); n != 0 {
		t.Fatalf("a preview created %d DeadLetterReplays", n)
	}
	for _, want := range []string{
		"Server-side dry run: nothing was created.",
		"kind: DeadLetterReplay", "generateName: orders-replay-", "errorCode: MESSAGE_TOO_LARGE",
		"dryRun: true", "rate: 100", "canarySize: 10", // defaults the API server applied
		"requestedBy: alice", // who the API server says the user is
		"Next: add --confirm",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("preview lacks %q:\n%s", want, r.stdout)
		}
	}
}

func TestReplayConfirmCreates(t *testing.T) {
	ns := newNamespace(t)
	pipeline(t, ns, "orders", "db", "")
	plugin(t, "replay", "-n", ns, "-p", "orders", "--event-id", "e1,e2", "--event-id", "e3",
		"--reason", "INC-9: consumer fixed", "--confirm").mustSucceed(t)
	got := replays(t, ns)
	if len(got) != 1 || !got[0].Spec.DryRun || strings.Join(got[0].Spec.Selector.EventIDs, ",") != "e1,e2,e3" {
		t.Fatalf("--confirm should create one dry-run replay of e1,e2,e3, got %+v", got)
	}

	plugin(t, "replay", "-n", ns, "-p", "orders", "--name", "for-real", "--aggregate-type", "order", "--aggregate-id", "o-1",
		"--created-after", "2026-05-01T00:00:00Z", "--rate", "5", "--canary-size", "0", "--requested-by", "INC-9",
		"--reason", "INC-9: consumer fixed", "--dry-run=false", "--confirm").mustSucceed(t)
	var rp outboxv1.DeadLetterReplay
	if err := kube.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "for-real"}, &rp); err != nil {
		t.Fatal(err)
	}
	s := rp.Spec
	if s.DryRun || s.Rate != 5 || *s.CanarySize != 0 || s.RequestedBy != "INC-9" || s.Selector.AggregateID != "o-1" ||
		!s.Selector.CreatedAfter.Time.Equal(time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("spec does not follow the flags: %+v", s)
	}
}

func TestReplayFollow(t *testing.T) {
	ns := newNamespace(t)
	pipeline(t, ns, "orders", "db", "")
	go playOperator(t, ns, "watched")
	r := plugin(t, "replay", "-n", ns, "-p", "orders", "--name", "watched", "--event-type", "OrderPlaced",
		"--reason", "INC-3: replay", "--dry-run=false", "--confirm", "--follow", "--poll-interval", "50ms", "--timeout", "30s").mustSucceed(t)
	for _, want := range []string{
		"deadletterreplay.outbox.dev/watched created",
		"phase Running matched 4 replayed 2 succeeded 1 dead again 0 Ready=True JobCreated: Job watched-replay started",
		"phase Succeeded matched 4 replayed 4 succeeded 4 dead again 0",
		"replay finished: 4 matched, 4 replayed, 4 succeeded, 0 dead again",
	} {
		if !strings.Contains(strings.Join(rows(r.stdout), "\n"), want) {
			t.Errorf("follow output lacks %q:\n%s", want, r.stdout)
		}
	}
}

// playOperator writes the statuses the operator would, once the replay exists.
func playOperator(t *testing.T, ns, name string) {
	ctx := context.Background()
	key := client.ObjectKey{Namespace: ns, Name: name}
	var rp outboxv1.DeadLetterReplay
	for kube.Get(ctx, key, &rp) != nil {
		time.Sleep(20 * time.Millisecond)
	}
	rp.Status = outboxv1.DeadLetterReplayStatus{Phase: "Running", Matched: 4, Replayed: 2, Succeeded: 1,
		Conditions: []metav1.Condition{{Type: "Ready", Status: "True", Reason: "JobCreated", Message: "Job watched-replay started",
			LastTransitionTime: metav1.Now()}}}
	if err := kube.Status().Update(ctx, &rp); err != nil {
		t.Error(err)
		return
	}
	time.Sleep(300 * time.Millisecond)
	rp.Status.Phase, rp.Status.Replayed, rp.Status.Succeeded = "Succeeded", 4, 4
	if err := kube.Status().Update(ctx, &rp); err != nil {
		t.Error(err)
	}
}

func TestReplayFollowFailed(t *testing.T) {
	ns := newNamespace(t)
	pipeline(t, ns, "orders", "db", "")
	go func() {
		ctx := context.Background()
		var rp outboxv1.DeadLetterReplay
		for kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: "doomed"}, &rp) != nil {
			time.Sleep(20 * time.Millisecond)
		}
		rp.Status = outboxv1.DeadLetterReplayStatus{Phase: "Failed", Conditions: []metav1.Condition{{Type: "Ready", Status: "False",
			Reason: "JobFailed", Message: "Job doomed-replay failed", LastTransitionTime: metav1.Now()}}}
		_ = kube.Status().Update(ctx, &rp)
	}()
	plugin(t, "replay", "-n", ns, "-p", "orders", "--name", "doomed", "--event-type", "X", "--reason", "try",
		"--confirm", "-f", "--poll-interval", "50ms", "--timeout", "30s").
		mustFailWith(t, 1, "replay doomed failed: JobFailed: Job doomed-replay failed")
}

func TestReplayBadInput(t *testing.T) {
	ns := newNamespace(t)
	pipeline(t, ns, "orders", "db", "")
	base := []string{"replay", "-n", ns, "-p", "orders", "--reason", "INC-1: fixed"}
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no selector", base, 2, "give at least one selector flag"},
		{"no pipeline", []string{"replay", "-n", ns, "--event-type", "X", "--reason", "abc"}, 2, "--pipeline is required"},
		{"unknown pipeline", []string{"replay", "-n", ns, "-p", "nope", "--event-type", "X", "--reason", "abc"}, 1, `pipeline "nope" not found in namespace "` + ns + `"`},
		{"no reason", []string{"replay", "-n", ns, "-p", "orders", "--event-type", "X"}, 2, "--reason is required"},
		{"aggregate id alone", append(base, "--aggregate-id", "o-1"), 2, "--aggregate-id needs --aggregate-type"},
		{"bad time", append(base, "--created-after", "yesterday"), 2, `--created-after "yesterday": want an RFC 3339 time`},
		{"inverted window", append(base, "--created-after", "2026-05-02T00:00:00Z", "--created-before", "2026-05-01T00:00:00Z"), 2,
			"--created-after must be before --created-before"},
		{"follow without confirm", append(base, "--event-type", "X", "--follow"), 2, "--follow needs --confirm"},
		{"API server refuses", append(base, "--event-type", "X", "--rate", "20000"), 1, "the API server refuses this DeadLetterReplay"},
		{"blank id", append(base, "--event-id", "a", "--event-id", " "), 2, "--event-id: an event id is empty"},
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
