package plugin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
)

// preview sends the object through the API server's validation and defaulting
// (server-side dry run: admission, the CRD schema and its CEL rules all run) and
// prints what would be created. Nothing is stored.
func (c *replayCmd) preview(ctx context.Context, s *session, rp *outboxv1.DeadLetterReplay) error {
	if err := s.c.Create(ctx, rp, client.DryRunAll); err != nil {
		return fmt.Errorf("the API server refuses this DeadLetterReplay: %w", err)
	}
	// What `kubectl create -f` would take: no server-set metadata, no status.
	shown := map[string]any{
		"apiVersion": outboxv1.GroupVersion.String(), "kind": "DeadLetterReplay",
		"metadata": metav1.ObjectMeta{Namespace: rp.Namespace, Name: c.name, GenerateName: rp.GenerateName},
		"spec":     rp.Spec,
	}
	b, err := yaml.Marshal(shown)
	if err != nil {
		return fmt.Errorf("print the DeadLetterReplay: %w", err)
	}
	fmt.Fprintf(c.out, "Server-side dry run: nothing was created. The API server accepts this DeadLetterReplay (%s):\n\n", mode(rp))
	fmt.Fprintf(c.out, "%s\n", b)
	if cs := rp.Spec.Consumer; cs != nil {
		limit := "the limit"
		if cs.Limit > 0 {
			limit = fmt.Sprint(cs.Limit)
		}
		fmt.Fprintf(c.out, "Next: add --confirm to create it and start the replay: a running consumer of group %q handles the matching\n", cs.Group)
		fmt.Fprintf(c.out, "parked messages again (at most %s, oldest first). A consumer replay cannot only count; there is no --dry-run.\n", limit)
		return nil
	}
	if rp.Spec.DryRun {
		fmt.Fprintln(c.out, "Next: add --confirm to create it and learn how many DEAD events match (nothing is replayed);")
		fmt.Fprintln(c.out, "then --dry-run=false --confirm to replay them.")
		return nil
	}
	fmt.Fprintln(c.out, "Next: add --confirm to create it and start the replay.")
	return nil
}

// followReplay prints a line whenever the replay's phase, counts or Ready condition
// change, until it has finished. A Failed replay is an error.
func (c *replayCmd) followReplay(ctx context.Context, s *session, key client.ObjectKey) error {
	if c.followTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.followTimeout)
		defer cancel()
	}
	tick := time.NewTicker(c.pollInterval)
	defer tick.Stop()
	last := ""
	for {
		var rp outboxv1.DeadLetterReplay
		if err := s.c.Get(ctx, key, &rp); err != nil {
			return followError(ctx, key, err)
		}
		if line := progress(&rp); line != last {
			fmt.Fprintf(c.out, "%s %s\n", time.Now().UTC().Format(time.TimeOnly), line)
			last = line
		}
		if done, err := finished(&rp); done {
			if err == nil {
				fmt.Fprintln(c.out, summary(&rp))
			}
			return err
		}
		select {
		case <-ctx.Done():
			return followError(ctx, key, ctx.Err())
		case <-tick.C:
		}
	}
}

func progress(rp *outboxv1.DeadLetterReplay) string {
	st := rp.Status
	phase := st.Phase
	if phase == "" {
		phase = "(not started)"
	}
	var line string
	if rp.Spec.Consumer != nil {
		// The consumer group's own record: its state, and succeeded split into applied
		// and duplicates; deadAgain are messages whose handler failed again (still parked).
		cs := outboxv1.ConsumerReplayStatus{}
		if st.Consumer != nil {
			cs = *st.Consumer
		}
		state := cs.State
		if state == "" {
			state = "-"
		}
		line = fmt.Sprintf("phase %s  consumer %s  matched %d  replayed %d  applied %d  duplicates %d  failed again %d",
			phase, state, st.Matched, st.Replayed, cs.Applied, cs.Duplicates, st.DeadAgain)
	} else {
		line = fmt.Sprintf("phase %s  matched %d  replayed %d  succeeded %d  dead again %d", phase, st.Matched, st.Replayed, st.Succeeded, st.DeadAgain)
	}
	if st.ReplayedPerSecond > 0 {
		line += fmt.Sprintf("  %d/s", st.ReplayedPerSecond)
	}
	if st.EstimatedTimeRemaining != "" {
		line += "  ETA " + st.EstimatedTimeRemaining
	}
	if c := meta.FindStatusCondition(st.Conditions, outboxv1.ConditionReady); c != nil {
		line += fmt.Sprintf("  Ready=%s %s: %s", c.Status, c.Reason, oneLine(c.Message))
	}
	return line
}

// finished: Succeeded ends well, Failed ends in an error naming the reason.
func finished(rp *outboxv1.DeadLetterReplay) (bool, error) {
	switch rp.Status.Phase {
	case outboxv1.ReplaySucceeded:
		return true, nil
	case outboxv1.ReplayFailed:
		msg := "see kubectl describe deadletterreplay " + rp.Name
		if c := meta.FindStatusCondition(rp.Status.Conditions, outboxv1.ConditionReady); c != nil {
			msg = c.Reason + ": " + c.Message
		}
		return true, fmt.Errorf("replay %s failed: %s", rp.Name, msg)
	}
	return false, nil
}

// summary is the closing line of a replay that succeeded.
func summary(rp *outboxv1.DeadLetterReplay) string {
	st := rp.Status
	if rp.Spec.Consumer != nil {
		cs := outboxv1.ConsumerReplayStatus{}
		if st.Consumer != nil {
			cs = *st.Consumer
		}
		line := fmt.Sprintf("replay finished: %d parked messages matched, %d replayed (%d applied, %d duplicates), %d failed again and stay parked",
			st.Matched, st.Replayed, cs.Applied, cs.Duplicates, st.DeadAgain)
		if lim := rp.Spec.Consumer.Limit; lim > 0 && st.Matched >= int64(lim) {
			line += fmt.Sprintf("; matched reached the limit %d, so more may match: run the replay again", lim)
		}
		return line
	}
	if rp.Spec.DryRun {
		return fmt.Sprintf("dry run finished: %d DEAD events match, nothing was replayed; replay them with --dry-run=false --confirm", st.Matched)
	}
	return fmt.Sprintf("replay finished: %d matched, %d replayed, %d succeeded, %d dead again", st.Matched, st.Replayed, st.Succeeded, st.DeadAgain)
}

func followError(ctx context.Context, key client.ObjectKey, err error) error {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || ctx.Err() != nil {
		return fmt.Errorf("stopped following replay %s before it finished; it carries on (kubectl outbox status -n %s)", key.Name, key.Namespace)
	}
	return fmt.Errorf("read DeadLetterReplay %s: %w", key, err)
}
