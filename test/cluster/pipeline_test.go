package cluster

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
	"github.com/outbox-operator/outbox-operator/internal/contract"
	"github.com/outbox-operator/outbox-operator/internal/testenv/localstack"
)

const ns = "shop"

// loadSample decodes config/samples/<file> into objs, in document order.
func loadSample(file string, objs ...client.Object) {
	Expect(localstack.DecodeSample(stack.Root, file, ns, objs...)).To(Succeed())
}

var _ = Describe("the operator installed from config/default on a real node", Ordered, func() {
	var (
		ctx      = context.Background()
		db       *sql.DB
		pipeline outboxv1.OutboxPipeline
		orders   *arrivals
		relayKey = client.ObjectKey{Namespace: ns, Name: "orders-relay"}
	)

	relayPods := func(g Gomega) []corev1.Pod {
		var pods corev1.PodList
		g.Expect(k8s.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/instance": "orders", "app.kubernetes.io/component": "relay"})).To(Succeed())
		var live []corev1.Pod
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				live = append(live, p)
			}
		}
		return live
	}
	waitRolledOut := func() *appsv1.Deployment {
		var d appsv1.Deployment
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, relayKey, &d)).To(Succeed())
			g.Expect(deploymentRolledOut(&d)).To(BeTrue(), "deployment status %+v", d.Status)
			g.Expect(relayPods(g)).To(HaveLen(int(*d.Spec.Replicas)))
		}, 3*time.Minute, time.Second).Should(Succeed())
		return &d
	}

	BeforeAll(func() {
		// Contract v1 pinned: the specs below write and read v1's status columns; the
		// sample as is (the default, v2) is what `make demo` runs.
		db = applyTenant(ctx, ns, "outbox_v1alpha1_outboxpipeline.yaml", &pipeline, func(p *outboxv1.OutboxPipeline) {
			p.Spec.Source.Contract = outboxv1.ContractV1
		})
		cctx, cancel := context.WithCancel(ctx)
		DeferCleanup(cancel)
		orders = consume(cctx, "orders")
	})

	It("runs the relay pods from the image, read-only, without an API token, and shows them Ready", func() {
		d := waitRolledOut()
		Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal("outbox-relayworker:dev"))
		Eventually(func(g Gomega) {
			row, err := getColumns(ns, "outboxpipelines", "orders")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(row).To(HaveKeyWithValue("READY", "True"))
			g.Expect(row).To(HaveKeyWithValue("WORKERS", "2/2"))
		}, time.Minute, time.Second).Should(Succeed())

		for _, p := range relayPods(Default) {
			Expect(p.Spec.AutomountServiceAccountToken).To(HaveValue(BeFalse()))
			var relay *corev1.ContainerStatus
			for i := range p.Status.ContainerStatuses {
				if p.Status.ContainerStatuses[i].Name == "relay" {
					relay = &p.Status.ContainerStatuses[i]
				}
			}
			Expect(relay).NotTo(BeNil(), "pod %s has no relay container", p.Name)
			Expect(relay.Ready).To(BeTrue())
			Expect(relay.ImageID).NotTo(BeEmpty())
			// What the kernel says about the running process, not what the spec asks for.
			proc := containerProc(strings.TrimPrefix(relay.ContainerID, "containerd://"))
			Expect(rootMountOptions(proc)).To(ContainElement("ro"), "pod %s: / is writable", p.Name)
			Expect(filepath.Join(proc, "root/var/run/secrets/kubernetes.io/serviceaccount")).NotTo(BeAnExistingFile())
			Expect(filepath.Join(proc, "root/relayworker")).To(BeAnExistingFile())
			Expect(procUID(proc)).To(Equal("65532"))
		}
	})

	It("delivers every event a producer commits, in order per aggregate", func() {
		ids, err := produce(ctx, db, "orders", "first", 20, 10, 0)
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() []string { return orders.missing(ids) }, 90*time.Second, 500*time.Millisecond).Should(BeEmpty())
		Expect(orders.orderViolations()).To(BeEmpty())
		Eventually(func(g Gomega) {
			var p outboxv1.OutboxPipeline
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(&pipeline), &p)).To(Succeed())
			g.Expect(p.Status.Pending).To(BeZero())
			g.Expect(p.Status.Dead).To(BeZero())
		}, time.Minute, time.Second).Should(Succeed())
	})

	It("rolls the Deployment when the spec changes", func() {
		before := waitRolledOut()
		oldPods := map[string]bool{}
		for _, p := range relayPods(Default) {
			oldPods[p.Name] = true
		}
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(&pipeline), &pipeline)).To(Succeed())
		patch := client.MergeFrom(pipeline.DeepCopy())
		pipeline.Spec.Relay.BatchSize = 250
		Expect(k8s.Patch(ctx, &pipeline, patch)).To(Succeed())
		Eventually(func(g Gomega) {
			var d appsv1.Deployment
			g.Expect(k8s.Get(ctx, relayKey, &d)).To(Succeed())
			g.Expect(d.Generation).To(BeNumerically(">", before.Generation))
			g.Expect(deploymentRolledOut(&d)).To(BeTrue())
			for _, p := range relayPods(g) {
				g.Expect(oldPods).NotTo(HaveKey(p.Name))
				g.Expect(p.Spec.Containers[0].Env).To(ContainElement(corev1.EnvVar{Name: contract.EnvBatchSize, Value: "250"}))
			}
		}, 3*time.Minute, time.Second).Should(Succeed())
	})

	It("loses nothing when a relay pod is deleted mid-stream", func() {
		waitRolledOut()
		type result struct {
			ids []string
			err error
		}
		done := make(chan result, 1)
		go func() {
			defer GinkgoRecover()
			ids, err := produce(ctx, db, "orders", "killed", 50, 40, 4*time.Millisecond)
			done <- result{ids, err}
		}()
		time.Sleep(3 * time.Second)
		victim := relayPods(Default)[0]
		Expect(k8s.Delete(ctx, &victim)).To(Succeed())
		r := <-done
		Expect(r.err).NotTo(HaveOccurred())
		Eventually(func() []string { return orders.missing(r.ids) }, 2*time.Minute, time.Second).Should(BeEmpty())
		Expect(orders.orderViolations()).To(BeEmpty())
		GinkgoWriter.Printf("pod %s deleted mid-stream: %d events, lost 0, duplicates %d\n", victim.Name, len(r.ids), orders.duplicates(r.ids))
		waitRolledOut()
	})

	It("fires the RetentionPolicy CronJob on its schedule, and its Job archives", func() {
		// Events sent two hours ago are past the shortest retention the API allows.
		res, err := db.Exec(`UPDATE outbox_event SET sent_at = now() - interval '2 hours' WHERE status = 'SENT' AND aggregate_id LIKE 'first-%'`)
		Expect(err).NotTo(HaveOccurred())
		old, _ := res.RowsAffected()
		Expect(old).To(BeEquivalentTo(200))
		var rp outboxv1.RetentionPolicy
		loadSample("outbox_v1alpha1_retentionpolicy.yaml", &rp)
		rp.Spec.Schedule = "* * * * *"
		rp.Spec.SentRetention = &metav1.Duration{Duration: time.Hour}
		Expect(k8s.Create(ctx, &rp)).To(Succeed())
		Eventually(func(g Gomega) {
			var n int
			g.Expect(db.QueryRow(`SELECT count(*) FROM outbox_event_archive WHERE aggregate_id LIKE 'first-%'`).Scan(&n)).To(Succeed())
			g.Expect(n).To(Equal(200))
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(&rp), &rp)).To(Succeed())
			g.Expect(rp.Status.LastSentArchived).To(HaveValue(BeNumerically(">=", 200)))
		}, 3*time.Minute, 2*time.Second).Should(Succeed())
		// The CronJob controller started it: a Job of the CronJob ran to completion.
		var jobs batchv1.JobList
		Expect(k8s.List(ctx, &jobs, client.InNamespace(ns))).To(Succeed())
		Expect(jobs.Items).To(ContainElement(And(
			HaveField("ObjectMeta.OwnerReferences", ContainElement(HaveField("Name", "orders-retention"))),
			HaveField("Status.Succeeded", BeNumerically(">=", 1)))))
		// The newer events stay: their retention has not passed.
		var left int
		Expect(db.QueryRow(`SELECT count(*) FROM outbox_event WHERE aggregate_id LIKE 'killed-%'`).Scan(&left)).To(Succeed())
		Expect(left).To(Equal(2000))
		rp.Spec.Suspend = true
		Expect(k8s.Update(ctx, &rp)).To(Succeed())
	})

	It("replays dead letters with a DeadLetterReplay Job", func() {
		var ids []string
		for i := 0; i < 5; i++ {
			id := fmt.Sprintf("dead-%d", i)
			ids = append(ids, id)
			_, err := db.Exec(`INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, aggregate_version, event_type,
				destination, message_key, payload, status, retry_count, last_error_code, last_error_message, created_at)
				VALUES ($1, 'Order', $1, 1, 'OrderPlaced', 'orders-replayed', $1, '{}', 'DEAD', 3, 'MESSAGE_TOO_LARGE', 'too big', '2026-06-01T00:00:00Z')`, id)
			Expect(err).NotTo(HaveOccurred())
		}
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		replayed := consume(cctx, "orders-replayed")
		var replay outboxv1.DeadLetterReplay
		loadSample("outbox_v1alpha1_deadletterreplay.yaml", &replay)
		replay.Spec.CanarySize = ptr.To[int32](2)
		Expect(k8s.Create(ctx, &replay)).To(Succeed())
		Eventually(func() []string { return replayed.missing(ids) }, 3*time.Minute, time.Second).Should(BeEmpty())
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(&replay), &replay)).To(Succeed())
			g.Expect(replay.Status.Phase).To(BeEquivalentTo("Succeeded"))
			g.Expect(replay.Status.Succeeded).To(BeEquivalentTo(5))
		}, 2*time.Minute, time.Second).Should(Succeed())
	})

	It("hands leadership over when the operator's leader pod goes, and keeps reconciling", func() {
		lease := func(g Gomega) string {
			var l coordinationv1.Lease
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "outbox-system", Name: "outbox-operator.outbox.dev"}, &l)).To(Succeed())
			g.Expect(l.Spec.HolderIdentity).NotTo(BeNil())
			return *l.Spec.HolderIdentity
		}
		holder := lease(Default)
		leaderPod := strings.SplitN(holder, "_", 2)[0]
		var pod corev1.Pod
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "outbox-system", Name: leaderPod}, &pod)).To(Succeed())
		Expect(k8s.Delete(ctx, &pod)).To(Succeed())
		Eventually(func(g Gomega) {
			h := lease(g)
			g.Expect(h).NotTo(BeEmpty())
			g.Expect(strings.SplitN(h, "_", 2)[0]).NotTo(Equal(leaderPod))
		}, 2*time.Minute, time.Second).Should(Succeed())

		// The new leader acts on a change.
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(&pipeline), &pipeline)).To(Succeed())
		patch := client.MergeFrom(pipeline.DeepCopy())
		pipeline.Spec.Relay.Replicas = ptr.To[int32](1)
		Expect(k8s.Patch(ctx, &pipeline, patch)).To(Succeed())
		Eventually(func(g Gomega) {
			row, err := getColumns(ns, "outboxpipelines", "orders")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(row).To(HaveKeyWithValue("WORKERS", "1/1"))
		}, 2*time.Minute, time.Second).Should(Succeed())
		Expect(stack.RolloutStatus("outbox-system", "outbox-operator-controller-manager", 2*time.Minute)).To(Succeed())
	})
})

// containerProc is /proc/<pid> of a running container's init process, from containerd.
func containerProc(id string) string {
	out, err := exec.Command(stack.Ctr, "--address", stack.ContainerdSock, "--namespace", "k8s.io", "tasks", "ls").Output()
	Expect(err).NotTo(HaveOccurred())
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[0] == id && f[2] == "RUNNING" {
			return "/proc/" + f[1]
		}
	}
	Fail("container " + id + " has no running task:\n" + string(out))
	return ""
}

// rootMountOptions are the per-mount options of the process's "/".
func rootMountOptions(proc string) []string {
	b, err := os.ReadFile(filepath.Join(proc, "mountinfo"))
	Expect(err).NotTo(HaveOccurred())
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 5 && f[4] == "/" {
			return strings.Split(f[5], ",")
		}
	}
	Fail("no / in " + proc + "/mountinfo")
	return nil
}

// procUID is the process's real user id.
func procUID(proc string) string {
	b, err := os.ReadFile(filepath.Join(proc, "status"))
	Expect(err).NotTo(HaveOccurred())
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "Uid:") {
			return strings.Fields(line)[1]
		}
	}
	return ""
}
