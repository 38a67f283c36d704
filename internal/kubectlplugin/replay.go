package kubectlplugin

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
)

// replayCmd creates a DeadLetterReplay from flags. Two safety catches, both on by
// default: without --confirm nothing is created (the API server validates the object
// in a server-side dry run and it is printed), and spec.dryRun stays true unless
// --dry-run=false, so the first replay that does exist only counts and audits.
type replayCmd struct {
	out           io.Writer
	name          string
	pipeline      string
	sel           selectorFlags
	reason        string
	requestedBy   string
	rate          int32
	canarySize    int32
	maxNewDead    int32
	dryRun        bool
	confirm       bool
	follow        bool
	followTimeout time.Duration
	pollInterval  time.Duration
	changed       func(string) bool
}

func (c *replayCmd) bind(fs *pflag.FlagSet) {
	fs.StringVar(&c.name, "name", "", "name of the DeadLetterReplay (default: <pipeline>-replay-<random>)")
	fs.StringVarP(&c.pipeline, "pipeline", "p", "", "the OutboxPipeline whose DEAD events are replayed (required)")
	c.sel.bind(fs)
	fs.StringVar(&c.reason, "reason", "", "why, recorded in the audit table, e.g. \"INC-1234: topic created\" (required)")
	fs.StringVar(&c.requestedBy, "requested-by", "", "who asks, recorded in the audit table (default: your kubeconfig user)")
	fs.Int32Var(&c.rate, "rate", 0, "events per second handed back (default: the API's, 100)")
	fs.Int32Var(&c.canarySize, "canary-size", 0, "events replayed first as a canary; 0 disables it (default: the API's, 10)")
	fs.Int32Var(&c.maxNewDead, "max-new-dead-percent", 0, "stop when more of the canary dies again (default: the API's, 10)")
	fs.BoolVar(&c.dryRun, "dry-run", true, "spec.dryRun: only count and audit the matching events; --dry-run=false replays them")
	fs.BoolVar(&c.confirm, "confirm", false, "create the DeadLetterReplay; without it the API server only validates it and nothing is created")
	fs.BoolVarP(&c.follow, "follow", "f", false, "after creating, print the replay's progress until it finishes")
	fs.DurationVar(&c.followTimeout, "timeout", 0, "with --follow: give up following after this long (0: never)")
	fs.DurationVar(&c.pollInterval, "poll-interval", 2*time.Second, "with --follow: how often the status is read")
	_ = fs.MarkHidden("poll-interval")
	c.changed = func(name string) bool { return fs.Changed(name) }
}

func (c *replayCmd) run(ctx context.Context, s *session, args []string) error {
	if len(args) > 0 {
		return usagef("replay takes flags only, got %q", args)
	}
	if s.all {
		return usagef("replay works in one namespace; use -n NAMESPACE instead of -A")
	}
	rp, err := c.build(ctx, s)
	if err != nil {
		return err
	}
	if _, err := findPipelines(ctx, s, c.pipeline); err != nil {
		return err
	}
	if !c.confirm {
		return c.preview(ctx, s, rp)
	}
	if err := s.c.Create(ctx, rp); err != nil {
		return fmt.Errorf("create DeadLetterReplay in namespace %q: %w", s.namespace, err)
	}
	fmt.Fprintf(c.out, "deadletterreplay.outbox.dev/%s created in namespace %s (%s)\n", rp.Name, rp.Namespace, mode(rp))
	if !c.follow {
		fmt.Fprintf(c.out, "watch it with: kubectl outbox status -n %s\n", rp.Namespace)
		return nil
	}
	return c.followReplay(ctx, s, client.ObjectKeyFromObject(rp))
}

func mode(rp *outboxv1.DeadLetterReplay) string {
	if rp.Spec.DryRun {
		return "dry run: it counts and audits the matching DEAD events, replays none"
	}
	return "replaying the matching DEAD events with their original event ids"
}

// build turns the flags into the object, checking locally what the API server would
// refuse, so the message names the flag rather than the field.
func (c *replayCmd) build(ctx context.Context, s *session) (*outboxv1.DeadLetterReplay, error) {
	if c.pipeline == "" {
		return nil, usagef("--pipeline is required")
	}
	if len(c.reason) < 3 {
		return nil, usagef("--reason is required (at least 3 characters): say what was fixed, e.g. \"INC-1234: topic created\"")
	}
	if c.follow && !c.confirm {
		return nil, usagef("--follow needs --confirm: without it nothing is created to follow")
	}
	sel, err := c.sel.selector()
	if err != nil {
		return nil, err
	}
	rp := &outboxv1.DeadLetterReplay{
		TypeMeta:   metav1.TypeMeta{APIVersion: outboxv1.GroupVersion.String(), Kind: "DeadLetterReplay"},
		ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace, Name: c.name},
		Spec: outboxv1.DeadLetterReplaySpec{
			PipelineRef: outboxv1.PipelineReference{Name: c.pipeline},
			Selector:    sel, Reason: c.reason, RequestedBy: c.requestedBy, Rate: c.rate, DryRun: c.dryRun,
		},
	}
	if rp.Name == "" {
		rp.GenerateName = generateName(c.pipeline)
	}
	if rp.Spec.RequestedBy == "" {
		rp.Spec.RequestedBy = s.whoami(ctx)
	}
	if c.changed("canary-size") {
		rp.Spec.CanarySize = &c.canarySize
	}
	if c.changed("max-new-dead-percent") {
		rp.Spec.MaxNewDeadPercent = &c.maxNewDead
	}
	return rp, nil
}

// maxReplayName is the CRD's limit (the Job name derives from it); generateName adds
// five random characters.
const maxReplayName = 52

func generateName(pipeline string) string {
	prefix := pipeline + "-replay-"
	if n := maxReplayName - 5; len(prefix) > n {
		prefix = prefix[:n]
	}
	return prefix
}
