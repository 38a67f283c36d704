package publish

import (
	"reflect"
	"testing"

	"github.com/segmentio/kafka-go"
)

// headerInputs are headers columns of every shape: what the scan takes and what it
// leaves to the decoder.
var headerInputs = []string{
	`{}`, ` { } `, `{"a": "b"}`, `{"a":"b","c":"d"}`, "{\n\t\"a\" :\r \"b\" ,\"c\":\"\"}",
	`{"tenant": "t-34", "traceparent": "00-0000000000000000000000000000abcd-0000000000001234-01"}`,
	`{"a": "b"} trailing`, `{"a": "b"}}`, `{"a": "b",}`, `{"a" "b"}`, `{"a": "b"`, `{"a": "b`, `{"a`, `{`, ``, ` `,
	`{"a": 1}`, `{"a": null}`, `{"a": true}`, `{"a": {"b": "c"}}`, `{"a": ["b"]}`, `["a"]`, `"a"`, `null`,
	`{"": "b"}`, `{"event_id": "spoof"}`, `{"a": "b", "event_type": "x"}`, `{"a": "b", "a": "c"}`,
	`{"a\"b": "c"}`, `{"a": "b\nc"}`, `{"a": "\u00e9"}`, `{"\u0041": "b"}`, "{\"a\": \"b\x01\"}",
	"{\"a\": \"\xff\"}", "{\"\xc3\": \"b\"}", `{"é": "ü"}`, `{"a": "b"}` + "\n",
}

// TestScanAgreesWithTheDecoder: appendHeaders (the scan, or the decoder where the
// scan gives up) returns what the decoder alone returns, pairs and refusals alike.
func TestScanAgreesWithTheDecoder(t *testing.T) {
	for _, in := range headerInputs {
		checkScanAgrees(t, in)
	}
}

func FuzzScanAgreesWithTheDecoder(f *testing.F) {
	for _, in := range headerInputs {
		f.Add(in)
	}
	f.Fuzz(func(t *testing.T, in string) { checkScanAgrees(t, in) })
}

func checkScanAgrees(t *testing.T, in string) {
	t.Helper()
	want, wantErr := parseHeaders([]byte(in), reservedNative)
	got, err := appendHeaders(nil, []byte(in), reservedNative)
	if (err != nil) != (wantErr != nil) || err != nil && err.Error() != wantErr.Error() {
		t.Fatalf("%q: error %v, the decoder's %v", in, err, wantErr)
	}
	var wantHdrs []kafka.Header
	for _, kv := range want {
		wantHdrs = append(wantHdrs, kafka.Header{Key: kv[0], Value: []byte(kv[1])})
	}
	if len(got) != len(wantHdrs) || len(got) > 0 && !reflect.DeepEqual(got, wantHdrs) {
		t.Fatalf("%q: headers %q, the decoder's %q", in, got, wantHdrs)
	}
}
