package relay_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/cloudevents/sdk-go/v2/binding/spec"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outbox-operator/outbox-operator/internal/relayworker/publish"
	"github.com/outbox-operator/outbox-operator/internal/testenv/relaytest"
)

// The CloudEvents format, as the relay's real publisher writes it to a broker, decodes
// with the CloudEvents SDK's binary-mode binding into an event that passes the SDK's
// validation, with every attribute the contract promises (docs/architecture.md,
// "CloudEvents format").
func TestRelayPublishesCloudEvents(t *testing.T) {
	dsn, db := relaytest.NewDB(t)
	tp := topic(t)
	h := `{"tenant":"t1"}`
	relaytest.Insert(t, db, relaytest.Ev{ID: "ev-ce-1", AggType: "order", AggID: "o-7", Version: 4, Topic: tp, Payload: `{"amount": 10}`, Headers: &h})
	f := publish.Format{CloudEvents: true, Source: "/outbox-operator/shop/orders", ContentType: publish.ContentTypeFor("jsonb")}
	newWorker(t, dsn, db, "w1", opts{format: f}).start(t)
	waitStatus(t, db, "SENT", 1, 10*time.Second)
	recs, err := broker.ReadAllWithin(10*time.Second, tp, 1)
	if err != nil {
		t.Fatal(err)
	}
	var created time.Time
	if err := db.QueryRow(`SELECT created_at FROM outbox_event WHERE event_id='ev-ce-1'`).Scan(&created); err != nil {
		t.Fatal(err)
	}
	r := recs[0]
	if string(r.Key) != "o-7" {
		t.Errorf("key %q, want the message key unchanged", r.Key)
	}
	ev, err := binding.ToEvent(context.Background(), newCEMessage(r))
	if err != nil {
		t.Fatalf("CloudEvents SDK cannot decode the record: %v", err)
	}
	if err := ev.Validate(); err != nil {
		t.Fatalf("CloudEvents SDK: invalid event: %v", err)
	}
	attrs := map[string]any{"specversion": ev.SpecVersion(), "id": ev.ID(), "source": ev.Source(), "type": ev.Type(),
		"subject": ev.Subject(), "datacontenttype": ev.DataContentType(), "data": string(ev.Data())}
	want := map[string]any{"specversion": "1.0", "id": "ev-ce-1", "source": "/outbox-operator/shop/orders", "type": "test.event",
		"subject": "o-7", "datacontenttype": "application/json", "data": `{"amount": 10}`}
	for k, v := range want {
		if attrs[k] != v {
			t.Errorf("%s = %q, want %q", k, attrs[k], v)
		}
	}
	if !ev.Time().Equal(created) {
		t.Errorf("time = %s, want created_at %s", ev.Time(), created)
	}
	ext := ev.Extensions()
	wantExt := map[string]string{"eventversion": "1", "aggregatetype": "order", "aggregateversion": "4"}
	for k, v := range wantExt {
		if got, _ := ext[k].(string); got != v {
			t.Errorf("extension %s = %v, want %q", k, ext[k], v)
		}
	}
	if len(ext) != len(wantExt) {
		t.Errorf("extensions %v, want exactly %v", ext, wantExt)
	}
	if header(r, "tenant") != "t1" || header(r, "event_id") != "" {
		t.Errorf("row header tenant=%q, native event_id=%q: want t1 and none", header(r, "tenant"), header(r, "event_id"))
	}
}

// ceMessage reads a franz-go record as the CloudEvents SDK's Kafka bindings read a
// consumed record (binary mode: ce_-prefixed headers are attributes or extensions,
// content-type is datacontenttype, the value is the data). The SDK's own Kafka
// protocol modules are not on the module proxy, so this is their header walk; the
// attribute parsing and checks are the SDK's (spec, binding.ToEvent, Validate).
type ceMessage struct {
	rec     *kgo.Record
	version spec.Version
}

var ceSpecs = spec.WithPrefix("ce_")

func newCEMessage(r *kgo.Record) *ceMessage {
	m := &ceMessage{rec: r}
	for _, h := range r.Headers {
		if strings.ToLower(h.Key) == ceSpecs.PrefixedSpecVersionName() {
			m.version = ceSpecs.Version(string(h.Value))
		}
	}
	return m
}

func (m *ceMessage) ReadEncoding() binding.Encoding {
	if m.version == nil {
		return binding.EncodingUnknown
	}
	return binding.EncodingBinary
}

func (m *ceMessage) ReadStructured(context.Context, binding.StructuredWriter) error {
	return binding.ErrNotStructured
}

func (m *ceMessage) ReadBinary(_ context.Context, w binding.BinaryWriter) error {
	if m.version == nil {
		return binding.ErrNotBinary
	}
	for _, h := range m.rec.Headers {
		k, v := strings.ToLower(h.Key), string(h.Value)
		var err error
		switch {
		case k == "content-type":
			err = w.SetAttribute(m.version.AttributeFromKind(spec.DataContentType), v)
		case m.version.Attribute(k) != nil:
			err = w.SetAttribute(m.version.Attribute(k), v)
		case strings.HasPrefix(k, ceSpecs.Prefix()):
			err = w.SetExtension(strings.TrimPrefix(k, ceSpecs.Prefix()), v)
		}
		if err != nil {
			return err
		}
	}
	return w.SetData(bytes.NewReader(m.rec.Value))
}

func (m *ceMessage) GetAttribute(k spec.Kind) (spec.Attribute, interface{}) {
	attr := m.version.AttributeFromKind(k)
	if attr == nil {
		return nil, nil
	}
	name := attr.PrefixedName()
	if k == spec.DataContentType {
		name = "content-type"
	}
	return attr, m.header(name)
}

func (m *ceMessage) GetExtension(name string) interface{} { return m.header(ceSpecs.Prefix() + name) }

// header is the value of header k, nil when absent (as the SDK expects).
func (m *ceMessage) header(k string) interface{} {
	for _, h := range m.rec.Headers {
		if strings.ToLower(h.Key) == k {
			return string(h.Value)
		}
	}
	return nil
}

func (m *ceMessage) Finish(error) error { return nil }
