package framework

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"
	schedframework "k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot/snapshottest"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// panicky is the real framework with one extension point panicking on
// one node, as a plugin meeting a malformed object would.
type panicky struct {
	schedframework.Framework
	point, node string
}

func (p *panicky) RunPreFilterPlugins(ctx context.Context, st fwk.CycleState, pod *v1.Pod) (*fwk.PreFilterResult, *fwk.Status, sets.Set[string]) {
	if p.point == "PreFilter" {
		panic("nil map in PreFilter")
	}
	return p.Framework.RunPreFilterPlugins(ctx, st, pod)
}

func (p *panicky) RunFilterPlugins(ctx context.Context, st fwk.CycleState, pod *v1.Pod, ni fwk.NodeInfo) *fwk.Status {
	if p.point == "Filter" && ni.Node().Name == p.node {
		panic("index out of range in Filter")
	}
	return p.Framework.RunFilterPlugins(ctx, st, pod, ni)
}

func (p *panicky) RunReservePluginsReserve(ctx context.Context, st fwk.CycleState, pod *v1.Pod, node string) *fwk.Status {
	if p.point == "Reserve" && node == p.node {
		panic("nil pointer in Reserve")
	}
	return p.Framework.RunReservePluginsReserve(ctx, st, pod, node)
}

func TestPluginPanicBecomesAnErrorNamingPodAndNode(t *testing.T) {
	// Twelve nodes: the Filter pass runs on helper goroutines.
	var objs []any
	var names []string
	for i := range 12 {
		name := fmt.Sprintf("n%02d", i)
		objs, names = append(objs, builder.Node(name).Obj()), append(names, name)
	}
	tests := []struct {
		point, node string
		want        string
	}{
		{"PreFilter", "", "scheduler framework panicked on pod default/p: nil map in PreFilter"},
		{"Filter", "n07", "scheduler framework panicked on pod default/p, node n07: index out of range in Filter"},
		{"Reserve", "n00", "scheduler framework panicked on pod default/p, node n00: nil pointer in Reserve"},
	}
	for _, tc := range tests {
		t.Run(tc.point, func(t *testing.T) {
			r, ctx := newRunner(t, "")
			snapshottest.Load(t, r.Snapshot(), objs...)
			r.parallelism = 4
			r.fw = &panicky{Framework: r.fw, point: tc.point, node: tc.node}
			_, err := r.SchedulePod(ctx, builder.Pod(ns, "p").CPU("1").Obj(), names)
			var pe *PanicError
			if !errors.As(err, &pe) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("SchedulePod error = %v, want a PanicError %q", err, tc.want)
			}
			if len(pe.Stack) == 0 {
				t.Error("no stack kept")
			}
			if d := r.Snapshot().Depth(); d != 0 {
				t.Errorf("%d forks left open", d)
			}
			// The runner is usable again once the plugin behaves.
			r.fw = r.fw.(*panicky).Framework
			if p, err := r.SchedulePod(ctx, builder.Pod(ns, "q").CPU("1").Obj(), names); err != nil || p.Node == "" {
				t.Fatalf("next pod: placement %+v, err %v", p, err)
			}
		})
	}
}
