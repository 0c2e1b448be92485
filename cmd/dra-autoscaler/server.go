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

// serverTimeouts bound what one client may hold of the metrics server: a
// scraper or probe that stalls (or a client that opens connections and
// never finishes a request) must not pile up goroutines and sockets in the
// process that scales the cluster. Requests carry no body and answers are
// small: a /metrics page is written in well under a second, so a minute
// only stops a client that stopped reading. Probes come every 10-15s
// (deploy/base): an idle keep-alive connection is kept for two minutes.
var serverTimeouts = timeouts{readHeader: 10 * time.Second, read: 30 * time.Second, write: time.Minute, idle: 2 * time.Minute}

type timeouts struct{ readHeader, read, write, idle time.Duration }

func newServer(h http.Handler, t timeouts) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: t.readHeader, ReadTimeout: t.read, WriteTimeout: t.write, IdleTimeout: t.idle}
}

// metricsMux serves /metrics and /health-check, as upstream serves them
// on --address; never the profiles (profiling.go).
func metricsMux(m *metrics.Metrics, h *health) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
	mux.Handle("/health-check", h)
	return mux
}

// serve runs the metrics and health endpoints on addr until ctx ends.
func serve(ctx context.Context, addr string, m *metrics.Metrics, h *health) error {
	_, err := listenAndServe(ctx, "--address", "Serving metrics and health", addr, metricsMux(m, h))
	return err
}

// listenAndServe serves h on addr (named by flag in errors) until ctx
// ends. It listens before returning, so a port already in use fails the
// start; it returns the address listened on.
func listenAndServe(ctx context.Context, flag, what, addr string, h http.Handler) (net.Addr, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s=%s: %w", flag, addr, err)
	}
	srv := newServer(h, serverTimeouts)
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.ErrorS(err, "HTTP server stopped", "address", l.Addr().String())
		}
	}()
	klog.InfoS(what, "address", l.Addr().String())
	return l.Addr(), nil
}
