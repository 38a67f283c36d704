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
