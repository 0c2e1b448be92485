package main

import (
	"context"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/autoscaler"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/config"
)

// Every way the wiring (the provider, then autoscaler.New) can fail
// returns the error, no panic; success returns the autoscaler.
func TestWiring(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"valid", nil, ""},
		{"unknown node group", []string{"--nodes=0:3:nope"}, `node group "nope"`},
		{"unknown feature gate", []string{"--feature-gates=NoSuchGate=true"}, "NoSuchGate"},
		{"missing cloud config", []string{"--cloud-config=/nonexistent.yaml"}, "/nonexistent.yaml"},
		{"externalgrpc given a kwok file", []string{"--cloud-provider=externalgrpc"}, "address is required"},
		{"clusterapi: unreadable management kubeconfig", []string{"--cloud-provider=clusterapi", "--cloud-config=/nonexistent.kubeconfig"}, "clusterapi management cluster: --kubeconfig=/nonexistent.kubeconfig"},
		{"clusterapi: management cluster unreachable", []string{"--cloud-provider=clusterapi", "--cloud-config=testdata/unreachable.kubeconfig"}, "clusterapi provider: API discovery"},
		{"clusterapi: bad auto-discovery", []string{"--cloud-provider=clusterapi", "--cloud-config=testdata/unreachable.kubeconfig", "--node-group-auto-discovery=aws:x=y"}, `unknown discoverer "aws"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts, err := config.Parse(append([]string{"--cloud-config=../../deploy/kwok/kwok-provider.yaml"}, tc.args...))
			if err != nil {
				t.Fatal(err)
			}
			client := fake.NewClientset()
			var a *autoscaler.Autoscaler
			provider, err := newProvider(opts, client, nil)
			if err == nil {
				a, err = autoscaler.New(context.Background(), opts, autoscaler.Env{Client: client, Provider: provider})
				_ = provider.Cleanup()
			}
			if tc.wantErr == "" {
				if err != nil || a == nil {
					t.Fatalf("wiring: %v", err)
				}
				a.Shutdown()
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one naming %q", err, tc.wantErr)
			}
			if a != nil {
				t.Error("an autoscaler returned with an error")
			}
		})
	}
}
