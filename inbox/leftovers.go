package inbox

import (
	"errors"
	"fmt"
	"reflect"
	"sync"

	"github.com/segmentio/kafka-go"
)

// leftovers are the messages a Run fetched and did not commit, kept by the Consumer
// for the reader they came from: the next Run of this Consumer on that reader
// handles them before anything new (kafka-go has already moved past them). They live
// and die with the Consumer; nothing process-wide holds a payload.
//
// A Consumer runs one Run at a time (Run refuses a second), so it keeps the
// leftovers of one reader only: the one its last Run ran on. A Run on another reader
// releases them, reader and payloads: the application has replaced the reader (as it
// must after a reader failed), so this Consumer can never handle them again; their
// offsets were not committed, so the group redelivers them to whichever member gets
// their partition once the old reader is closed. Keeping them, as a map by reader
// did, held every replaced reader's payloads for the life of the Consumer.
type leftovers struct {
	mu   sync.Mutex
	r    Fetcher // the reader msgs came from; nil when there are none
	msgs []kafka.Message
}

// keep records msgs as r's leftovers, replacing whatever was kept: Run took the
// earlier ones (or released them) when it started.
func (l *leftovers) keep(r Fetcher, msgs []kafka.Message) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.r, l.msgs = nil, nil
	if len(msgs) > 0 {
		l.r, l.msgs = r, msgs
	}
}

// take returns r's leftovers and forgets them. Leftovers of another reader are
// forgotten too, and their number returned as released, for the log.
func (l *leftovers) take(r Fetcher) (msgs []kafka.Message, released int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.r == r {
		msgs = l.msgs
	} else {
		released = len(l.msgs)
	}
	l.r, l.msgs = nil, nil
	return msgs, released
}

func (l *leftovers) count(r Fetcher) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.r != r {
		return 0
	}
	return len(l.msgs)
}

// trackable says why r cannot key its leftovers, if it cannot: Run refuses such a
// reader instead of skipping the messages a failed Run leaves behind.
func trackable(r Fetcher) error {
	if r == nil {
		return errors.New("inbox: Run needs a Fetcher (a *kafka.Reader)")
	}
	if !reflect.ValueOf(r).Comparable() {
		return fmt.Errorf("inbox: Run cannot keep track of the uncommitted messages of a %T: it is not comparable; pass a pointer (such as *kafka.Reader or a pointer to your wrapper)", r)
	}
	return nil
}
