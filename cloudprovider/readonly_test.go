package cloudprovider

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// recorder is a provider and its one group that note every call.
type recorder struct {
	calls []string
}

func (r *recorder) note(call string) { r.calls = append(r.calls, call) }

func (r *recorder) Name() string { r.note("Name"); return "rec" }
func (r *recorder) NodeGroups() []NodeGroup {
	r.note("NodeGroups")
	return []NodeGroup{&recGroup{r: r, id: "g"}}
}
func (r *recorder) NodeGroupForNode(n *corev1.Node) (NodeGroup, error) {
	r.note("NodeGroupForNode")
	if n.Name == "unmanaged" {
		return nil, nil
	}
	return &recGroup{r: r, id: "g"}, nil
}
func (r *recorder) HasInstance(*corev1.Node) (bool, error) { r.note("HasInstance"); return true, nil }
func (r *recorder) Pricing() (PricingModel, error) {
	r.note("Pricing")
	return nil, ErrNotImplemented
}
func (r *recorder) GetResourceLimiter() (*ResourceLimiter, error) {
	r.note("GetResourceLimiter")
	return nil, nil
}
func (r *recorder) Reservations() ([]ReservedCapacity, error) {
	r.note("Reservations")
	return nil, ErrNotImplemented
}
func (r *recorder) Refresh(context.Context) error { r.note("Refresh"); return nil }
func (r *recorder) Cleanup() error                { r.note("Cleanup"); return nil }

// recordingCloser offers Close too.
type recordingCloser struct{ *recorder }

func (c recordingCloser) Close() error { c.note("Close"); return nil }

type recGroup struct {
	r  *recorder
	id string
}

func (g *recGroup) Id() string               { return g.id }
func (g *recGroup) MinSize() int             { g.r.note("MinSize"); return 0 }
func (g *recGroup) MaxSize() int             { g.r.note("MaxSize"); return 3 }
func (g *recGroup) TargetSize() (int, error) { g.r.note("TargetSize"); return 1, nil }
func (g *recGroup) IncreaseSize(context.Context, int) ([]string, error) {
	g.r.note("IncreaseSize")
	return nil, nil
}
func (g *recGroup) AtomicIncreaseSize(context.Context, int) ([]string, error) {
	g.r.note("AtomicIncreaseSize")
	return nil, nil
}
func (g *recGroup) DeleteNodes(context.Context, []*corev1.Node) error {
	g.r.note("DeleteNodes")
	return nil
}
func (g *recGroup) ForceDeleteNodes(context.Context, []*corev1.Node) error {
	g.r.note("ForceDeleteNodes")
	return nil
}
func (g *recGroup) DecreaseTargetSize(context.Context, int) error {
	g.r.note("DecreaseTargetSize")
	return nil
}
func (g *recGroup) Debug() string               { return "g" }
func (g *recGroup) Nodes() ([]Instance, error)  { g.r.note("Nodes"); return nil, nil }
func (g *recGroup) CapacityReservation() string { g.r.note("CapacityReservation"); return "block-1" }
func (g *recGroup) TemplateNodeInfo() (*NodeTemplate, error) {
	g.r.note("TemplateNodeInfo")
	return &NodeTemplate{}, nil
}
func (g *recGroup) GetOptions(NodeGroupAutoscalingOptions) (*NodeGroupAutoscalingOptions, error) {
	g.r.note("GetOptions")
	return nil, ErrNotImplemented
}

