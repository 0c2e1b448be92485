package config

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseDefaultsAreUpstreams(t *testing.T) {
	o, err := Parse(nil)
	if err != nil {
		t.Fatalf("Parse(nil): %v", err)
	}
	tests := []struct {
		flag      string
		got, want any
	}{
		{"scan-interval", o.ScanInterval, 10 * time.Second},
		{"max-node-provision-time", o.MaxNodeProvisionTime, 15 * time.Minute},
		{"expendable-pods-priority-cutoff", o.ExpendablePodsPriorityCutoff, -10},
		{"address", o.Address, ":8085"},
		{"leader-elect", o.LeaderElection.LeaderElect, true},
		{"leader-elect-resource-name", o.LeaderElection.ResourceName, "cluster-autoscaler"},
		{"leader-elect-resource-namespace", o.LeaderElection.ResourceNamespace, "kube-system"},
		{"leader-elect-resource-lock", o.LeaderElection.ResourceLock, "leases"},
		{"expander", o.Expanders, []string{"reserved", "least-waste"}},
		{"max-nodes-total", o.MaxNodesTotal, 0},
		{"cores-total", o.CoresTotal, Range{Min: 0, Max: 320000}},
		{"memory-total", o.MemoryTotal, Range{Min: 0, Max: 6400000}},
		{"max-nodes-per-scaleup", o.MaxNodesPerScaleUp, 1000},
		{"max-nodegroup-binpacking-duration", o.MaxNodeGroupBinpackingDuration, 10 * time.Second},
		{"new-pod-scale-up-delay", o.NewPodScaleUpDelay, time.Duration(0)},
		{"initial-node-group-backoff-duration", o.InitialNodeGroupBackoffDuration, 5 * time.Minute},
		{"max-node-group-backoff-duration", o.MaxNodeGroupBackoffDuration, 30 * time.Minute},
		{"node-group-backoff-reset-timeout", o.NodeGroupBackoffResetTimeout, 3 * time.Hour},
		{"priority-expander-configmap", o.PriorityExpanderConfigMap, "cluster-autoscaler-priority-expander"},
		{"nodes", len(o.NodeGroups), 0},
		{"max-total-unready-percentage", o.Health.MaxTotalUnreadyPercentage, 45.0},
		{"ok-total-unready-count", o.Health.OkTotalUnreadyCount, 3},
		{"scale-down-unready-enabled", o.ScaleDown.UnreadyEnabled, true},
		{"scale-down-unready-time", o.ScaleDown.UnreadyTime, 20 * time.Minute},
	}
	for _, tc := range tests {
		if diff := cmp.Diff(tc.want, tc.got); diff != "" {
			t.Errorf("--%s default (-want +got):\n%s", tc.flag, diff)
		}
	}
}

