package cli

import (
	"fmt"
	"io"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
)

// newLogger logs JSON lines with stable keys (pipeline, worker, eventId, attempt).
func newLogger(w io.Writer, level, pipeline, worker string) logr.Logger {
	v := 0
	switch level {
	case "debug":
		v = 1
	}
	l := funcr.NewJSON(func(obj string) { fmt.Fprintln(w, obj) }, funcr.Options{Verbosity: v, LogTimestamp: true})
	if level == "error" {
		l = logr.New(errorOnly{l.GetSink()}) // infos dropped, errors kept
	}
	if pipeline != "" {
		l = l.WithValues("pipeline", pipeline)
	}
	if worker != "" {
		l = l.WithValues("worker", worker)
	}
	return l
}

// errorOnly drops every info line (--log-level error) and keeps the errors.
type errorOnly struct{ logr.LogSink }

func (errorOnly) Enabled(int) bool { return false }
func (e errorOnly) WithValues(kv ...any) logr.LogSink {
	return errorOnly{e.LogSink.WithValues(kv...)}
}
func (e errorOnly) WithName(n string) logr.LogSink { return errorOnly{e.LogSink.WithName(n)} }
