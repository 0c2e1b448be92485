//go:build tools

// Package tools pins the Kubernetes control-plane commands that the local
// control plane builds from this module, so their versions follow go.mod.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
