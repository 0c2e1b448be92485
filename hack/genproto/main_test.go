package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestGeneratedCodeIsFresh fails when a .proto changed but its generated
// Go code was not regenerated (run `make generate-proto`).
func TestGeneratedCodeIsFresh(t *testing.T) {
	out, err := Generate("../..")
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 2*len(Protos) {
		t.Fatalf("generated %d files, want %d (a .pb.go and a _grpc.pb.go per proto)", len(out), 2*len(Protos))
	}
	for name, want := range out {
		got, err := os.ReadFile(filepath.Join("../..", name))
		if err != nil {
			t.Errorf("%s: %v (run make generate-proto)", name, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run make generate-proto", name)
		}
	}
}
