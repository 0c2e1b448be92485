package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/externalgrpc"
	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/kwok"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
	"github.com/dra-autoscaler/dra-autoscaler/test/e2e/framework"
)

// badAnswers is a server-side provider that answers what a broken server
// would, beside the real kwok provider's groups: extra entries in
// NodeGroups, a group for nodes it does not list, extra reservations.
type badAnswers struct {
	cloudprovider.CloudProvider // the kwok provider: the valid groups
	groups                      []cloudprovider.NodeGroup
	// ghost is answered for nodes labelled ghostLabel=ghost.id.
	ghost        *answerGroup
	reservations []cloudprovider.ReservedCapacity
}

const ghostLabel = "e2e.dra-autoscaler.io/ghost-group"

func (b *badAnswers) NodeGroups() []cloudprovider.NodeGroup {
	return append(b.CloudProvider.NodeGroups(), b.groups...)
}

func (b *badAnswers) NodeGroupForNode(n *corev1.Node) (cloudprovider.NodeGroup, error) {
	if n.Labels[ghostLabel] == b.ghost.id {
		return b.ghost, nil
	}
	return b.CloudProvider.NodeGroupForNode(n)
}

func (b *badAnswers) Reservations() ([]cloudprovider.ReservedCapacity, error) {
	rs, err := b.CloudProvider.Reservations()
	if err != nil && !errors.Is(err, cloudprovider.ErrNotImplemented) {
		return nil, err
	}
	return append(rs, b.reservations...), nil
}

// answerGroup is a group that only answers (sizes, target, template) and
// never scales.
type answerGroup struct {
	id, debug        string
	min, max, target int
	template         *cloudprovider.NodeTemplate
}

var errAnswerOnly = errors.New("an answer-only group does not scale")

func (g *answerGroup) Id() string                                          { return g.id }
func (g *answerGroup) MinSize() int                                        { return g.min }
func (g *answerGroup) MaxSize() int                                        { return g.max }
func (g *answerGroup) Debug() string                                       { return g.debug }
func (g *answerGroup) TargetSize() (int, error)                            { return g.target, nil }
func (g *answerGroup) IncreaseSize(context.Context, int) ([]string, error) { return nil, errAnswerOnly }
func (g *answerGroup) AtomicIncreaseSize(context.Context, int) ([]string, error) {
	return nil, errAnswerOnly
}
func (g *answerGroup) DeleteNodes(context.Context, []*corev1.Node) error      { return errAnswerOnly }
func (g *answerGroup) ForceDeleteNodes(context.Context, []*corev1.Node) error { return errAnswerOnly }
func (g *answerGroup) DecreaseTargetSize(context.Context, int) error          { return errAnswerOnly }
func (g *answerGroup) Nodes() ([]cloudprovider.Instance, error)               { return nil, nil }
func (g *answerGroup) TemplateNodeInfo() (*cloudprovider.NodeTemplate, error) {
	if g.template == nil {
		return nil, cloudprovider.ErrNotImplemented
	}
	return g.template.DeepCopy(), nil
}
func (g *answerGroup) GetOptions(cloudprovider.NodeGroupAutoscalingOptions) (*cloudprovider.NodeGroupAutoscalingOptions, error) {
	return nil, cloudprovider.ErrNotImplemented
}

// templateWith is a template whose node is named after the group, with
// one GPU slice edited by edit.
func (s *scenario) templateWith(group string, edit func(*resourceapi.ResourceSlice)) *cloudprovider.NodeTemplate {
	node := group + "-template"
	slice := builder.ResourceSlice(node+"-gpu", node, s.gpu, node).Devices(builder.Device("gpu-0")).Obj()
	edit(slice)
	return &cloudprovider.NodeTemplate{Node: builder.Node(node).CPU("8").Memory("32Gi").Obj(), ResourceSlices: []*resourceapi.ResourceSlice{slice}}
}

