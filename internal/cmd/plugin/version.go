package plugin

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/outbox-operator/outbox-operator/internal/buildinfo"
)

// versionCmd prints the plugin's version and the operator's, like `kubectl version`
// does for kubectl and the API server. The operator is its manager Deployment(s):
// found by labels, its version is the tag of the image it runs (OperatorVersion).
type versionCmd struct {
	out        io.Writer
	clientOnly bool
}

func (c *versionCmd) bind(fs *pflag.FlagSet) {
	fs.BoolVar(&c.clientOnly, "client", false, "print the plugin's version only, without contacting the cluster")
}

func (c *versionCmd) run(ctx context.Context, s *session, args []string) error {
	return c.runWith(ctx, func() (*session, error) { return s, nil }, args)
}

// runWith prints the plugin's version first, then connects: the plugin's version is
// printed even when there is no kubeconfig or no cluster.
func (c *versionCmd) runWith(ctx context.Context, connect func() (*session, error), args []string) error {
	if len(args) > 0 {
		return usagef("version takes no arguments, got %q", args)
	}
	fmt.Fprintf(c.out, "plugin:   %s (%s)\n", buildinfo.Version(), buildinfo.Platform())
	if c.clientOnly {
		return nil
	}
	s, err := connect()
	if err != nil {
		return err
	}
	ops, where, err := findManagers(ctx, s)
	if err != nil {
		return err
	}
	if len(ops) == 0 {
		fmt.Fprintf(c.out, "operator: not found in %s (no Deployment labelled %s)\n", where, managerSelectorText)
	}
	for _, d := range ops {
		fmt.Fprintf(c.out, "operator: %s (%s)\n", OperatorVersion(d), describeManager(d))
	}
	return nil
}

// ManagerLabels select the manager Deployment of both installs: config/manager (and
// so config/default) and the Helm chart's selector labels carry them.
var ManagerLabels = client.MatchingLabels{"app.kubernetes.io/name": "outbox-operator", "app.kubernetes.io/component": "manager"}

const managerSelectorText = "app.kubernetes.io/name=outbox-operator,app.kubernetes.io/component=manager"

// findManagers lists the manager Deployments of every namespace, or of the session's
// namespace when RBAC forbids the cluster-wide list; where says which was searched.
func findManagers(ctx context.Context, s *session) ([]appsv1.Deployment, string, error) {
	var l appsv1.DeploymentList
	err := s.c.List(ctx, &l, ManagerLabels)
	where := "any namespace"
	if apierrors.IsForbidden(err) {
		where = fmt.Sprintf("namespace %s (you may not list Deployments in every namespace)", s.namespace)
		err = s.c.List(ctx, &l, ManagerLabels, client.InNamespace(s.namespace))
	}
	if err != nil {
		return nil, "", fmt.Errorf("list the operator's Deployments (%s): %w", managerSelectorText, err)
	}
	return l.Items, where, nil
}
