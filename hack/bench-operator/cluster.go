// cluster.go: the control plane (envtest's kube-apiserver + etcd with the CRDs), the
// benchmark's own admin client (its requests counted, to subtract them), and the
// manager's identity: a ServiceAccount user of outbox-system bound to config/rbac's
// roles, as config/default installs them.

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/outbox-operator/outbox-operator/internal/testenv/localstack"
)

// What config/default does to config/rbac: everything in this namespace, every name
// with this prefix.
const (
	operatorNS   = "outbox-system"
	namePrefix   = "outbox-operator-"
	managerSA    = namePrefix + "controller-manager"
	managerUser  = "system:serviceaccount:" + operatorNS + ":" + managerSA
	leaseName    = "outbox-operator.outbox.dev"
	rbacDir      = "config/rbac"
	managerYAML  = "config/manager/manager.yaml"
	kustomizedNS = "system"
)

// rbacFiles are the manager's roles and bindings (the editor/viewer roles are for users).
var rbacFiles = []string{"role.yaml", "role_binding.yaml", "leader_election_role.yaml", "leader_election_role_binding.yaml"}

type cluster struct {
	env        *envtest.Environment
	admin      client.Client
	adminCfg   *rest.Config
	own        *requestCounter // the benchmark's requests
	kubeconfig string          // the manager's
}

func startCluster(root, dir string) (*cluster, error) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = filepath.Join(root, "bin", "k8s")
	}
	c := &cluster{env: &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
	}, own: newRequestCounter()}
	cfg, err := c.env.Start()
	if err != nil {
		return c, fmt.Errorf("start control plane (run `make envtest` first?): %w", err)
	}
	c.adminCfg = rest.CopyConfig(cfg)
	c.adminCfg.Wrap(c.own.wrap)
	if c.admin, err = client.New(c.adminCfg, client.Options{Scheme: localstack.Scheme()}); err != nil {
		return c, err
	}
	user, err := c.env.AddUser(envtest.User{Name: managerUser,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + operatorNS}}, nil)
	if err != nil {
		return c, fmt.Errorf("add the manager's user: %w", err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		return c, err
	}
	c.kubeconfig = filepath.Join(dir, "manager.kubeconfig")
	if err := os.WriteFile(c.kubeconfig, kc, 0o600); err != nil {
		return c, err
	}
	return c, c.installRBAC(root)
}

func (c *cluster) stop() {
	if c.env != nil {
		_ = c.env.Stop()
	}
}

// installRBAC creates outbox-system and config/rbac's manager roles and bindings there.
func (c *cluster) installRBAC(root string) error {
	ctx := context.Background()
	ns := &corev1.Namespace{}
	ns.Name = operatorNS
	if err := c.admin.Create(ctx, ns); err != nil {
		return err
	}
	for _, f := range rbacFiles {
		objs, err := readManifests(filepath.Join(root, rbacDir, f))
		if err != nil {
			return err
		}
		for _, o := range objs {
			kustomize(o)
			if err := c.admin.Create(ctx, o); err != nil {
				return fmt.Errorf("%s: create %s %s: %w", f, o.GetKind(), o.GetName(), err)
			}
		}
	}
	return nil
}

var docSep = regexp.MustCompile(`(?m)^---\s*$`)

// readManifests decodes every YAML document of a file.
func readManifests(path string) ([]*unstructured.Unstructured, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, doc := range docSep.Split(string(b), -1) {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
	return out, nil
}

// kustomize does to o what config/default's namespace and namePrefix do to the RBAC
// objects: names (and the names they refer to) prefixed, "system" replaced.
func kustomize(o *unstructured.Unstructured) {
	o.SetName(namePrefix + o.GetName())
	if o.GetNamespace() == kustomizedNS {
		o.SetNamespace(operatorNS)
	}
	if ref, ok := o.Object["roleRef"].(map[string]any); ok {
		ref["name"] = namePrefix + ref["name"].(string)
	}
	subjects, _ := o.Object["subjects"].([]any)
	for _, s := range subjects {
		if m, ok := s.(map[string]any); ok {
			m["name"] = namePrefix + m["name"].(string)
			if m["namespace"] == kustomizedNS {
				m["namespace"] = operatorNS
			}
		}
	}
}
