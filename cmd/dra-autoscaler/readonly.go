package main

import (
	"fmt"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
)

// access is what the parts built for a command may do to the world: the
// running autoscaler reads and writes; explain only reads, and then every
// transport it is given refuses writes and its provider is the
// cloudprovider.ReadOnly view, so no stage, provider or client it runs can
// change anything, whatever it tries.
type access int

const (
	readWrite access = iota
	readOnly
)

// readOnlyConfig is cfg whose transport lets only reads reach the API
// server: GET (watches included), HEAD, OPTIONS and dry runs. Any other
// request fails before it is sent with an error wrapping
// cloudprovider.ErrReadOnly.
// Every client made from it (clientset, dynamic, discovery, the providers'
// own) inherits the wrapper. explain needs no POST that only reads (no
// access reviews): none is let through.
func readOnlyConfig(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return writesIf(rt, func() error { return cloudprovider.ErrReadOnly })
	})
	return out
}

// writesIf is a transport that sends reads (GET, watches included, HEAD,
// OPTIONS) and server-side dry runs, and sends any other request only
// while refused returns nil; otherwise the request fails unsent with that
// error.
func writesIf(next http.RoundTripper, refused func() error) http.RoundTripper {
	return writeGate{next: next, refused: refused}
}

type writeGate struct {
	next    http.RoundTripper
	refused func() error
}

func (t writeGate) RoundTrip(req *http.Request) (*http.Response, error) {
	switch {
	case req.Method == http.MethodGet, req.Method == http.MethodHead, req.Method == http.MethodOptions:
		return t.next.RoundTrip(req)
	case req.URL.Query().Get("dryRun") == metav1.DryRunAll:
		// A server-side dry run stores nothing: admission judges a pod
		// that is never created (a CapacityBuffer's, pkg/buffers).
		return t.next.RoundTrip(req)
	}
	if err := t.refused(); err != nil {
		if req.Body != nil {
			// RoundTrip must close the body, even of a request not sent.
			_ = req.Body.Close()
		}
		return nil, fmt.Errorf("%s %s not sent: %w", req.Method, req.URL.Path, err)
	}
	return t.next.RoundTrip(req)
}
