package controller

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
)

func TestResultForRefProblem(t *testing.T) {
	var conds []metav1.Condition
	boom := errors.New("apiserver timeout")
	if res, err := resultForRefProblem(fmt.Errorf("get: %w", boom), &conds, 1); !errors.Is(err, boom) || res.RequeueAfter != 0 || len(conds) != 0 {
		t.Fatalf("other errors pass through untouched: %v %v %v", res, err, conds)
	}

	problem := &refProblem{outboxv1.ReasonPipelineNotFound, "create it"}
	res, err := resultForRefProblem(fmt.Errorf("resolve: %w", problem), &conds, 3)
	if err != nil || res.RequeueAfter != 10*time.Second {
		t.Fatalf("first sighting: %v %v", res, err)
	}
	c := meta.FindStatusCondition(conds, outboxv1.ConditionReady)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != outboxv1.ReasonPipelineNotFound || c.Message != "create it" || c.ObservedGeneration != 3 {
		t.Fatalf("condition %+v", c)
	}

	// The same reason persisting backs off from when it first appeared.
	c.LastTransitionTime = metav1.NewTime(time.Now().Add(-time.Hour))
	if res, _ := resultForRefProblem(problem, &conds, 3); res.RequeueAfter != 5*time.Minute {
		t.Fatalf("persisting problem requeues after %v, want the 5m cap", res.RequeueAfter)
	}
	// A different reason starts over.
	if res, _ := resultForRefProblem(&refProblem{outboxv1.ReasonSecretNotFound, "x"}, &conds, 3); res.RequeueAfter != 10*time.Second {
		t.Fatalf("new problem requeues after %v", res.RequeueAfter)
	}
}
