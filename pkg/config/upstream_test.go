package config

import (
	"errors"
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/klog/v2"
)

// withKlog is the autoscaler's flag set with klog's, as Parse builds it.
func withKlog() *pflag.FlagSet {
	fs := FlagSet()
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	fs.AddGoFlagSet(klogFlags)
	fs.SetNormalizeFunc(cliflag.WordSepNormalizeFunc)
	return fs
}

func TestUpstreamTableMatchesTheFlags(t *testing.T) {
	fs := withKlog()
	seen := map[string]bool{}
	for _, f := range UpstreamFlags() {
		if seen[f.Name] {
			t.Errorf("--%s listed twice", f.Name)
		}
		seen[f.Name] = true
		defined := fs.Lookup(f.Name) != nil
		switch f.Support {
		case Supported, Different:
			if !defined {
				t.Errorf("--%s is %s but not defined", f.Name, f.Support)
			}
		case Refused:
			if defined {
				t.Errorf("--%s is refused but defined", f.Name)
			}
			if f.Note == "" {
				t.Errorf("--%s is refused without saying what to use instead", f.Name)
			}
		default:
			t.Errorf("--%s: unknown support %q", f.Name, f.Support)
		}
		if f.Support == Different && f.Note == "" {
			t.Errorf("--%s differs without saying how", f.Name)
		}
	}
}

func TestParseNamesEveryUnsupportedFlag(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string // in the error, in this order
		// notes are texts the error must carry (what to use instead).
		notes []string
	}{
		{name: "three unknown flags", args: []string{"--no-such-a=1", "--scan-interval=5s", "--no-such-b", "--no-such-c", "x"},
			want: []string{"--no-such-a: unknown flag", "--no-such-b: unknown flag", "--no-such-c: unknown flag"}},
		{name: "refused upstream flags say what instead", args: []string{"--gpu-total=nvidia:0:8", "--kubernetes", "https://x", "--expander=priority", "--ignore-taint=a"},
			want:  []string{"--gpu-total:", "--kubernetes:", "--ignore-taint:"},
			notes: []string{"use --kubeconfig", "--max-nodes-total"}},
		{name: "each flag once", args: []string{"--no-such=1", "--no-such=2"}, want: []string{"1 unsupported flag(s)", "--no-such: unknown flag"}},
		{name: "shorthand", args: []string{"-q"}, want: []string{"--q: unknown flag"}},
		{name: "a value that looks like a flag is not one", args: []string{"--namespace", "-x", "--no-such"}, want: []string{"1 unsupported flag(s)", "--no-such"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.args)
			var u *UnsupportedFlagsError
			if !errors.As(err, &u) {
				t.Fatalf("Parse(%v) = %v, want an UnsupportedFlagsError", tc.args, err)
			}
			msg := err.Error()
			at := 0
			for _, w := range tc.want {
				i := strings.Index(msg[at:], w)
				if i < 0 {
					t.Fatalf("error lacks %q after offset %d:\n%s", w, at, msg)
				}
				at += i + len(w)
			}
			for _, n := range tc.notes {
				if !strings.Contains(msg, n) {
					t.Errorf("error lacks %q:\n%s", n, msg)
				}
			}
		})
	}
}

// The flags of a typical upstream Helm values file all parse.
func TestParseUpstreamValuesFile(t *testing.T) {
	args := []string{
		"--cloud-provider=clusterapi", "--node-group-auto-discovery=clusterapi:namespace=default",
		"--balance-similar-node-groups=true", "--balancing-ignore-label=example.com/pool", "--balancing-ignore-label=example.com/rack",
		"--cordon-node-before-terminating=false", "--kube-client-qps=50", "--kube-client-burst=100", "--profiling",
		"--scale-down-unready-time=30m", "--max-total-unready-percentage=33", "--ok-total-unready-count=5",
		"--skip-nodes-with-custom-controller-pods=false", "--daemonset-eviction-for-empty-nodes=true", "--daemonset-eviction-for-occupied-nodes=false",
		"--max-bulk-soft-taint-count=0", "--emit-per-nodegroup-metrics=true",
		"--expander=least-waste,priority", "--skip-nodes-with-local-storage=false",
		"--v=4", "--stderrthreshold=info", "--logtostderr",
	}
	o, err := Parse(args)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	got := []any{o.Balancing, o.ScaleDown.CordonNodeBeforeTerminating, o.KubeClient.QPS, o.KubeClient.Burst, o.Profiling,
		o.ScaleDown.UnreadyTime, o.Health.MaxTotalUnreadyPercentage, o.Health.OkTotalUnreadyCount,
		o.ScaleDown.SkipNodesWithCustomControllerPods, o.ScaleDown.DaemonSetEvictionForEmptyNodes, o.ScaleDown.DaemonSetEvictionForOccupiedNodes,
		o.Expanders, o.ScaleDown.SkipNodesWithLocalStorage}
	want := []any{BalancingOptions{Enabled: true, IgnoreLabels: []string{"example.com/pool", "example.com/rack"}}, false, 50.0, 100, true,
		30 * time.Minute, 33.0, 5, false, true, false, []string{"least-waste", "priority"}, false}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("parsed (-want +got):\n%s", diff)
	}
}

func TestNewFlagDefaultsAreUpstreams(t *testing.T) {
	o, err := Parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	got := []any{o.Balancing.Enabled, o.ScaleDown.CordonNodeBeforeTerminating, o.KubeClient, o.Profiling,
		o.ScaleDown.SkipNodesWithCustomControllerPods, o.ScaleDown.DaemonSetEvictionForEmptyNodes, o.ScaleDown.DaemonSetEvictionForOccupiedNodes}
	want := []any{false, true, KubeClientOptions{QPS: 5, Burst: 10, ContentType: "application/json", UserAgent: "cluster-autoscaler"}, false,
		true, false, true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
}

func TestCompatFlagsRefuseWhatCannotBe(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--estimator=oldbinpacking"}, "--estimator"},
		{[]string{"--enable-dynamic-resource-allocation=false"}, "--enable-dynamic-resource-allocation"},
		{[]string{"--balancing-label=a", "--balancing-ignore-label=b"}, "cannot be combined"},
		{[]string{"--kube-client-qps=0"}, "--kube-client-qps"},
		{[]string{"--max-bulk-soft-taint-count=-1"}, "--max-bulk-soft-taint-count"},
		{[]string{"--node-group-auto-discovery=clusterapi:namespace=x"}, "only --cloud-provider=clusterapi"},
	}
	for _, tc := range tests {
		if _, err := Parse(tc.args); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%v) = %v, want an error with %q", tc.args, err, tc.want)
		}
	}
	if _, err := Parse([]string{"--estimator=binpacking", "--enable-dynamic-resource-allocation=true"}); err != nil {
		t.Errorf("the only accepted values: %v", err)
	}
}
