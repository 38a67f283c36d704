package kubectlplugin

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
	fs.StringVar(&f.aggregateType, "aggregate-type", "", "match aggregate_type")
	fs.StringVar(&f.aggregateID, "aggregate-id", "", "match aggregate_id (needs --aggregate-type)")
	fs.StringVar(&f.errorCode, "error-code", "", "match last_error_code, e.g. MESSAGE_TOO_LARGE")
	fs.StringVar(&f.destination, "destination", "", "match the destination topic")
	fs.StringVar(&f.createdAfter, "created-after", "", "match rows created at or after this RFC 3339 time")
	fs.StringVar(&f.createdBefore, "created-before", "", "match rows created before this RFC 3339 time")
}

// selector checks the rules the CRD enforces with CEL, naming the flags.
func (f *selectorFlags) selector() (outboxv1.ReplaySelector, error) {
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
