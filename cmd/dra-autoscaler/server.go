package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/klog/v2"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/metrics"
)

// health answers /health-check: healthy while the loop keeps passing, or
// while this replica waits for the lease (a standby is not broken).
type health struct {
	leading  atomic.Bool
	lastPass atomic.Int64 // unix nanos of the last finished pass
	timeout  time.Duration
}

func (h *health) passed(t time.Time) { h.lastPass.Store(t.UnixNano()) }

func (h *health) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	if h.leading.Load() {
		last := time.Unix(0, h.lastPass.Load())
		if since := time.Since(last); since > h.timeout {
			http.Error(w, fmt.Sprintf("last autoscaler pass %s ago (limit %s)", since.Round(time.Second), h.timeout), http.StatusInternalServerError)
			return
		}
	}
	_, _ = w.Write([]byte("OK"))
}

// serve runs the metrics and health endpoints until ctx ends. It listens
// before returning, so a port already in use fails the start.
func serve(ctx context.Context, addr string, m *metrics.Metrics, h *health) error {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
	mux.Handle("/health-check", h)
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--address=%s: %w", addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.ErrorS(err, "Metrics server stopped")
		}
	}()
	klog.InfoS("Serving metrics and health", "address", l.Addr().String())
	return nil
}
