package main

import (
	"context"
	"net"
	"net/http"
	"net/http/pprof"
)

// profilingMux serves Go's profiles (net/http/pprof) under /debug/pprof/
// and nothing else. Upstream mounts them on its metrics address; here they
// get a listener of their own (--profiling-address, loopback by default),
// since a heap profile shows memory contents (tokens included) and a CPU
// profile costs the loop CPU: whoever may scrape /metrics may not read
// those.
func profilingMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// serveProfiling serves the profiles on addr until ctx ends (a CPU
// profile must end within the write timeout: ?seconds= under 60).
func serveProfiling(ctx context.Context, addr string) (net.Addr, error) {
	return listenAndServe(ctx, "--profiling-address", "Serving Go profiles", addr, profilingMux())
}
