package plugin

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"
	authnv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
	"github.com/outbox-operator/outbox-operator/internal/redact"
)

// kubeFlags are kubectl's connection flags: --kubeconfig, --context, -n/--namespace,
// --as, --token and the rest, resolved with the usual loading rules ($KUBECONFIG,
// ~/.kube/config), so the plugin talks to the cluster kubectl would.
type kubeFlags struct {
	rules         *clientcmd.ClientConfigLoadingRules
	overrides     *clientcmd.ConfigOverrides
	allNamespaces bool
}

func bindKubeFlags(fs *pflag.FlagSet) *kubeFlags {
	kf := &kubeFlags{rules: clientcmd.NewDefaultClientConfigLoadingRules(), overrides: &clientcmd.ConfigOverrides{}}
	fs.StringVar(&kf.rules.ExplicitPath, "kubeconfig", "", "path to the kubeconfig file")
	clientcmd.BindOverrideFlags(kf.overrides, fs, clientcmd.RecommendedConfigOverrideFlags(""))
	fs.BoolVarP(&kf.allNamespaces, "all-namespaces", "A", false, "every namespace (status only)")
	return kf
}

// session is what every command needs: a client, the namespace and who the user is.
type session struct {
	c         client.Client
	namespace string
	all       bool
	// user is the kubeconfig user name of the current context ("" when unknown), the
	// fallback of whoami.
	user string
}

var scheme = newScheme()

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := outboxv1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

func (kf *kubeFlags) session() (*session, error) {
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(kf.rules, kf.overrides)
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("load the kubeconfig (--kubeconfig, $KUBECONFIG or ~/.kube/config): %w", err)
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, fmt.Errorf("resolve the namespace from the kubeconfig: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("connect to the cluster at %s: %w", cfg.Host, err)
	}
	return &session{c: c, namespace: ns, all: kf.allNamespaces, user: currentUser(cc, kf.overrides)}, nil
}

// currentUser is the kubeconfig user of the context in use, best effort.
func currentUser(cc clientcmd.ClientConfig, o *clientcmd.ConfigOverrides) string {
	if o.AuthInfo.Impersonate != "" {
		return o.AuthInfo.Impersonate
	}
	if o.Context.AuthInfo != "" {
		return o.Context.AuthInfo
	}
	raw, err := cc.RawConfig()
	if err != nil {
		return ""
	}
	name := raw.CurrentContext
	if o.CurrentContext != "" {
		name = o.CurrentContext
	}
	if ctx := raw.Contexts[name]; ctx != nil {
		return ctx.AuthInfo
	}
	return ""
}

// whoami is the user name the API server authenticates these credentials as (what
// `kubectl auth whoami` prints): a replay records it as requestedBy, and the
// kubeconfig's own user name is often just "kubernetes-admin". Falls back to that
// name when the server cannot say.
func (s *session) whoami(ctx context.Context) string {
	r := &authnv1.SelfSubjectReview{}
	if err := s.c.Create(ctx, r); err == nil && r.Status.UserInfo.Username != "" {
		return redact.Truncate(r.Status.UserInfo.Username, maxRequestedBy)
	}
	return s.user
}

// maxRequestedBy is the CRD's limit on spec.requestedBy.
const maxRequestedBy = 200
