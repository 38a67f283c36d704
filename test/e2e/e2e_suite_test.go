// Package e2e runs the product end to end on one machine: the manager binary against
// a real kube-apiserver (envtest), the relay Deployment the operator renders run as
// local processes with the pod template's command and env, a private PostgreSQL and a
// Kafka-protocol broker.
package e2e

import (
	"os"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/outbox-operator/outbox-operator/internal/testenv/localstack"
)

var stack *localstack.Stack

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "outbox-operator e2e")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	var err error
	stack, err = localstack.Start(localstack.Options{Out: GinkgoWriter})
	Expect(err).NotTo(HaveOccurred())
	Expect(stack.StartManager()).To(Succeed())
	DeferCleanup(func() {
		stack.Stop()
		_ = os.RemoveAll(stack.WorkDir)
	})
})
