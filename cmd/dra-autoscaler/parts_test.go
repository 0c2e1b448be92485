package main

import (
	"context"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/config"
)

// Every way newParts can fail returns the error (no panic, nothing to
// clean up); success returns a cleanup to call.
func TestNewParts(t *testing.T) {
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
			p, cleanup, err := newParts(context.Background(), opts, fake.NewClientset(), nil)
			if tc.wantErr == "" {
				if err != nil || p == nil || cleanup == nil {
					t.Fatalf("newParts: %v", err)
				}
				cleanup()
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one naming %q", err, tc.wantErr)
			}
			if p != nil || cleanup != nil {
				t.Error("parts or cleanup returned with an error")
			}
		})
	}
}
