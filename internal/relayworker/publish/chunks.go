package publish

import (
	"errors"

	"github.com/segmentio/kafka-go"
)

// ErrNotSent answers messages Publish did not hand to Kafka because an earlier part
// of the same topic's batch failed in a way a retry could fix. Nothing was sent, so
// the relay releases these rows instead of counting an attempt.
var ErrNotSent = errors.New("not sent: an earlier write of the batch failed and newer versions must not overtake it")

// chunk splits idx (in order) into runs whose total Size stays within limit; a run
// holds at least one message. kafka-go splits one partition's messages into several
// produce requests only past the Writer's BatchBytes, counting fewer bytes per
// message than Size does, so with limit = BatchBytes every partition's share of a
// run is one produce request: it is stored or refused as a whole. Typical batches
// (500 events of a few hundred bytes) are a single run, i.e. one WriteMessages call.
func chunk(msgs []kafka.Message, idx []int, limit int64) [][]int {
	var out [][]int
	start, bytes := 0, int64(0)
	for k, i := range idx {
		n := Size(msgs[i])
		if k > start && bytes+n > limit {
			out = append(out, idx[start:k])
			start, bytes = k, 0
		}
		bytes += n
	}
	if start < len(idx) {
		out = append(out, idx[start:])
	}
	return out
}

// retryable reports a failure after which later versions must wait: anything but
// success or a permanent (DEAD) error.
func retryable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrNotSent) {
		return true
	}
	c, _ := Classify(err)
	return c != Permanent
}
