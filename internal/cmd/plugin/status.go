package plugin

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"
	"sigs.k8s.io/controller-runtime/pkg/client"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
)

// statusCmd prints every OutboxPipeline, DeadLetterReplay and RetentionPolicy of the
// namespace (or, with -A, of the cluster): what `kubectl get` of the three kinds
// shows, in one view, plus the reasons behind Ready and Degraded.
type statusCmd struct{ out io.Writer }

func (c *statusCmd) bind(*pflag.FlagSet) {}

// inventory is one read of the three kinds.
type inventory struct {
	pipelines []outboxv1.OutboxPipeline
	replays   []outboxv1.DeadLetterReplay
	policies  []outboxv1.RetentionPolicy
}

func (c *statusCmd) run(ctx context.Context, s *session, args []string) error {
	if len(args) > 0 {
		return usagef("status takes no arguments, got %q", args)
	}
	inv, err := readInventory(ctx, s)
	if err != nil {
		return err
	}
	v := view{out: c.out, all: s.all, now: time.Now(), where: "namespace " + s.namespace}
	if s.all {
		v.where = "any namespace"
	}
	return v.render(inv)
}

func readInventory(ctx context.Context, s *session) (inventory, error) {
	var opts []client.ListOption
	if !s.all {
		opts = append(opts, client.InNamespace(s.namespace))
	}
	var inv inventory
	var pl outboxv1.OutboxPipelineList
	if err := s.c.List(ctx, &pl, opts...); err != nil {
		return inv, listError("OutboxPipelines", err)
	}
	var rl outboxv1.DeadLetterReplayList
	if err := s.c.List(ctx, &rl, opts...); err != nil {
		return inv, listError("DeadLetterReplays", err)
	}
	var tl outboxv1.RetentionPolicyList
	if err := s.c.List(ctx, &tl, opts...); err != nil {
		return inv, listError("RetentionPolicies", err)
	}
	inv.pipelines, inv.replays, inv.policies = pl.Items, rl.Items, tl.Items
	return inv, nil
}

// listError explains the two usual causes: the CRDs are missing, or RBAC says no.
func listError(kind string, err error) error {
	return fmt.Errorf("list %s: %w (are the outbox.dev CRDs installed, and may you list them?)", kind, err)
}
