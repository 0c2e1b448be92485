//go:build tools

// Package tools pins the Kueue manager that the end-to-end tests run
// (test/controlplane EnsureKueueManager builds it from this module; see
// KueueVersion there for the versions the module proxy serves). Kueue
// pins its own k8s.io versions, so it is built in its own module context
// and its pins stay away from the root go.mod. Unlike hack/capi and
// hack/kwok it keeps Kueue's pins (k8s.io v0.36, k8s.io/kubernetes
// v1.36.0): its workload-aware scheduling imports
// sigs.k8s.io/scheduler-library, which does not compile against the
// root's k8s.io/kubernetes v1.37.2 (tried: the scheduler's internal cache
// and DRA tracker changed).
package tools

import _ "sigs.k8s.io/kueue/cmd/kueue"
