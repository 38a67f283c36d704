package cli

import (
	"net/http"
	"net/http/pprof"
	"runtime"
)

// pprofHandler serves the standard profiles under /debug/pprof/. It also turns on
// block and mutex sampling, which cost a little on every contended operation: they
// are only on while someone asked for a pprof endpoint (--pprof-addr).
func pprofHandler() http.Handler {
	runtime.SetBlockProfileRate(int(10_000)) // one sample per 10 µs blocked
	runtime.SetMutexProfileFraction(100)
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}
