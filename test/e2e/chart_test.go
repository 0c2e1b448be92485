package e2e

import (
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/dra-autoscaler/dra-autoscaler/test/e2e/framework"
)

// chartRelease is the release the docs install (docs/install.md).
const chartRelease = "dra-autoscaler"

// chartArgs are the container args of the Deployment the chart renders.
func chartArgs(t *testing.T, objs []*unstructured.Unstructured) []string {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		if len(containers) != 1 {
			t.Fatalf("Deployment %s: %d containers, want 1", o.GetName(), len(containers))
		}
		args, _, err := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
		if err != nil || len(args) == 0 {
			t.Fatalf("Deployment %s: args %v (%v)", o.GetName(), args, err)
		}
		return args
	}
	t.Fatal("the chart rendered no Deployment")
	return nil
}

// The chart with its default values and the kwok provider applies to the
// control plane (server-side), and the autoscaler, run with the chart's
// flags as the chart's ServiceAccount (a TokenRequest token, the chart's
// RBAC), leads, scales up and down, and is never forbidden anything. Not
// parallel: it owns the release's lease and status in kube-system.
func TestChartRBAC(t *testing.T) {
	s := newScenario(t)
	objs := s.c.HelmRender(t, chartRelease, deployNS, "cloudProvider=kwok")
	applyDeploy(s.ctx, t, s.c, objs, chartRelease)
	// All of the chart's flags but where the pod would find its cloud
	// config and serve metrics: the test's node groups, a free port.
	var args []string
	for _, a := range chartArgs(t, objs) {
		if !strings.HasPrefix(a, "--cloud-config=") && !strings.HasPrefix(a, "--address=") {
			args = append(args, a)
		}
	}
	for _, want := range []string{"--leader-elect=true", "--leader-elect-resource-name=" + chartRelease, "--status-config-map-name=" + chartRelease + "-status"} {
		if !slices.Contains(args, want) {
			t.Fatalf("the chart's args %q have no %s", args, want)
		}
	}
	scaleUpAndDownAs(t, s, chartRelease, chartRelease+"-status", args...)
}

var helpFlag = regexp.MustCompile(`(?m)^\s+(?:-\w, )?--([a-z0-9][a-z0-9-]*)`)

// Every flag the chart's templates pass, for each provider and with every
// value that adds one, is a flag of the binary, and its value parses: the
// binary given the chart's args and --version accepts them all (it stops
// after parsing).
func TestChartFlagsExist(t *testing.T) {
	c := framework.Get(t)
	bin := c.AutoscalerBinary(t)
	help, _ := exec.Command(bin, "--help").CombinedOutput()
	known := map[string]bool{}
	for _, m := range helpFlag.FindAllStringSubmatch(string(help), -1) {
		known[m[1]] = true
	}
	if !known["cloud-provider"] || !known["v"] {
		t.Fatalf("no flags found in --help:\n%s", help)
	}
	groups := []string{"autoscalingGroups[0].name=g1", "autoscalingGroups[0].minSize=0", "autoscalingGroups[0].maxSize=3"}
	for name, sets := range map[string][]string{
		"kwok":         append([]string{"cloudProvider=kwok", "replicaCount=1"}, groups...),
		"clusterapi":   {"cloudProvider=clusterapi", "autoDiscovery.clusterName=c1", "autoDiscovery.namespace=ns1", "autoDiscovery.labels[0].pool=gpu", "clusterAPIKubeconfigSecret=mgmt"},
		"externalgrpc": append([]string{"cloudProvider=externalgrpc", "externalgrpc.config.address=grpc.example:8086", "externalgrpc.tlsSecret=grpc-client"}, groups...),
	} {
		t.Run(name, func(t *testing.T) {
			args := chartArgs(t, c.HelmRender(t, chartRelease, deployNS, sets...))
			var unknown []string
			for _, a := range args {
				flag, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
				if !strings.HasPrefix(a, "--") || !known[flag] {
					unknown = append(unknown, a)
				}
			}
			if len(unknown) > 0 {
				t.Errorf("the chart passes args the binary does not have: %q", unknown)
			}
			out, err := exec.Command(bin, append(args, "--version")...).CombinedOutput()
			if err != nil || !strings.HasPrefix(string(out), "dra-autoscaler ") {
				t.Errorf("the binary refused the chart's args %q: %v\n%s", args, err, out)
			}
		})
	}
}
