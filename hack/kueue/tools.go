//go:build tools

// Package tools pins the Kueue manager that the end-to-end tests run
// (test/controlplane EnsureKueueManager builds it from this module). Kueue
// pins its own k8s.io versions, so it is built in its own module context
// and its pins stay away from the root go.mod. v0.17.0 is the only Kueue
// version the Go module proxy serves (go list -m -versions sigs.k8s.io/kueue).
package tools

import _ "sigs.k8s.io/kueue/cmd/kueue"
