package main

import (
	"net/http"
	"net/http/pprof"
)

// mountProfiling adds Go's profiles (net/http/pprof) under /debug/pprof/
// to the metrics server's mux when --profiling is set, as upstream serves
// them on its metrics address.
func mountProfiling(mux *http.ServeMux, enabled bool) {
	if !enabled {
		return
	}
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
}
