// Package cluster runs the product as users run it: config/default applied to a real
// one-node cluster (hack/cluster: kubelet, containerd, runc), the pods started from the
// images of `make images`, a private PostgreSQL and the dev broker on the host, reached
// from the pod network at the node's address. `make e2e-cluster` brings the cluster up,
// runs this suite and takes the cluster down; without it the suite skips and says why.
package cluster

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
	"github.com/outbox-operator/outbox-operator/internal/testenv/pgtest"
)

// env is what hack/cluster/e2e.sh hands the suite.
type env struct {
	kubeconfig, kubectl, ctr, containerdSock, nodeIP, podCIDR, root string
}

var (
	cl       env
	k8s      client.Client
	pg       *pgtest.Server
	pgPass   = "e2e-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	brokerAt string
)

func TestCluster(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "outbox-operator on a one-node cluster")
}

var _ = BeforeSuite(func() {
	cl = env{
		kubeconfig: os.Getenv("OUTBOX_CLUSTER_KUBECONFIG"), kubectl: os.Getenv("OUTBOX_CLUSTER_KUBECTL"),
		ctr: os.Getenv("OUTBOX_CLUSTER_CTR"), containerdSock: os.Getenv("OUTBOX_CLUSTER_CONTAINERD_SOCK"),
		nodeIP: os.Getenv("OUTBOX_CLUSTER_NODE_IP"), podCIDR: os.Getenv("OUTBOX_CLUSTER_POD_CIDR"),
	}
	if cl.kubeconfig == "" {
		Skip("no local cluster: `make e2e-cluster` starts one (hack/cluster) and runs this suite against it")
	}
	root, err := filepath.Abs("../..")
	Expect(err).NotTo(HaveOccurred())
	cl.root = root

	cfg, err := clientcmd.BuildConfigFromFlags("", cl.kubeconfig)
	Expect(err).NotTo(HaveOccurred())
	scheme := runtime.NewScheme()
	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(outboxv1.AddToScheme(scheme)).To(Succeed())
	k8s, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())

	// PostgreSQL on the host, reachable from pods at the node address with a password.
	pg, err = pgtest.Start(pgtest.Options{
		Listen: []string{cl.nodeIP},
		HBA:    []string{"host all all " + cl.podCIDR + " scram-sha-256"},
		Logf:   func(f string, a ...any) { fmt.Fprintf(GinkgoWriter, f+"\n", a...) },
	})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(pg.Stop)
	admin, err := sql.Open("postgres", pg.DSN("postgres"))
	Expect(err).NotTo(HaveOccurred())
	_, err = admin.Exec(`ALTER USER postgres PASSWORD '` + pgPass + `'`)
	Expect(err).NotTo(HaveOccurred())
	Expect(admin.Close()).To(Succeed())

	startBroker()
	installOperator()
})

// startBroker runs the dev broker on the host at the node address, advertising that
// address so pods and the test reach the same listener.
func startBroker() {
	bin := filepath.Join(GinkgoT().TempDir(), "devbroker")
	build := exec.Command("go", "build", "-o", bin, "./hack/devbroker")
	build.Dir = cl.root
	out, err := build.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), string(out))
	l, err := net.Listen("tcp", net.JoinHostPort(cl.nodeIP, "0"))
	Expect(err).NotTo(HaveOccurred())
	brokerAt = l.Addr().String()
	Expect(l.Close()).To(Succeed())
	cmd := exec.Command(bin, "--listen", brokerAt, "--advertise", brokerAt, "--partitions", "3", "--topics", "orders,orders-replayed")
	cmd.Stdout, cmd.Stderr = GinkgoWriter, GinkgoWriter
	Expect(cmd.Start()).To(Succeed())
	DeferCleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	Eventually(func() error {
		c, err := net.DialTimeout("tcp", brokerAt, time.Second)
		if err == nil {
			c.Close()
		}
		return err
	}, 20*time.Second, 100*time.Millisecond).Should(Succeed())
}

// installOperator applies config/default exactly as the README tells users to; its
// kustomization already names the local images (outbox-operator:dev and
// RELAY_IMAGE=outbox-relayworker:dev), which cluster-up imported into containerd.
func installOperator() {
	out, err := kubectl("apply", "--server-side", "-k", filepath.Join(cl.root, "config/default"))
	Expect(err).NotTo(HaveOccurred(), out)
	out, err = kubectl("-n", "outbox-system", "rollout", "status", "deployment/outbox-operator-controller-manager", "--timeout=180s")
	Expect(err).NotTo(HaveOccurred(), out)
}

// kubectl runs the cluster's kubectl with the admin kubeconfig.
func kubectl(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, cl.kubectl, append([]string{"--kubeconfig", cl.kubeconfig}, args...)...)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Run()
	return buf.String(), err
}

// getColumns prints `kubectl get <what>` and returns the row of name keyed by header.
func getColumns(ns, what, name string) (map[string]string, error) {
	out, err := kubectl("-n", ns, "get", what, name)
	if err != nil {
		return nil, fmt.Errorf("%v: %s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		return nil, fmt.Errorf("want a header and one row, got %q", out)
	}
	// Columns are aligned and a value may be empty (OLDEST with nothing pending), so
	// cut the row at the header's column starts rather than at spaces.
	head, row := lines[0], lines[1]+strings.Repeat(" ", len(lines[0]))
	m := map[string]string{}
	names := strings.Fields(head)
	at := 0
	for i, h := range names {
		start := at + strings.Index(head[at:], h)
		end := len(row)
		if i+1 < len(names) {
			end = start + len(h) + strings.Index(head[start+len(h):], names[i+1])
		}
		m[h] = strings.TrimSpace(row[start:end])
		at = start + len(h)
	}
	return m, nil
}

// deploymentRolledOut is true once every replica runs the newest template and is ready.
func deploymentRolledOut(d *appsv1.Deployment) bool {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	return d.Status.ObservedGeneration >= d.Generation && d.Status.UpdatedReplicas == want &&
		d.Status.ReadyReplicas == want && d.Status.Replicas == want
}
