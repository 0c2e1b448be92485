package expander_test

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/expander"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/expander/leastnodes"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/expander/leastwaste"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/expander/mostpods"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/expander/price"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/expander/priority"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/expander/random"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

func pods(n int, cpu string) []*corev1.Pod {
	out := make([]*corev1.Pod, n)
	for i := range out {
		out[i] = builder.Pod("ns", "p").CPU(cpu).Memory("1Gi").Obj()
	}
	return out
}

func tmpl(cpu string, devices int) *cloudprovider.NodeTemplate {
	t := &cloudprovider.NodeTemplate{Node: builder.Node("t").CPU(cpu).Memory("16Gi").Obj()}
	if devices > 0 {
		var ds []*builder.DeviceBuilder
		for range devices {
			ds = append(ds, builder.Device("gpu"))
		}
		t.ResourceSlices = append(t.ResourceSlices, builder.ResourceSlice("s", "t", "gpu.example.com", "t").Devices(ds...).Obj())
	}
	return t
}

func TestStrategies(t *testing.T) {
	small := expander.Option{NodeGroup: "small", NodeCount: 2, Pods: pods(4, "1"), Template: tmpl("2", 1), DevicesUsed: 2, Price: 4}
	big := expander.Option{NodeGroup: "big", NodeCount: 1, Pods: pods(4, "1"), Template: tmpl("8", 8), DevicesUsed: 2, Price: 2}
	many := expander.Option{NodeGroup: "many", NodeCount: 3, Pods: pods(6, "1"), Template: tmpl("2", 0), Price: -1}
	prioSource := func(doc string, err error) priority.ConfigSource {
		return func() (map[string]string, bool, error) {
			return map[string]string{priority.ConfigKey: doc}, doc != "", err
		}
	}
	tests := []struct {
		name    string
		chain   expander.Chain
		options []expander.Option
		want    string
	}{
		{"least-waste counts devices", expander.Chain{leastwaste.New()}, []expander.Option{big, small}, "small"},
		{"most-pods", expander.Chain{mostpods.New()}, []expander.Option{small, many, big}, "many"},
		{"least-nodes", expander.Chain{leastnodes.New()}, []expander.Option{small, many, big}, "big"},
		{"price per pod, unknown price last", expander.Chain{price.New()}, []expander.Option{many, small, big}, "big"},
		{"priority", expander.Chain{priority.New(prioSource("10:\n- .*\n50:\n- sm.*\n", nil), nil)}, []expander.Option{big, small}, "small"},
		{"priority patterns match whole names", expander.Chain{priority.New(prioSource("50:\n- mall\n10:\n- big\n", nil), nil)}, []expander.Option{big, small}, "big"},
		{"broken priority config defers to the next", expander.Chain{priority.New(prioSource("x: [", nil), nil), leastnodes.New()}, []expander.Option{small, big}, "big"},
		{"priority source error defers", expander.Chain{priority.New(prioSource("", errors.New("boom")), nil), mostpods.New()}, []expander.Option{small, many}, "many"},
		{"chain narrows in order", expander.Chain{mostpods.New(), leastnodes.New()}, []expander.Option{small, big, many}, "many"},
		{"ties go to the first group by name", expander.Chain{mostpods.New()}, []expander.Option{small, big}, "big"},
		{"random picks one of them", expander.Chain{random.New(1)}, []expander.Option{small}, "small"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.chain.Choose(tc.options)
			if got == nil || got.NodeGroup != tc.want {
				t.Fatalf("chose %v, want %s", got, tc.want)
			}
		})
	}
	if (expander.Chain{mostpods.New()}).Choose(nil) != nil {
		t.Error("chose from no options")
	}
	// The owner of a broken config is told, not only the log.
	var warned []error
	chain := expander.Chain{priority.New(prioSource("10:\n- '['\n", nil), func(err error) { warned = append(warned, err) }), leastnodes.New()}
	if got := chain.Choose([]expander.Option{small, big}); got == nil || got.NodeGroup != "big" {
		t.Errorf("with a bad pattern chose %v, want big", got)
	}
	if len(warned) != 1 || !strings.Contains(warned[0].Error(), "[") {
		t.Errorf("warned %v, want one error naming the pattern", warned)
	}
}

func TestLeastWasteScores(t *testing.T) {
	full := expander.Option{NodeCount: 1, Pods: pods(2, "1"), Template: tmpl("2", 2), DevicesUsed: 2}
	if w := leastwaste.Waste(full); w > 0.34 { // cpu 0, devices 0, memory 14/16 idle
		t.Errorf("waste of a CPU- and device-full node = %.2f", w)
	}
	idleGPUs := full
	idleGPUs.DevicesUsed = 0
	if leastwaste.Waste(idleGPUs) <= leastwaste.Waste(full) {
		t.Error("idle devices do not count as waste")
	}
}

func TestBuild(t *testing.T) {
	factories := map[string]expander.Factory{"most-pods": func() (expander.Strategy, error) { return mostpods.New(), nil }}
	if c, err := expander.Build([]string{"most-pods"}, factories); err != nil || len(c) != 1 {
		t.Fatalf("Build = %v, %v", c, err)
	}
	if _, err := expander.Build([]string{"nope"}, factories); err == nil {
		t.Fatal("unknown expander accepted")
	}
}
