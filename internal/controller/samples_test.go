package controller

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
	"github.com/outbox-operator/outbox-operator/internal/contract"
)

var _ = Describe("config/samples", func() {
	It("pass the CRD validation and reconcile", func() {
		ns := newNamespace()
		files, err := filepath.Glob(filepath.Join("..", "..", "config", "samples", "outbox_*.yaml"))
		Expect(err).NotTo(HaveOccurred())
		Expect(files).To(HaveLen(5))
		kinds := map[string]int{}
		for _, f := range files {
			b, err := os.ReadFile(f)
			Expect(err).NotTo(HaveOccurred())
			dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
			for {
				u := &unstructured.Unstructured{}
				if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
					break
				} else {
					Expect(err).NotTo(HaveOccurred(), f)
				}
				if len(u.Object) == 0 {
					continue
				}
				u.SetNamespace(ns)
				Expect(k8sClient.Create(suiteCtx, u)).To(Succeed(), "%s: %s/%s", f, u.GetKind(), u.GetName())
				kinds[u.GetKind()]++
			}
		}
		Expect(kinds).To(HaveKeyWithValue("OutboxPipeline", 2))   // Polling and LogicalReplication
		Expect(kinds).To(HaveKeyWithValue("DeadLetterReplay", 2)) // an outbox and a consumer replay
		Expect(kinds).To(HaveKeyWithValue("RetentionPolicy", 1))

		By("the sample pipeline gets its Deployment (its database is not reachable here)")
		Eventually(func(g Gomega) {
			var p outboxv1.OutboxPipeline
			g.Expect(k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: ns, Name: "orders"}, &p)).To(Succeed())
			g.Expect(p.Status.DeploymentName).To(Equal("orders-relay"))
			g.Expect(p.Spec.Source.Migrate).To(BeTrue())
			g.Expect(p.Spec.Source.Contract).To(Equal(outboxv1.ContractV2)) // the default: the sample names none
		}).Should(Succeed())

		By("the LogicalReplication sample renders its mode and holds the slot finalizer")
		Eventually(func(g Gomega) {
			var p outboxv1.OutboxPipeline
			g.Expect(k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: ns, Name: "payments"}, &p)).To(Succeed())
			g.Expect(p.Spec.Source.Mode).To(Equal(outboxv1.SourceLogicalReplication))
			g.Expect(p.Finalizers).To(ContainElement(SlotFinalizer))
			var d appsv1.Deployment
			g.Expect(k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: ns, Name: "payments-relay"}, &d)).To(Succeed())
			g.Expect(envMap(d.Spec.Template.Spec.Containers[0])).To(HaveKey(contract.EnvSlot))
		}).Should(Succeed())
	})
})
