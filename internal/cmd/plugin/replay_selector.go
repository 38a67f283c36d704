package plugin

import (
	"strings"
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
)

// selectorFlags are the fields of the API's ReplaySelector, one flag each.
type selectorFlags struct {
	eventIDs                    []string
	eventType, aggregateType    string
	aggregateID, errorCode      string
	destination                 string
	createdAfter, createdBefore string
}

func (f *selectorFlags) bind(fs *pflag.FlagSet) {
	fs.StringSliceVar(&f.eventIDs, "event-id", nil, "replay these event ids (repeatable or comma-separated)")
	fs.StringVar(&f.eventType, "event-type", "", "match event_type")
	fs.StringVar(&f.aggregateType, "aggregate-type", "", "match aggregate_type (not with --consumer-group)")
	fs.StringVar(&f.aggregateID, "aggregate-id", "", "match aggregate_id (needs --aggregate-type; not with --consumer-group)")
	fs.StringVar(&f.errorCode, "error-code", "", "match last_error_code, e.g. MESSAGE_TOO_LARGE (with --consumer-group: the park code, e.g. retries_exhausted)")
	fs.StringVar(&f.destination, "destination", "", "match the destination topic (not with --consumer-group)")
	fs.StringVar(&f.createdAfter, "created-after", "", "match rows created at or after this RFC 3339 time (with --consumer-group: first parked)")
	fs.StringVar(&f.createdBefore, "created-before", "", "match rows created before this RFC 3339 time (with --consumer-group: first parked)")
}

// selector checks the rules the CRD enforces with CEL, naming the flags. consumer is
// a replay of a consumer group's parked messages (spec.consumer), which cannot be
// selected by aggregate or destination.
func (f *selectorFlags) selector(consumer bool) (outboxv1.ReplaySelector, error) {
	if consumer {
		for _, o := range []struct{ flag, v string }{
			{"--aggregate-type", f.aggregateType}, {"--aggregate-id", f.aggregateID}, {"--destination", f.destination},
		} {
			if o.v != "" {
				return outboxv1.ReplaySelector{}, usagef("%s selects DEAD outbox events; with --consumer-group select parked messages by --event-id, --event-type, --error-code, --created-after or --created-before", o.flag)
			}
		}
	}
	sel := outboxv1.ReplaySelector{
		EventIDs: f.eventIDs, EventType: f.eventType, AggregateType: f.aggregateType,
		AggregateID: f.aggregateID, ErrorCode: f.errorCode, Destination: f.destination,
	}
	var err error
	if sel.CreatedAfter, err = rfc3339("--created-after", f.createdAfter); err != nil {
		return sel, err
	}
	if sel.CreatedBefore, err = rfc3339("--created-before", f.createdBefore); err != nil {
		return sel, err
	}
	for _, id := range sel.EventIDs {
		if strings.TrimSpace(id) == "" {
			return sel, usagef("--event-id: an event id is empty")
		}
	}
	switch {
	case sel.AggregateID != "" && sel.AggregateType == "":
		return sel, usagef("--aggregate-id needs --aggregate-type")
	case consumer && len(sel.EventIDs) == 0 && sel.EventType == "" && sel.ErrorCode == "" &&
		sel.CreatedAfter == nil && sel.CreatedBefore == nil:
		return sel, usagef("give at least one selector flag (--event-id, --event-type, --error-code, --created-after, --created-before): a replay of everything is never an accident")
	case len(sel.EventIDs) == 0 && sel.EventType == "" && sel.AggregateType == "" && sel.ErrorCode == "" &&
		sel.Destination == "" && sel.CreatedAfter == nil && sel.CreatedBefore == nil:
		return sel, usagef("give at least one selector flag (--event-id, --event-type, --aggregate-type, --error-code, --destination, --created-after, --created-before): a replay of everything is never an accident")
	case sel.CreatedAfter != nil && sel.CreatedBefore != nil && !sel.CreatedAfter.Before(sel.CreatedBefore):
		return sel, usagef("--created-after must be before --created-before")
	}
	return sel, nil
}

func rfc3339(flag, v string) (*metav1.Time, error) {
	if v == "" {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return nil, usagef("%s %q: want an RFC 3339 time such as 2026-05-01T10:00:00Z", flag, v)
	}
	mt := metav1.NewTime(t)
	return &mt, nil
}
