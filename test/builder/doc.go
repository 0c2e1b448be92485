// Package builder holds small fluent builders for the Kubernetes API objects
// that unit tests and end-to-end tests create: nodes, pods, DRA objects
// (ResourceSlices, DeviceClasses, claims, claim templates, DeviceTaintRules)
// and gang objects (PodGroups, Workloads).
//
// Every builder starts from a constructor named after the kind
// (builder.Node("n1"), builder.Pod("ns", "p")), chains setters that return the
// builder itself and ends with Obj(), which returns a fresh object: a builder
// can be reused to stamp out several objects, and later changes to the builder
// never leak into objects already returned.
//
// The builders only fill API types; they never talk to a cluster. Objects get
// deterministic UIDs so that tests which never go through an API server (the
// scheduler keys some state by UID) behave like real clusters; an API server
// overwrites the UID on create, so the same objects can be created for real.
package builder

import (
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
)

// uidFor returns a deterministic UID for an object of the given kind.
func uidFor(kind, namespace, name string) types.UID {
	if namespace == "" {
		return types.UID(kind + "-" + name)
	}
	return types.UID(kind + "-" + namespace + "-" + name)
}

// quantity parses s and falls back to zero on a malformed value, so that a
// typo in a test shows up as a failed expectation rather than a panic in a
// helper. Tests that care can compare against resource.MustParse themselves.
func quantity(s string) resource.Quantity {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return resource.Quantity{}
	}
	return q
}
