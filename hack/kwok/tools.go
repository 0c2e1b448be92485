//go:build tools

// Package tools pins the kwok controller that the local control plane runs
// (test/controlplane builds it from this module). It is built in a module
// context of its own so that kwok's pins never touch the root go.mod, with
// the root's versions of every module both build from, so that the
// packages they share are compiled once for both (hack/capi does the
// same; hack/kueue cannot, see its tools.go).
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
