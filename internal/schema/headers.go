package schema

// Kafka header names the relay sets on every message (docs/architecture.md, "Message contract"). The
// producer library refuses user headers with these names and the consumer library
// reads them back.
const (
	HeaderEventID          = "event_id"
	HeaderEventType        = "event_type"
	HeaderEventVersion     = "event_version"
	HeaderAggregateType    = "aggregate_type"
	HeaderAggregateID      = "aggregate_id"
	HeaderAggregateVersion = "aggregate_version"
)

// ContractHeaders lists the header names above.
var ContractHeaders = []string{HeaderEventID, HeaderEventType, HeaderEventVersion,
	HeaderAggregateType, HeaderAggregateID, HeaderAggregateVersion}

// CloudEvents Kafka binding (binary mode) header names the relay sets in the
// CloudEvents format (docs/architecture.md, "CloudEvents format"): each context
// attribute prefixed with "ce_"; the extensions (lower-case letters and digits, as
// the spec requires) carry what the contract needs beyond the core attributes.
const (
	CESpecVersion      = "ce_specversion"
	CEID               = "ce_id"
	CESource           = "ce_source"
	CEType             = "ce_type"
	CETime             = "ce_time"
	CESubject          = "ce_subject" // the aggregate id
	CEEventVersion     = "ce_eventversion"
	CEAggregateType    = "ce_aggregatetype"
	CEAggregateVersion = "ce_aggregateversion"
	// CEContentType is the binding's header for datacontenttype (no ce_ prefix).
	CEContentType = "content-type"
)
