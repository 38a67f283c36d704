package schema

import "fmt"

// ValidTopic applies Kafka's topic name rules (legal characters, length) to a
// destination. The producer library rejects such events before they are written; the
// relay sends rows that break the rules (plain SQL inserts) to DEAD with INVALID_TOPIC
// instead of asking the broker.
func ValidTopic(t string) error {
	if len(t) > 249 {
		return fmt.Errorf("topic name %q is longer than 249 characters", t)
	}
	if t == "." || t == ".." {
		return fmt.Errorf("topic name %q is not allowed", t)
	}
	for _, c := range t {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("topic name %q has illegal character %q (allowed: a-z A-Z 0-9 . _ -)", t, c)
		}
	}
	return nil
}