// Every write of a view's group returns ErrReadOnly, names the group and
// reaches nothing beneath.
func TestReadOnlyRefusesWrites(t *testing.T) {
	ctx := context.Background()
	nodes := []*corev1.Node{{}}
	writes := map[string]func(NodeGroup) error{
		"IncreaseSize":       func(g NodeGroup) error { _, err := g.IncreaseSize(ctx, 1); return err },
		"AtomicIncreaseSize": func(g NodeGroup) error { _, err := g.AtomicIncreaseSize(ctx, 2); return err },
		"DeleteNodes":        func(g NodeGroup) error { return g.DeleteNodes(ctx, nodes) },
		"ForceDeleteNodes":   func(g NodeGroup) error { return g.ForceDeleteNodes(ctx, nodes) },
		"DecreaseTargetSize": func(g NodeGroup) error { return g.DecreaseTargetSize(ctx, -1) },
	}
	for name, write := range writes {
		t.Run(name, func(t *testing.T) {
			rec := &recorder{}
			view := ReadOnly(rec)
			byNode, err := view.NodeGroupForNode(&corev1.Node{})
			if err != nil {
				t.Fatal(err)
			}
			for _, g := range append(view.NodeGroups(), byNode) {
				err := write(g)
				if !errors.Is(err, ErrReadOnly) {
					t.Errorf("%s: %v, want ErrReadOnly", name, err)
				}
				if err == nil || !strings.Contains(err.Error(), "node group g") || !strings.Contains(err.Error(), name) {
					t.Errorf("%s: error %q names neither the group nor the call", name, err)
				}
			}
			if slices.Contains(rec.calls, name) {
				t.Errorf("%s reached the provider: calls %v", name, rec.calls)
			}
		})
	}
}

// Reads go through unchanged, optional methods included.
func TestReadOnlyReads(t *testing.T) {
	rec := &recorder{}
	view := ReadOnly(rec)
	if err := view.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	g := view.NodeGroups()[0]
	if n, err := g.TargetSize(); n != 1 || err != nil {
		t.Errorf("TargetSize %d %v", n, err)
	}
	if g.Id() != "g" || g.MinSize() != 0 || g.MaxSize() != 3 {
		t.Errorf("group %s %d..%d", g.Id(), g.MinSize(), g.MaxSize())
	}
	if _, err := g.GetOptions(NodeGroupAutoscalingOptions{}); !errors.Is(err, ErrNotImplemented) {
		t.Errorf("GetOptions: %v, want the provider's ErrNotImplemented", err)
	}
	if rn, ok := g.(ReservationNamer); !ok || rn.CapacityReservation() != "block-1" {
		t.Errorf("the group's CapacityReservation is hidden by the view")
	}
	_, _ = g.Nodes()
	_, _ = g.TemplateNodeInfo()
	_, _ = view.Reservations()
	_, _ = view.Pricing()
	_, _ = view.GetResourceLimiter()
	_, _ = view.HasInstance(&corev1.Node{})
	want := []string{"Refresh", "NodeGroups", "TargetSize", "MinSize", "MaxSize", "GetOptions", "CapacityReservation",
		"Nodes", "TemplateNodeInfo", "Reservations", "Pricing", "GetResourceLimiter", "HasInstance"}
	if !slices.Equal(rec.calls, want) {
		t.Errorf("calls %v, want %v", rec.calls, want)
	}
	if g2 := view.NodeGroups()[0]; g2.Id() != g.Id() {
		t.Errorf("views of one group differ")
	}
	if g, err := view.NodeGroupForNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "unmanaged"}}); g != nil || err != nil {
		t.Errorf("unmanaged node: group %v (%v), want a nil interface", g, err)
	}
	if ReadOnly(view) != view {
		t.Error("a view of a view is not the view")
	}
}

// Cleanup never calls the provider's Cleanup; it releases local resources
// through Close when the provider has it.
func TestReadOnlyCleanup(t *testing.T) {
	for _, tc := range []struct {
		name string
		cp   func(*recorder) CloudProvider
		want []string
	}{
		{"no Close", func(r *recorder) CloudProvider { return r }, nil},
		{"Close", func(r *recorder) CloudProvider { return recordingCloser{r} }, []string{"Close"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			if err := ReadOnly(tc.cp(rec)).Cleanup(); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(rec.calls, tc.want) {
				t.Errorf("calls %v, want %v", rec.calls, tc.want)
			}
		})
	}
}
