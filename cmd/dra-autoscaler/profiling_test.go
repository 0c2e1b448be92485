package main

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestMountProfiling(t *testing.T) {
	for _, enabled := range []bool{false, true} {
		mux := http.NewServeMux()
		mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("m")) })
		mountProfiling(mux, enabled)
		for path, wantOn := range map[string]int{"/debug/pprof/": http.StatusOK, "/debug/pprof/cmdline": http.StatusOK, "/metrics": http.StatusOK} {
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
			want := wantOn
			if !enabled && path != "/metrics" {
				want = http.StatusNotFound
			}
			if rec.Code != want {
				t.Errorf("profiling=%v: GET %s = %d, want %d", enabled, path, rec.Code, want)
			}
		}
	}
}