// A server (in the test process, over mTLS) answers one valid CPU group
// and, beside it, every kind of bad input: a group without id, the CPU
// group's id twice, a negative minimum, a minimum above the maximum, a
// negative target size, a template slice of another node, a template pool
// short of slices, a node in a group it does not list, a reservation
// ending before it starts. Each is told by a Warning on the status
// ConfigMap naming its group, and the loop goes on: the pending pod gets
// its CPU node, no pass fails.
func TestExternalGRPCBadInput(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	cpu := s.cpuGroup("cpu", 2)
	kp := s.kwokBehindGRPC(t, cpu)
	noID := s.ns + "-no-id"
	negMin := &answerGroup{id: s.group("neg-min"), min: -1, max: 3}
	inverted := &answerGroup{id: s.group("inverted"), min: 3, max: 2}
	negTarget := &answerGroup{id: s.group("neg-target"), max: 3, target: -2}
	badSlice := &answerGroup{id: s.group("bad-slice"), max: 3}
	badSlice.template = s.templateWith(badSlice.id, func(sl *resourceapi.ResourceSlice) { sl.Spec.NodeName = ptr.To(s.ns + "-elsewhere") })
	shortPool := &answerGroup{id: s.group("short-pool"), max: 3}
	shortPool.template = s.templateWith(shortPool.id, func(sl *resourceapi.ResourceSlice) { sl.Spec.Pool.ResourceSliceCount = 2 })
	start := time.Now().Add(time.Hour)
	bad := &badAnswers{CloudProvider: kp,
		groups: []cloudprovider.NodeGroup{&answerGroup{debug: noID, max: 3}, &answerGroup{id: cpu.Name, min: 1, max: 1},
			negMin, inverted, negTarget, badSlice, shortPool},
		ghost: &answerGroup{id: s.group("ghost"), max: 3},
		reservations: []cloudprovider.ReservedCapacity{{ID: s.ns + "-backwards", Kind: cloudprovider.ReservationCapacityBlock,
			NodeGroups: []string{cpu.Name}, Count: 1, Start: start, End: start.Add(-time.Minute)}},
	}
	a := s.c.StartAutoscaler(t, kwok.Config{}, "--cloud-provider=externalgrpc", "--cloud-config="+framework.ServeGRPC(t, bad), "--namespace="+s.ns)
	// A node the server puts in its unlisted group (no capacity, no test
	// label: no pod lands there).
	s.c.Create(s.ctx, t, framework.Kwok(builder.Node(s.ns+"-stray").Label(ghostLabel, bad.ghost.id).Obj()))
	s.c.Create(s.ctx, t, s.pod("web").CPU("3").Obj())

	want := []struct{ reason, rpc, says string }{
		{externalgrpc.ReasonInvalidNodeGroup, "NodeGroups", fmt.Sprintf("(debug %q) has an empty id", noID)},
		{externalgrpc.ReasonInvalidNodeGroup, "NodeGroups", fmt.Sprintf("node group %q is listed more than once", cpu.Name)},
		{externalgrpc.ReasonInvalidNodeGroup, "NodeGroups", fmt.Sprintf("node group %q: negative minSize -1", negMin.id)},
		{externalgrpc.ReasonInvalidNodeGroup, "NodeGroups", fmt.Sprintf("node group %q: maxSize 2 below minSize 3", inverted.id)},
		{externalgrpc.ReasonInvalidNodeGroup, "NodeGroupTargetSize", fmt.Sprintf("node group %q: negative target size -2", negTarget.id)},
		{externalgrpc.ReasonInvalidTemplate, "NodeGroupTemplate", fmt.Sprintf("node group %q: template rejected: template resource slice %q does not name the template node", badSlice.id, badSlice.id+"-template-gpu")},
		{externalgrpc.ReasonInvalidTemplate, "NodeGroupTemplate", fmt.Sprintf("node group %q: template rejected: template pool %q", shortPool.id, shortPool.id+"-template")},
		{externalgrpc.ReasonUnknownNodeGroup, "NodeGroupForNode", fmt.Sprintf("node group %q, answered for the cluster's nodes, is not one NodeGroups listed", bad.ghost.id)},
		{externalgrpc.ReasonInvalidReservation, "Reservations", fmt.Sprintf("node group %q: reservation %s: ends", cpu.Name, s.ns+"-backwards")},
	}
	framework.Eventually(s.ctx, t, 2*time.Minute, "a Warning on the status ConfigMap for each bad answer", func(ctx context.Context) (bool, string, error) {
		list, err := s.c.Client.CoreV1().Events(s.ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=cluster-autoscaler-status"})
		if err != nil {
			return false, "", err
		}
		var missing []string
		for _, w := range want {
			found := false
			for _, e := range list.Items {
				found = found || e.Type == corev1.EventTypeWarning && e.Reason == w.reason && e.InvolvedObject.Kind == "ConfigMap" &&
					strings.Contains(e.Message, " "+w.rpc+": ") && strings.Contains(e.Message, w.says)
			}
			if !found {
				missing = append(missing, w.reason+" "+w.rpc+": "+w.says)
			}
		}
		return len(missing) == 0, fmt.Sprintf("missing %q", missing), nil
	})
	s.waitOnGroup(t, "web", cpu.Name)
	m, err := a.Metrics(s.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v := metricValue(m, "cluster_autoscaler_errors_total", `type="cloudProviderError"`); v != 0 {
		t.Errorf("%v passes failed with cloudProviderError: bad input must not fail the pass", v)
	}
	// Each problem is told once, not on every pass.
	list, err := s.c.Client.CoreV1().Events(s.ns).List(s.ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=cluster-autoscaler-status"})
	if err != nil {
		t.Fatal(err)
	}
	ours := map[string]bool{externalgrpc.ReasonInvalidNodeGroup: true, externalgrpc.ReasonInvalidTemplate: true,
		externalgrpc.ReasonUnknownNodeGroup: true, externalgrpc.ReasonInvalidReservation: true}
	for _, e := range list.Items {
		if ours[e.Reason] && e.Count > 1 {
			t.Errorf("event %s %q recorded %d times", e.Reason, e.Message, e.Count)
		}
	}
}
