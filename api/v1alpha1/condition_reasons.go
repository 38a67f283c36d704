package v1alpha1

// Condition reasons are API: users alert on these strings and `kubectl get -o wide`
// shows them, so they never change once released. Each comes with a message that says
// what to do (docs/operations.md lists them with the runbook section to read).
const (
	// ReasonReady (Ready=True): the resource does what it was asked to.
	ReasonReady = "Ready"
	// ReasonWorkersNotReady (Ready=False): no relay pod passes its readiness probe
	// (database errors, a hot standby, or a paused worker whose brokers do not answer).
	ReasonWorkersNotReady = "WorkersNotReady"
	// ReasonPaused (Ready=False): spec.paused scaled the relay to zero workers.
	ReasonPaused = "Paused"
	// ReasonSecretNotFound (Ready=False): a referenced Secret does not exist.
	ReasonSecretNotFound = "SecretNotFound"
	// ReasonSecretKeyNotFound (Ready=False): a referenced Secret lacks the key.
	ReasonSecretKeyNotFound = "SecretKeyNotFound"
	// ReasonSecretForbidden (Ready=False): the operator may not read the Secret.
	ReasonSecretForbidden = "SecretForbidden"
	// ReasonInvalidSpec (Ready=False): the spec passed the CRD's validation but cannot
	// be rendered (the message names the field).
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonNameConflict (Ready=False): a child object of that name exists and is not
	// owned by this resource.
	ReasonNameConflict = "NameConflict"
	// ReasonDatabaseUnreachable (Ready=False, Degraded=True): the operator cannot reach
	// the database with the DSN from the Secret.
	ReasonDatabaseUnreachable = "DatabaseUnreachable"
	// ReasonTableMissing (Ready=False, Degraded=True): the outbox table does not exist.
	ReasonTableMissing = "TableMissing"
	// ReasonContractMismatch (Ready=False, Degraded=True): the outbox table follows
	// another contract than spec.source.contract (a v1 table for a v2 pipeline, until
	// the migrate init container upgrades it; a v2 table for a v1 pipeline with
	// migrate, whose init container refuses the table).
	ReasonContractMismatch = "ContractMismatch"
	// ReasonPostgresVersionUnsupported (Ready=False, Degraded=True): the database's
	// PostgreSQL major version is outside the supported range (internal/pgversion); the
	// message names the server's version and the range.
	ReasonPostgresVersionUnsupported = "PostgresVersionUnsupported"
	// ReasonBrokerUnavailable (Degraded=True): at least one relay worker with a fresh
	// heartbeat reports that no Kafka broker takes its writes (none reachable, or every
	// produce of a batch refused) and has paused claiming.
	// It wins over EventsDelayed (the outage explains the delay), while
	// DatabaseUnreachable and TableMissing win over it (the reports live in the database).
	ReasonBrokerUnavailable = "BrokerUnavailable"
	// ReasonEventsDelayed (Degraded=True): the oldest unpublished event is older than
	// spec.monitoring.oldestPendingAgeThreshold.
	ReasonEventsDelayed = "EventsDelayed"
	// ReasonDeadEventsIncreasing (Degraded=True): the DEAD count grew within
	// spec.monitoring.deadGrowthWindow.
	ReasonDeadEventsIncreasing = "DeadEventsIncreasing"
	// ReasonSlotLagging (Degraded=True): the replication slot holds more WAL than
	// spec.source.maxSlotLag.
	ReasonSlotLagging = "SlotLagging"
	// ReasonSlotInvalidated (Degraded=True): PostgreSQL invalidated the slot
	// (max_slot_wal_keep_size); polling publishes meanwhile and the relay makes a new one.
	ReasonSlotInvalidated = "SlotInvalidated"
	// ReasonSlotMissing (SlotReplaced=True): the slot the pipeline had was gone (dropped
	// outside the operator); the operator made a new one. (SlotReplaced=True with
	// ReasonSlotInvalidated: it replaced a slot PostgreSQL had invalidated.)
	ReasonSlotMissing = "SlotMissing"
	// ReasonPublicationMismatch (Degraded=True): the publication does not cover exactly
	// spec.source.table and the operator could not move it (ALTER PUBLICATION ... SET
	// TABLE needs ownership of the table): the stream delivers nothing of the pipeline's
	// table, so every event waits for the hand-over.
	ReasonPublicationMismatch = "PublicationMismatch"
	// ReasonHealthy (Degraded=False): none of the above.
	ReasonHealthy = "Healthy"
	// ReasonRollingOut (Progressing=True): a spec or Secret change is rolling the workers.
	ReasonRollingOut = "RollingOut"
	// ReasonRolloutComplete (Progressing=False): every worker runs the current spec.
	ReasonRolloutComplete = "RolloutComplete"
	// ReasonPipelineNotFound (Ready=False): the referenced OutboxPipeline does not exist.
	ReasonPipelineNotFound = "PipelineNotFound"
	// ReasonJobCreated (DeadLetterReplay, Ready=True): the replay Job runs.
	ReasonJobCreated = "JobCreated"
	// ReasonReplayInProgress (DeadLetterReplay, Reconciling=True): the replay has not
	// finished (phase Pending or Running).
	ReasonReplayInProgress = "ReplayInProgress"
	// ReasonJobMissing (DeadLetterReplay): the replay Job was deleted before it ended.
	ReasonJobMissing = "JobMissing"
	// ReasonCompleted (DeadLetterReplay, Ready=True): the replay finished.
	ReasonCompleted = "Completed"
	// ReasonJobFailed (DeadLetterReplay, Ready=False): the replay Job failed.
	ReasonJobFailed = "JobFailed"
	// ReasonNoConsumer (DeadLetterReplay with spec.consumer, Ready=False): the replay
	// Job gave up because no running consumer of the group took its request within the
	// wait timeout. The request stays recorded (REQUESTED); a consumer of the group
	// that starts later still serves it.
	ReasonNoConsumer = "NoConsumer"
	// ReasonScheduled (RetentionPolicy, Ready=True): the archive CronJob is scheduled.
	ReasonScheduled = "Scheduled"
	// ReasonSuspended (RetentionPolicy): spec.suspend stops new runs.
	ReasonSuspended = "Suspended"
	// ReasonLastRunFailed (RetentionPolicy, Degraded=True): the newest archive run failed.
	ReasonLastRunFailed = "LastRunFailed"
	// ReasonLastRunSucceeded (RetentionPolicy, Degraded=False): the newest run succeeded.
	ReasonLastRunSucceeded = "LastRunSucceeded"
	// ReasonNoRunsYet (RetentionPolicy, Degraded=False): no archive run recorded yet.
	ReasonNoRunsYet = "NoRunsYet"
)
