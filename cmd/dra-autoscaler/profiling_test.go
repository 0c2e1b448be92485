package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/config"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/metrics"
)

// The profiles are never on the metrics mux; the profiling mux serves
// them and nothing else.
func TestProfilesOnTheirOwnMux(t *testing.T) {
	tests := []struct {
		name string
		mux  *http.ServeMux
		want map[string]int
	}{
		{"metrics", metricsMux(metrics.New(), &health{}), map[string]int{
			"/metrics": http.StatusOK, "/health-check": http.StatusOK,
			"/debug/pprof/": http.StatusNotFound, "/debug/pprof/cmdline": http.StatusNotFound, "/debug/pprof/heap": http.StatusNotFound}},
		{"profiling", profilingMux(), map[string]int{
			"/debug/pprof/": http.StatusOK, "/debug/pprof/cmdline": http.StatusOK, "/debug/pprof/heap": http.StatusOK,
			"/metrics": http.StatusNotFound, "/health-check": http.StatusNotFound}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for path, want := range tc.want {
				rec := httptest.NewRecorder()
				tc.mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
				if rec.Code != want {
					t.Errorf("GET %s = %d, want %d", path, rec.Code, want)
				}
			}
		})
	}
}

// By default the profiles listen on loopback only, and serveProfiling
// listens where it is told.
func TestProfilingAddress(t *testing.T) {
	host, _, err := net.SplitHostPort(config.Default().ProfilingAddress)
	if err != nil || !net.ParseIP(host).IsLoopback() {
		t.Fatalf("default --profiling-address %q (%v): want a loopback address", config.Default().ProfilingAddress, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := serveProfiling(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr.String() + "/debug/pprof/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /debug/pprof/cmdline on %s = %d", addr, resp.StatusCode)
	}
	if _, err := serveProfiling(ctx, addr.String()); err == nil {
		t.Error("a second listener on the same address started")
	}
}