func TestParseValues(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		check func(*Options) any
		want  any
	}{
		{"nodes in order", []string{"--nodes=0:10:gpu-a100", "--nodes", "1:3:cpu"},
			func(o *Options) any { return o.NodeGroups },
			[]NodeGroupSpec{{Name: "gpu-a100", Min: 0, Max: 10}, {Name: "cpu", Min: 1, Max: 3}}},
		{"nodes name keeps colons after the second", []string{"--nodes=2:2:pool:x"},
			func(o *Options) any { return o.NodeGroups },
			[]NodeGroupSpec{{Name: "pool:x", Min: 2, Max: 2}}},
		// Deprecated, no effect: a deployment that sets it still starts.
		{"gang-placement-cycle accepted", []string{"--gang-placement-cycle=false", "--cores-total=8:64"},
			func(o *Options) any { return o.CoresTotal }, Range{Min: 8, Max: 64}},
		{"cores-total", []string{"--cores-total=8:64"},
			func(o *Options) any { return o.CoresTotal }, Range{Min: 8, Max: 64}},
		{"memory-total", []string{"--memory-total=0:1024"},
			func(o *Options) any { return o.MemoryTotal }, Range{Min: 0, Max: 1024}},
		{"expander chain trimmed", []string{"--expander=priority, least-waste,"},
			func(o *Options) any { return o.Expanders }, []string{"priority", "least-waste"}},
		{"durations", []string{"--scan-interval=30s", "--max-node-provision-time=5m"},
			func(o *Options) any { return []time.Duration{o.ScanInterval, o.MaxNodeProvisionTime} },
			[]time.Duration{30 * time.Second, 5 * time.Minute}},
		{"leader election off allows any renew deadline", []string{"--leader-elect=false", "--leader-elect-renew-deadline=1m"},
			func(o *Options) any { return o.LeaderElection.LeaderElect }, false},
		{"unready accounting", []string{"--max-total-unready-percentage=12.5", "--ok-total-unready-count=0",
			"--scale-down-unready-enabled=false", "--scale-down-unready-time=1h"},
			func(o *Options) any {
				return []any{o.Health.MaxTotalUnreadyPercentage, o.Health.OkTotalUnreadyCount, o.ScaleDown.UnreadyEnabled, o.ScaleDown.UnreadyTime}
			}, []any{12.5, 0, false, time.Hour}},
		{"lease name", []string{"--leader-elect-resource-name=ca", "--leader-elect-resource-namespace=autoscaling"},
			func(o *Options) any {
				return []string{o.LeaderElection.ResourceName, o.LeaderElection.ResourceNamespace}
			}, []string{"ca", "autoscaling"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o, err := Parse(tc.args)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.args, err)
			}
			if diff := cmp.Diff(tc.want, tc.check(o)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseErrorsNameTheFlag(t *testing.T) {
	tests := []struct {
		args []string
		// want are substrings the error must contain: the flag's name
		// and, where it matters, what was wrong.
		want []string
	}{
		{[]string{"--no-such-flag"}, []string{"no-such-flag"}},
		{[]string{"--scan-interval=often"}, []string{"scan-interval"}},
		{[]string{"--max-nodes-total=many"}, []string{"max-nodes-total"}},
		{[]string{"--leader-elect=maybe"}, []string{"leader-elect"}},
		{[]string{"--expendable-pods-priority-cutoff=low"}, []string{"expendable-pods-priority-cutoff"}},
		{[]string{"--nodes=1:2"}, []string{"--nodes", "min:max:name"}},
		{[]string{"--nodes=1:2:"}, []string{"--nodes", "min:max:name"}},
		{[]string{"--nodes=a:2:gpu"}, []string{"--nodes", "min"}},
		{[]string{"--nodes=-1:2:gpu"}, []string{"--nodes", "min"}},
		{[]string{"--nodes=0:b:gpu"}, []string{"--nodes", "max"}},
		{[]string{"--nodes=3:2:gpu"}, []string{"--nodes", "below min"}},
		{[]string{"--nodes=0:2:gpu", "--nodes=1:3:gpu"}, []string{"--nodes", "gpu", "twice"}},
		{[]string{"--cores-total=64"}, []string{"--cores-total", "min:max"}},
		{[]string{"--cores-total=a:b"}, []string{"--cores-total", "non-negative"}},
		{[]string{"--cores-total=-1:4"}, []string{"--cores-total", "non-negative"}},
		{[]string{"--memory-total=10:5"}, []string{"--memory-total", "below min"}},
		{[]string{"--memory-total=1:2:3"}, []string{"--memory-total", "min:max"}},
		{[]string{"--expander="}, []string{"--expander", "at least one"}},
		{[]string{"--expander=least-waste,cheapest"}, []string{"--expander", "cheapest"}},
		{[]string{"--scan-interval=0s"}, []string{"--scan-interval", "positive"}},
		{[]string{"--max-nodes-total=-1"}, []string{"--max-nodes-total", "negative"}},
		{[]string{"--max-nodes-per-scaleup=0"}, []string{"--max-nodes-per-scaleup", "positive"}},
		{[]string{"--max-node-provision-time=0s"}, []string{"--max-node-provision-time", "positive"}},
		{[]string{"--max-nodegroup-binpacking-duration=-1s"}, []string{"--max-nodegroup-binpacking-duration", "positive"}},
		{[]string{"--new-pod-scale-up-delay=-1s"}, []string{"--new-pod-scale-up-delay", "negative"}},
		{[]string{"--max-nomination-writes-per-pass=-1"}, []string{"--max-nomination-writes-per-pass", "negative"}},
		{[]string{"--initial-node-group-backoff-duration=1h"}, []string{"--max-node-group-backoff-duration", "--initial-node-group-backoff-duration"}},
		{[]string{"--address=8085"}, []string{"--address"}},
		{[]string{"--cloud-provider="}, []string{"--cloud-provider", "required"}},
		{[]string{"--leader-elect-renew-deadline=15s"}, []string{"--leader-elect-renew-deadline", "--leader-elect-lease-duration"}},
		{[]string{"--max-total-unready-percentage=101"}, []string{"--max-total-unready-percentage=101", "between 0 and 100"}},
		{[]string{"--max-total-unready-percentage=-1"}, []string{"--max-total-unready-percentage=-1", "between 0 and 100"}},
		{[]string{"--max-total-unready-percentage=half"}, []string{"max-total-unready-percentage"}},
		{[]string{"--ok-total-unready-count=-1"}, []string{"--ok-total-unready-count=-1", "negative"}},
		{[]string{"--scale-down-unready-time=0s"}, []string{"--scale-down-unready-time=0s", "positive"}},
		{[]string{"--scale-down-unready-enabled=sometimes"}, []string{"scale-down-unready-enabled"}},
		{[]string{"stray"}, []string{"unexpected arguments", "stray"}},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			o, err := Parse(tc.args)
			if err == nil {
				t.Fatalf("Parse(%q) = %+v, want an error", tc.args, o)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	if err := Default().Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	o := Default()
	o.ScanInterval = 0
	o.Expanders = []string{"nope"}
	o.CloudProvider = ""
	err := o.Validate()
	if err == nil {
		t.Fatal("Validate() = nil, want errors")
	}
	for _, w := range []string{"--scan-interval", "--expander", "--cloud-provider"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not mention %s", err, w)
		}
	}
}
