package inbox

import (
	"reflect"
	"sync"

	"github.com/segmentio/kafka-go"
)

// The uncommitted registry: messages a Run fetched and did not commit, by reader, so
// that the next Run on the same reader handles them before anything new.
var (
	leftMu sync.Mutex
	left   = map[Fetcher][]kafka.Message{}
)

func keepUncommitted(r Fetcher, msgs []kafka.Message) {
	if !comparable(r) {
		return
	}
	leftMu.Lock()
	defer leftMu.Unlock()
	if len(msgs) == 0 {
		delete(left, r)
		return
	}
	left[r] = msgs
}

// takeUncommitted returns and forgets r's leftovers.
func takeUncommitted(r Fetcher) []kafka.Message {
	if !comparable(r) {
		return nil
	}
	leftMu.Lock()
	defer leftMu.Unlock()
	msgs := left[r]
	delete(left, r)
	return msgs
}

// comparable reports whether r can key the registry (a reader held by value in a
// struct with a slice, say, cannot; it then gets no leftover protection).
func comparable(r Fetcher) bool {
	return r != nil && reflect.ValueOf(r).Comparable()
}
