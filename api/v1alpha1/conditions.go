/*
Copyright 2026 The outbox-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// GetConditions returns the status conditions; the operator's shared status writer
// uses it to emit Events on condition transitions for every kind alike.
func (s *OutboxPipelineStatus) GetConditions() []metav1.Condition { return s.Conditions }

// GetConditions returns the status conditions (see OutboxPipelineStatus.GetConditions).
func (s *DeadLetterReplayStatus) GetConditions() []metav1.Condition { return s.Conditions }

// GetConditions returns the status conditions (see OutboxPipelineStatus.GetConditions).
func (s *RetentionPolicyStatus) GetConditions() []metav1.Condition { return s.Conditions }
