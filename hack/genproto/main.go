// Command genproto generates the Go code of the externalgrpc provider's
// .proto files without protoc: bufbuild/protocompile compiles them in
// process and the request is piped to protoc-gen-go and protoc-gen-go-grpc,
// which it builds from this module's tool pins. It is a module of its own
// so that those pins never move the root go.mod.
//
//	cd hack/genproto && go run . --root ../..
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/pluginpb"
)

// Protos are the files generated, relative to the repository root (which
// is also the import root, so the proto file paths match upstream's).
var Protos = []string{
	"cloudprovider/externalgrpc/protos/externalgrpc.proto",
	"cloudprovider/externalgrpc/protos/draext/v1/extension.proto",
}

var plugins = []struct{ name, pkg string }{
	{"protoc-gen-go", "google.golang.org/protobuf/cmd/protoc-gen-go"},
	{"protoc-gen-go-grpc", "google.golang.org/grpc/cmd/protoc-gen-go-grpc"},
}

func main() {
	root := flag.String("root", "../..", "repository root")
	flag.Parse()
	out, err := Generate(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "genproto:", err)
		os.Exit(1)
	}
	for name, content := range out {
		p := filepath.Join(*root, name)
		if err := os.WriteFile(p, content, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "genproto:", err)
			os.Exit(1)
		}
		fmt.Println("wrote", p)
	}
}

// Generate returns the generated files (path relative to root → content).
func Generate(root string) (map[string][]byte, error) {
	binDir, err := os.MkdirTemp("", "genproto")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(binDir)
	for _, p := range plugins {
		// Built in this module's context, so the versions are go.mod's.
		cmd := exec.Command("go", "build", "-o", filepath.Join(binDir, p.name), p.pkg)
		cmd.Stderr = os.Stderr
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("building %s: %w", p.name, err)
		}
	}
	c := protocompile.Compiler{
		Resolver:       protocompile.WithStandardImports(&protocompile.SourceResolver{ImportPaths: []string{root}}),
		SourceInfoMode: protocompile.SourceInfoStandard,
	}
	files, err := c.Compile(context.Background(), Protos...)
	if err != nil {
		return nil, fmt.Errorf("compiling: %w", err)
	}
	// The plugins want every file, dependencies first.
	var fds []*descriptorpb.FileDescriptorProto
	seen := map[string]bool{}
	var add func(f protoreflect.FileDescriptor)
	add = func(f protoreflect.FileDescriptor) {
		if seen[f.Path()] {
			return
		}
		seen[f.Path()] = true
		imps := f.Imports()
		for i := 0; i < imps.Len(); i++ {
			add(imps.Get(i).FileDescriptor)
		}
		fds = append(fds, protodesc.ToFileDescriptorProto(f))
	}
	for _, f := range files {
		add(f)
	}
	out := map[string][]byte{}
	for _, p := range plugins {
		req := &pluginpb.CodeGeneratorRequest{
			FileToGenerate: Protos,
			Parameter:      proto.String("paths=source_relative"),
			ProtoFile:      fds,
		}
		in, err := proto.Marshal(req)
		if err != nil {
			return nil, err
		}
		cmd := exec.Command(filepath.Join(binDir, p.name))
		cmd.Stdin = bytes.NewReader(in)
		var stdout bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("%s: %w", p.name, err)
		}
		var resp pluginpb.CodeGeneratorResponse
		if err := proto.Unmarshal(stdout.Bytes(), &resp); err != nil {
			return nil, fmt.Errorf("%s: reading its answer: %w", p.name, err)
		}
		if resp.Error != nil {
			return nil, fmt.Errorf("%s: %s", p.name, resp.GetError())
		}
		for _, f := range resp.File {
			out[f.GetName()] = []byte(f.GetContent())
		}
	}
	return out, nil
}
