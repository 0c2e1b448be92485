package clusterapi

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
)

func TestBounds(t *testing.T) {
	k := newKeys(DefaultGroup)
	const minKey, maxKey = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size", "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size"
	for _, tc := range []struct {
		name      string
		ann       map[string]string
		min, max  int
		annotated bool
		err       string
	}{
		{name: "none", ann: map[string]string{}},
		{name: "both", ann: map[string]string{minKey: "1", maxKey: "10"}, min: 1, max: 10, annotated: true},
		{name: "max only: min counts as 0", ann: map[string]string{maxKey: "3"}, max: 3, annotated: true},
		{name: "min only: max counts as 0, an error below min", ann: map[string]string{minKey: "2"}, annotated: true, err: "is below"},
		{name: "min only zero", ann: map[string]string{minKey: "0"}, annotated: true},
		{name: "not an integer", ann: map[string]string{minKey: "one", maxKey: "3"}, annotated: true, err: "not an integer"},
		{name: "negative", ann: map[string]string{minKey: "0", maxKey: "-1"}, annotated: true, err: "must not be negative"},
		{name: "max below min", ann: map[string]string{minKey: "5", maxKey: "4"}, annotated: true, err: "max-size=4 is below"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			min, max, annotated, err := k.bounds(tc.ann)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || min != tc.min || max != tc.max || annotated != tc.annotated {
				t.Fatalf("got %d %d %v %v, want %d %d %v", min, max, annotated, err, tc.min, tc.max, tc.annotated)
			}
		})
	}
}

// The option annotations of upstream's README.
func TestOptions(t *testing.T) {
	k := newKeys(DefaultGroup)
	defaults := cloudprovider.NodeGroupAutoscalingOptions{ScaleDownUtilizationThreshold: 0.4, ScaleDownGpuUtilizationThreshold: 0.4,
		ScaleDownUnneededTime: time.Minute, MaxNodeProvisionTime: time.Hour}
	for _, tc := range []struct {
		name string
		ann  map[string]string
		want cloudprovider.NodeGroupAutoscalingOptions
		ok   bool
		bad  int
	}{
		{name: "none", ann: map[string]string{}, want: defaults},
		{name: "readme", ann: map[string]string{
			"cluster.x-k8s.io/autoscaling-options-scaledownutilizationthreshold":    "0.5",
			"cluster.x-k8s.io/autoscaling-options-scaledowngpuutilizationthreshold": "0.6",
			"cluster.x-k8s.io/autoscaling-options-scaledownunneededtime":            "10m0s",
			"cluster.x-k8s.io/autoscaling-options-scaledownunreadytime":             "30m0s",
			"cluster.x-k8s.io/autoscaling-options-maxnodeprovisiontime":             "20m0s",
		}, want: cloudprovider.NodeGroupAutoscalingOptions{ScaleDownUtilizationThreshold: 0.5, ScaleDownGpuUtilizationThreshold: 0.6,
			ScaleDownUnneededTime: 10 * time.Minute, ScaleDownUnreadyTime: 30 * time.Minute, MaxNodeProvisionTime: 20 * time.Minute}, ok: true},
		{name: "upper case value is lower-cased", ann: map[string]string{"cluster.x-k8s.io/autoscaling-options-scaledownunneededtime": "5M"},
			want: func() cloudprovider.NodeGroupAutoscalingOptions {
				d := defaults
				d.ScaleDownUnneededTime = 5 * time.Minute
				return d
			}(), ok: true},
		{name: "bad value ignored", ann: map[string]string{"cluster.x-k8s.io/autoscaling-options-scaledownutilizationthreshold": "half"},
			want: defaults, ok: true, bad: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok, bad := k.options(tc.ann, defaults)
			if got != tc.want || ok != tc.ok || len(bad) != tc.bad {
				t.Fatalf("got %+v %v %v, want %+v %v %d bad", got, ok, bad, tc.want, tc.ok, tc.bad)
			}
		})
	}
}

// Every auto-discovery example of upstream's README, and the malformed
// ones.
func TestParseDiscoverySpecs(t *testing.T) {
	for _, tc := range []struct {
		spec                   string
		namespace, clusterName string
		labels                 string
		err                    string
	}{
		{spec: "clusterapi:namespace=blue", namespace: "blue"},
		{spec: "clusterapi:clusterName=test1", clusterName: "test1"},
		{spec: "clusterapi:color=green,shape=square", labels: "color=green,shape=square"},
		{spec: "clusterapi:namespace=staging,clusterName=purple,owner=jim", namespace: "staging", clusterName: "purple", labels: "owner=jim"},
		{spec: "namespace=blue", err: "want clusterapi:"},
		{spec: "clusterapi:a=b:c", err: "want clusterapi:"},
		{spec: "aws:namespace=blue", err: "unknown discoverer"},
		{spec: "clusterapi:namespace", err: "is not key=value"},
		{spec: "clusterapi:a=b=c", err: "is not key=value"},
		{spec: "clusterapi:", err: "is not key=value"},
		{spec: "clusterapi:bad key=x", err: "bad key"},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			specs, err := parseDiscoverySpecs([]string{tc.spec})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			s := specs[0]
			want := labels.Everything().String()
			if tc.labels != "" {
				want = tc.labels
			}
			if s.namespace != tc.namespace || s.clusterName != tc.clusterName || s.labels.String() != want {
				t.Fatalf("got %q %q %q", s.namespace, s.clusterName, s.labels)
			}
		})
	}
}

func TestWatchNamespace(t *testing.T) {
	for _, tc := range []struct {
		specs []string
		want  string
	}{
		{nil, ""},
		{[]string{"clusterapi:namespace=a"}, "a"},
		{[]string{"clusterapi:namespace=a", "clusterapi:namespace=a,color=x"}, "a"},
		{[]string{"clusterapi:namespace=a", "clusterapi:namespace=b"}, ""},
		{[]string{"clusterapi:namespace=a", "clusterapi:color=x"}, ""},
	} {
		specs, err := parseDiscoverySpecs(tc.specs)
		if err != nil {
			t.Fatal(err)
		}
		if got := watchNamespace(specs); got != tc.want {
			t.Errorf("%v: got %q, want %q", tc.specs, got, tc.want)
		}
	}
}

func TestGetOptions(t *testing.T) {
	e := newEnv(t, nil, md("gpu").size(0, 3).ann("cluster.x-k8s.io/autoscaling-options-scaledownunneededtime", "3m"), md("cpu").size(0, 3))
	defaults := cloudprovider.NodeGroupAutoscalingOptions{ScaleDownUnneededTime: time.Minute, MaxNodeProvisionTime: time.Hour}
	got, err := e.group(gpuGroup).GetOptions(defaults)
	if err != nil || got.ScaleDownUnneededTime != 3*time.Minute || got.MaxNodeProvisionTime != time.Hour {
		t.Fatalf("options %+v, %v", got, err)
	}
	if _, err := e.group("MachineDeployment/team/cpu").GetOptions(defaults); err != cloudprovider.ErrNotImplemented {
		t.Fatalf("a group without option annotations: %v", err)
	}
}
