//go:build tools

// Package tools pins the Cluster API core manager that the end-to-end tests
// run (test/controlplane EnsureCAPIManager builds it from this module).
// Cluster API's go.mod has replace directives, so it can be neither built
// from the root module nor with `go install module@version`; this module
// keeps its pins away from the root go.mod. Cluster API v1.14 pins k8s.io
// v0.36 and controller-runtime v0.24; this module raises every module it
// shares with the root to the root's version (k8s.io v0.37.2 and the rest;
// controller-runtime to v0.25.3, the release for k8s.io v0.37), so that a
// cold build compiles those packages once for the root and the tools
// (test/controlplane TestToolVersions keeps them equal).
package tools

import _ "sigs.k8s.io/cluster-api/core"
