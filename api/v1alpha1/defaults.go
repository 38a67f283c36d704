/*
Copyright 2026 The outbox-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package v1alpha1

import (
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/outbox-operator/outbox-operator/internal/contract"
)

// Defaults mirrored from the +kubebuilder:default markers. The API server applies the
// markers; these let Go code (controllers, tests) treat an object that never went
// through the API server the same way. The worker's own defaults come from
// internal/contract; TestCRDDefaultsAreTheWorkerContract checks that the markers agree.
const (
	DefaultSchema                   = contract.DefaultSchema
	DefaultTable                    = contract.DefaultTable
	DefaultReplicas           int32 = 2
	DefaultBatchSize          int32 = contract.DefaultBatchSize
	DefaultLease                    = contract.DefaultLease
	DefaultPollInterval             = contract.DefaultPollInterval
	DefaultMaxAttempts        int32 = contract.DefaultMaxAttempts
	DefaultMinBackoff               = contract.DefaultMinBackoff
	DefaultMaxBackoff               = contract.DefaultMaxBackoff
	DefaultUnknownTopicGrace        = contract.DefaultUnknownTopicGrace
	DefaultLogLevel                 = contract.DefaultLogLevel
	DefaultStatusInterval           = 15 * time.Second
	DefaultOldestPendingAge         = 5 * time.Minute
	DefaultDeadGrowthWindow         = 15 * time.Minute
	DefaultReplayRate         int32 = contract.DefaultReplayRate
	DefaultCanarySize         int32 = contract.DefaultCanarySize
	DefaultMaxNewDeadPercent  int32 = contract.DefaultMaxNewDeadPercent
	DefaultInboxReplayLimit   int32 = contract.DefaultInboxReplayLimit
	DefaultRetentionSchedule        = "15 * * * *"
	DefaultSentRetention            = contract.DefaultSentRetention
	DefaultDeadRetention            = contract.DefaultDeadRetention
	DefaultRetentionBatchSize int32 = contract.DefaultArchiveBatchSize
	DefaultSourceMode               = SourcePolling
	DefaultContract                 = ContractV2
	DefaultMaxSlotLag               = "1Gi"
	DefaultCDCHandoverAfter         = contract.DefaultHandoverAfter
	DefaultMessageFormat            = MessageNative
)

func dur(p **metav1.Duration, d time.Duration) {
	if *p == nil {
		*p = &metav1.Duration{Duration: d}
	}
}

func i32(p **int32, v int32) {
	if *p == nil {
		*p = &v
	}
}

// WithDefaults returns a deep copy of p with every unset defaulted field filled in.
func (p *OutboxPipeline) WithDefaults() *OutboxPipeline {
	c := p.DeepCopy()
	s := &c.Spec
	if s.Source.Schema == "" {
		s.Source.Schema = DefaultSchema
	}
	if s.Source.Table == "" {
		s.Source.Table = DefaultTable
	}
	if s.Source.Mode == "" {
		s.Source.Mode = DefaultSourceMode
	}
	if s.Source.Contract == "" {
		s.Source.Contract = DefaultContract
	}
	if s.Source.MaxSlotLag == nil {
		q := resource.MustParse(DefaultMaxSlotLag)
		s.Source.MaxSlotLag = &q
	}
	dur(&s.Relay.CDCHandoverAfter, DefaultCDCHandoverAfter)
	if s.Message.Format == "" {
		s.Message.Format = DefaultMessageFormat
	}
	r := &s.Relay
	i32(&r.Replicas, DefaultReplicas)
	if r.BatchSize == 0 {
		r.BatchSize = DefaultBatchSize
	}
	dur(&r.Lease, DefaultLease)
	dur(&r.PollInterval, DefaultPollInterval)
	if r.MaxAttempts == 0 {
		r.MaxAttempts = DefaultMaxAttempts
	}
	dur(&r.MinBackoff, DefaultMinBackoff)
	dur(&r.MaxBackoff, DefaultMaxBackoff)
	dur(&r.UnknownTopicGrace, DefaultUnknownTopicGrace)
	if r.LogLevel == "" {
		r.LogLevel = DefaultLogLevel
	}
	m := &s.Monitoring
	dur(&m.StatusInterval, DefaultStatusInterval)
	dur(&m.OldestPendingAgeThreshold, DefaultOldestPendingAge)
	dur(&m.DeadGrowthWindow, DefaultDeadGrowthWindow)
	return c
}

// WithDefaults returns a deep copy of r with every unset defaulted field filled in.
func (r *DeadLetterReplay) WithDefaults() *DeadLetterReplay {
	c := r.DeepCopy()
	if c.Spec.Rate == 0 {
		c.Spec.Rate = DefaultReplayRate
	}
	i32(&c.Spec.CanarySize, DefaultCanarySize)
	i32(&c.Spec.MaxNewDeadPercent, DefaultMaxNewDeadPercent)
	if t := c.Spec.Consumer; t != nil {
		if t.Schema == "" {
			t.Schema = DefaultSchema
		}
		if t.Limit == 0 {
			t.Limit = DefaultInboxReplayLimit
		}
	}
	return c
}

// WithDefaults returns a deep copy of r with every unset defaulted field filled in.
func (r *RetentionPolicy) WithDefaults() *RetentionPolicy {
	c := r.DeepCopy()
	s := &c.Spec
	if s.Schedule == "" {
		s.Schedule = DefaultRetentionSchedule
	}
	dur(&s.SentRetention, DefaultSentRetention)
	dur(&s.DeadRetention, DefaultDeadRetention)
	if s.Mode == "" {
		s.Mode = RetentionArchive
	}
	if s.BatchSize == 0 {
		s.BatchSize = DefaultRetentionBatchSize
	}
	return c
}
