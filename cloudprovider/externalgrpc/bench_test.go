package externalgrpc

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkRefresh is one pass's snapshot (Refresh, GetCapabilities,
// NodeGroups, Reservations) of a server with 50 groups, over bufconn.
func BenchmarkRefresh(b *testing.B) {
	cp := &fakeCP{}
	for i := range 50 {
		cp.add(fmt.Sprintf("g%d", i), 0, 10)
	}
	e := start(b, cp, Config{})
	b.ResetTimer()
	for range b.N {
		if err := e.p.Refresh(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTemplate is fetching and checking one extension template (a
// Node, one slice, one pod) after a Refresh dropped the cache.
func BenchmarkTemplate(b *testing.B) {
	cp := &fakeCP{}
	cp.add("gpu", 0, 10).template = gpuTemplate("t")
	e := start(b, cp, Config{})
	b.ResetTimer()
	for range b.N {
		if err := e.p.Refresh(context.Background()); err != nil {
			b.Fatal(err)
		}
		if _, err := e.p.NodeGroups()[0].TemplateNodeInfo(); err != nil {
			b.Fatal(err)
		}
	}
}
