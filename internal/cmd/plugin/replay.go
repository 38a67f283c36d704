package plugin

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
	"github.com/outbox-operator/outbox-operator/internal/pgident"
)

// replayCmd creates a DeadLetterReplay from flags, of a pipeline's DEAD events
// (--pipeline: spec.pipelineRef) or of a consumer group's parked messages
// (--consumer-group: spec.consumer). Safety catches, on by default: without --confirm
// nothing is created (the API server validates the object in a server-side dry run and
// it is printed), and for a pipeline spec.dryRun stays true unless --dry-run=false, so
// the first replay that does exist only counts and audits. A consumer replay cannot
// only count (the API refuses spec.dryRun with spec.consumer), so for it the preview
// is the only catch: --confirm starts the replay.
type replayCmd struct {
	out            io.Writer
	name           string
	pipeline       string
	consumerGroup  string
	consumerDB     string
	consumerSchema string
	limit          int32
	sel            selectorFlags
	reason         string
	requestedBy    string
	rate           int32
	canarySize     int32
	maxNewDead     int32
	dryRun         bool
	confirm        bool
	follow         bool
	followTimeout  time.Duration
	pollInterval   time.Duration
	changed        func(string) bool
}

func (c *replayCmd) bind(fs *pflag.FlagSet) {
	fs.StringVar(&c.name, "name", "", "name of the DeadLetterReplay (default: <pipeline or consumer group>-replay-<random>)")
	fs.StringVarP(&c.pipeline, "pipeline", "p", "", "the OutboxPipeline whose DEAD events are replayed (this or --consumer-group is required)")
	fs.StringVar(&c.consumerGroup, "consumer-group", "", "instead of --pipeline: the inbox consumer group whose parked messages are replayed (spec.consumer)")
	fs.StringVar(&c.consumerDB, "consumer-db", "", "with --consumer-group (required): SECRET/KEY of the Secret in the namespace holding the consumer database DSN")
	fs.StringVar(&c.consumerSchema, "consumer-schema", "", "with --consumer-group: schema of the inbox tables (default: the API's, public)")
	fs.Int32Var(&c.limit, "limit", 0, "with --consumer-group: at most this many parked messages, oldest first (default: the API's, 1000)")
	c.sel.bind(fs)
	fs.StringVar(&c.reason, "reason", "", "why, recorded in the audit table, e.g. \"INC-1234: topic created\" (required)")
	fs.StringVar(&c.requestedBy, "requested-by", "", "who asks, recorded in the audit table (default: your kubeconfig user)")
	fs.Int32Var(&c.rate, "rate", 0, "events per second handed back (default: the API's, 100)")
	fs.Int32Var(&c.canarySize, "canary-size", 0, "events replayed first as a canary; 0 disables it (default: the API's, 10)")
	fs.Int32Var(&c.maxNewDead, "max-new-dead-percent", 0, "stop when more of the canary dies again (default: the API's, 10)")
	fs.BoolVar(&c.dryRun, "dry-run", true, "spec.dryRun: only count and audit the matching events; --dry-run=false replays them (not with --consumer-group)")
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
	if c.pipeline != "" {
		if _, err := findPipelines(ctx, s, c.pipeline); err != nil {
			return err
		}
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
	if cs := rp.Spec.Consumer; cs != nil {
		return fmt.Sprintf("replaying consumer group %q's matching parked messages through its running consumer", cs.Group)
	}
	if rp.Spec.DryRun {
		return "dry run: it counts and audits the matching DEAD events, replays none"
	}
	return "replaying the matching DEAD events with their original event ids"
}

// build turns the flags into the object, checking locally what the API server would
// refuse, so the message names the flag rather than the field.
func (c *replayCmd) build(ctx context.Context, s *session) (*outboxv1.DeadLetterReplay, error) {
	consumer, err := c.consumerTarget()
	if err != nil {
		return nil, err
	}
	if len(c.reason) < 3 {
		return nil, usagef("--reason is required (at least 3 characters): say what was fixed, e.g. \"INC-1234: topic created\"")
	}
	if c.follow && !c.confirm {
		return nil, usagef("--follow needs --confirm: without it nothing is created to follow")
	}
	sel, err := c.sel.selector(consumer != nil)
	if err != nil {
		return nil, err
	}
	rp := &outboxv1.DeadLetterReplay{
		TypeMeta:   metav1.TypeMeta{APIVersion: outboxv1.GroupVersion.String(), Kind: "DeadLetterReplay"},
		ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace, Name: c.name},
		Spec: outboxv1.DeadLetterReplaySpec{
			Selector: sel, Reason: c.reason, RequestedBy: c.requestedBy, Rate: c.rate,
		},
	}
	if consumer != nil {
		// spec.dryRun stays unset: the API refuses it with spec.consumer.
		rp.Spec.Consumer = consumer
	} else {
		rp.Spec.PipelineRef = outboxv1.PipelineReference{Name: c.pipeline}
		rp.Spec.DryRun = c.dryRun
	}
	if rp.Name == "" {
		if consumer != nil {
			rp.GenerateName = generateName(nameFrom(consumer.Group))
		} else {
			rp.GenerateName = generateName(c.pipeline)
		}
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

// consumerTarget checks the target flags: exactly one of --pipeline and
// --consumer-group, and the flags that only fit one of them. It returns spec.consumer,
// or nil for a pipeline target.
func (c *replayCmd) consumerTarget() (*outboxv1.ConsumerTarget, error) {
	if c.consumerGroup == "" {
		for _, f := range []string{"consumer-db", "consumer-schema", "limit"} {
			if c.changed(f) {
				return nil, usagef("--%s needs --consumer-group (it applies to a replay of a consumer group's parked messages)", f)
			}
		}
		if c.pipeline == "" {
			return nil, usagef("--pipeline is required (or --consumer-group with --consumer-db to replay a consumer group's parked messages)")
		}
		return nil, nil
	}
	if c.pipeline != "" {
		return nil, usagef("--pipeline and --consumer-group are mutually exclusive: a replay takes a pipeline's DEAD events or a consumer group's parked messages")
	}
	if c.changed("dry-run") && c.dryRun {
		return nil, usagef("--dry-run is not available with --consumer-group: a consumer replay cannot only count; without --confirm nothing is created, --confirm starts the replay")
	}
	for _, f := range []string{"canary-size", "max-new-dead-percent"} {
		if c.changed(f) {
			return nil, usagef("--%s does not apply to --consumer-group: a consumer replay has no canary", f)
		}
	}
	if c.consumerDB == "" {
		return nil, usagef("--consumer-group needs --consumer-db SECRET/KEY (the Secret key holding the consumer database's DSN, e.g. billing-db/dsn)")
	}
	ref, err := parseSecretKey("--consumer-db", c.consumerDB)
	if err != nil {
		return nil, err
	}
	t := &outboxv1.ConsumerTarget{Group: c.consumerGroup, Schema: c.consumerSchema, DatabaseSecretRef: ref}
	if c.changed("consumer-schema") {
		if err := pgident.Validate("consumer schema", c.consumerSchema); err != nil {
			return nil, usagef("--consumer-schema: %v", err)
		}
	}
	if c.changed("limit") {
		if c.limit < 1 || c.limit > maxConsumerLimit {
			return nil, usagef("--limit %d: want 1 to %d parked messages (create another replay for more)", c.limit, maxConsumerLimit)
		}
		t.Limit = c.limit
	}
	return t, nil
}

// maxConsumerLimit is the CRD's maximum of spec.consumer.limit.
const maxConsumerLimit = 10000

// nameFrom turns a consumer group (any text) into the start of an object name:
// lower-case letters, digits and dashes.
func nameFrom(group string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(group) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	n := strings.Trim(b.String(), "-")
	if n == "" {
		return "consumer"
	}
	return n
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
