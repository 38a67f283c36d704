package controller

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
)

func consumerReplay(mut ...func(*outboxv1.DeadLetterReplay)) *outboxv1.DeadLetterReplay {
	r := &outboxv1.DeadLetterReplay{
		ObjectMeta: metav1.ObjectMeta{Name: "fix-billing", Namespace: "shop", UID: "u-2"},
		Spec: outboxv1.DeadLetterReplaySpec{
			Consumer: &outboxv1.ConsumerTarget{Group: "billing",
				DatabaseSecretRef: outboxv1.SecretKeyRef{Name: "billing-db", Key: "dsn"}},
			Selector: outboxv1.ReplaySelector{ErrorCode: "permanent"},
			Reason:   "INC-9 currency table fixed",
		},
	}
	for _, m := range mut {
		m(r)
	}
	return r.WithDefaults()
}

func TestDesiredConsumerReplayJob(t *testing.T) {
	after := metav1.NewTime(time.Date(2026, 3, 1, 8, 0, 0, 0, time.FixedZone("CET", 3600)))
	before := metav1.NewTime(time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC))
	cases := []struct {
		name     string
		r        *outboxv1.DeadLetterReplay
		image    string
		args     []string
		wantImg  string
		wantFrom string // the DSN's Secret name/key
	}{
		{"defaults", consumerReplay(), "", []string{"inbox-replay", "--group=billing", "--schema=public",
			"--replay-id=shop/fix-billing/u-2", "--reason=INC-9 currency table fixed", "--rate=100", "--limit=1000",
			"--error-code=permanent"}, DefaultRelayImage, "billing-db/dsn"},
		{"every selector field", consumerReplay(func(r *outboxv1.DeadLetterReplay) {
			r.Spec.Consumer.Schema, r.Spec.Consumer.Limit, r.Spec.Consumer.Group = "inbox", 50, "-starts-with-dash"
			r.Spec.Consumer.DatabaseSecretRef = outboxv1.SecretKeyRef{Name: "consumer", Key: "url"}
			r.Spec.Rate, r.Spec.RequestedBy = 5, "oncall@example.com"
			r.Spec.Selector = outboxv1.ReplaySelector{EventIDs: []string{"e1", "e2"}, EventType: "PaymentSucceeded",
				ErrorCode: "handler_panic", CreatedAfter: &after, CreatedBefore: &before}
		}), "img:2", []string{"inbox-replay", "--group=-starts-with-dash", "--schema=inbox",
			"--replay-id=shop/fix-billing/u-2", "--reason=INC-9 currency table fixed", "--rate=5", "--limit=50",
			"--requested-by=oncall@example.com", "--event-ids=e1,e2", "--event-type=PaymentSucceeded",
			"--error-code=handler_panic", "--parked-after=2026-03-01T07:00:00Z", "--parked-before=2026-03-02T00:00:00Z"},
			"img:2", "consumer/url"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			j := DesiredConsumerReplayJob(c.r, c.image)
			if j.Name != "fix-billing-replay" || j.Namespace != "shop" || *j.Spec.BackoffLimit != 3 {
				t.Errorf("job %s/%s backoff %d", j.Namespace, j.Name, *j.Spec.BackoffLimit)
			}
			if j.Labels[LabelManagedBy] != ManagedBy || j.Labels["outbox.dev/replay"] != "fix-billing" {
				t.Errorf("labels %v: the manager caches only Jobs labelled managed-by", j.Labels)
			}
			spec := j.Spec.Template.Spec
			assertRestricted(t, spec)
			if spec.ServiceAccountName != "" || spec.RestartPolicy != corev1.RestartPolicyNever {
				t.Errorf("service account %q restart %s", spec.ServiceAccountName, spec.RestartPolicy)
			}
			ctr := spec.Containers[0]
			if !slices.Equal(ctr.Args, c.args) {
				t.Errorf("args\n got %q\nwant %q", ctr.Args, c.args)
			}
			if ctr.Image != c.wantImg || ctr.Name != "inbox-replay" {
				t.Errorf("container %s image %s", ctr.Name, ctr.Image)
			}
			e := envMap(ctr)
			ref := e["INBOX_DSN"].ValueFrom
			if len(e) != 1 || ref == nil || ref.SecretKeyRef == nil || ref.SecretKeyRef.Name+"/"+ref.SecretKeyRef.Key != c.wantFrom {
				t.Errorf("env %+v: want only INBOX_DSN from Secret %s", ctr.Env, c.wantFrom)
			}
		})
	}
}

// The pod of a pipeline's Job keeps the pipeline's settings (pipelinePod).
func TestPipelineJobPodKeepsThePipelinesSettings(t *testing.T) {
	p := testPipeline(func(p *outboxv1.OutboxPipeline) {
		p.Spec.NodeSelector = map[string]string{"pool": "jobs"}
		p.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "registry"}}
		p.Spec.Sink.TLS = &outboxv1.KafkaTLS{Enabled: true, CASecretRef: &outboxv1.SecretKeyRef{Name: "ca", Key: "ca.crt"}}
	})
	spec := DesiredReplayJob(consumerReplay(func(r *outboxv1.DeadLetterReplay) {
		r.Spec.Consumer, r.Spec.PipelineRef = nil, outboxv1.PipelineReference{Name: "orders"}
	}), p, "img:1").Spec.Template.Spec
	if spec.ServiceAccountName != "orders-relay" || spec.NodeSelector["pool"] != "jobs" || spec.ImagePullSecrets[0].Name != "registry" {
		t.Errorf("pod %+v lost the pipeline's settings", spec)
	}
	if len(spec.Volumes) != 2 || spec.Volumes[0].Name != kafkaCAVolume || spec.Volumes[1].Name != "tmp" ||
		len(spec.Containers[0].VolumeMounts) != 2 {
		t.Errorf("volumes %+v mounts %+v", spec.Volumes, spec.Containers[0].VolumeMounts)
	}
}
