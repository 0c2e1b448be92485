//go:build tools

package tools
import (
	_ "go.etcd.io/etcd/server/v3/embed"
	_ "k8s.io/kubernetes/pkg/scheduler"
	_ "k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	_ "k8s.io/client-go/kubernetes"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "k8s.io/dynamic-resource-allocation/structured"
)
