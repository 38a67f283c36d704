// Package logtest keeps a logr logger's lines for tests that check what the code
// under test says (the stable keys of its log lines).
package logtest

import (
	"strings"
	"sync"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
)

// Lines collects every line of Logger as JSON; the zero value is ready to use.
type Lines struct {
	mu    sync.Mutex
	lines []string
}

// Logger returns a logger that writes into l.
func (l *Lines) Logger() logr.Logger {
	return funcr.NewJSON(func(obj string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, obj)
	}, funcr.Options{})
}

// With returns the lines that contain every one of parts.
func (l *Lines) With(parts ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
next:
	for _, line := range l.lines {
		for _, p := range parts {
			if !strings.Contains(line, p) {
				continue next
			}
		}
		out = append(out, line)
	}
	return out
}

// Count returns how many lines contain every one of parts.
func (l *Lines) Count(parts ...string) int { return len(l.With(parts...)) }
