//go:build tools

// Package tools pins the Cluster API core manager that the end-to-end tests
// run (test/controlplane EnsureCAPIManager builds it from this module).
// Cluster API v1.14 pins k8s.io v0.36 and its go.mod has replace directives,
// so it can be neither built from the root module nor with `go install
// module@version`; this module keeps its pins away from the root go.mod.
package tools

import _ "sigs.k8s.io/cluster-api/core"
