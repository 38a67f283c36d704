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
type leftovers struct {
	mu sync.Mutex
	by map[Fetcher][]kafka.Message
}

func (l *leftovers) keep(r Fetcher, msgs []kafka.Message) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(msgs) == 0 {
		delete(l.by, r)
		return
	}
	if l.by == nil {
		l.by = map[Fetcher][]kafka.Message{}
	}
	l.by[r] = msgs
}

// take returns and forgets r's leftovers.
func (l *leftovers) take(r Fetcher) []kafka.Message {
	l.mu.Lock()
	defer l.mu.Unlock()
	msgs := l.by[r]
	delete(l.by, r)
	return msgs
}

func (l *leftovers) count(r Fetcher) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.by[r])
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
