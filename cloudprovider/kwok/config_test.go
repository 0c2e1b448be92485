package kwok

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
)

const validGroup = `
- name: g
  minSize: 0
  maxSize: 3
  template:
    capacity: {cpu: 4, memory: 16Gi}
`

func TestParseConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want string
	}{
		{"empty", ``, "at least one node group is required"},
		{"malformed yaml", "nodeGroups: [", "yaml"},
		{"unknown top-level field", "nodeGroup: []", `unknown field "nodeGroup"`},
		{"unknown group field", "nodeGroups:\n- name: g\n  maxSize: 1\n  maxsizes: 2\n", `node group "g" (nodeGroups[0]): maxsizes: unknown field "maxsizes"`},
		{"max below min", "nodeGroups:\n- {name: g, minSize: 3, maxSize: 2}\n", `node group "g": maxSize (2) is less than minSize (3)`},
		{"negative min", "nodeGroups:\n- {name: g, minSize: -1, maxSize: 2}\n", `node group "g": minSize (-1) must not be negative`},
		{"negative max", "nodeGroups:\n- {name: g, maxSize: -2}\n", `maxSize (-2) must not be negative`},
		{"missing name", "nodeGroups:\n- {maxSize: 2}\n", `nodeGroups[0]: name is required`},
		{"bad name", "nodeGroups:\n- {name: GPU_8x, maxSize: 2}\n", `name "GPU_8x"`},
		{"duplicate names", "nodeGroups:" + validGroup + validGroup, `node group "g": duplicate name`},
		{"negative price", "nodeGroups:\n- {name: g, maxSize: 2, price: -1}\n", `price (-1) must not be negative`},
		{"bad capacity type", "nodeGroups:\n- {name: g, maxSize: 2, capacityType: cheap}\n", `capacityType "cheap"`},
		{"bad duration", "nodeGroups:\n- {name: g, maxSize: 2, bootDelay: 2x}\n", `node group "g" (nodeGroups[0]): bootDelay: time: unknown unit`},
		{"negative delay", "nodeGroups:\n- {name: g, maxSize: 2, driverDelay: -1s}\n", `driverDelay (-1s) must not be negative`},
		{"option threshold above 1", "nodeGroups:\n- {name: g, maxSize: 2, options: {scaleDownGpuUtilizationThreshold: 1.5}}\n", `options.scaleDownGpuUtilizationThreshold (1.5) must be between 0 and 1`},
		{"option time of zero", "nodeGroups:\n- {name: g, maxSize: 2, options: {scaleDownUnneededTime: 0s}}\n", `options.scaleDownUnneededTime (0s) must be positive`},
		{"option misspelt", "nodeGroups:\n- {name: g, maxSize: 2, options: {scaleDownUneededTime: 1h}}\n", `scaleDownUneededTime`},
		{"bad node quantity", "nodeGroups:\n- {name: g, maxSize: 2, template: {capacity: {memory: 12Gx}}}\n", `node group "g" (nodeGroups[0]): template.capacity[memory]: quantities must match`},
		{"negative node quantity", "nodeGroups:\n- {name: g, maxSize: 2, template: {capacity: {cpu: -1}}}\n", `template.capacity[cpu] (-1) must not be negative`},
		{"node quantity that overflows", "nodeGroups:\n- {name: g, maxSize: 2, template: {capacity: {cpu: 1e100}}}\n", `template.capacity[cpu] (10e99) is too large`},
		{"device over-consumes a counter", "nodeGroups:\n- {name: g, maxSize: 2, template: {drivers: [{driver: gpu.example.com, sharedCounters: [{name: mem, counters: {memory: {value: 10Gi}}}], devices: [{name: gpu-0, consumesCounters: [{counterSet: mem, counters: {memory: {value: 20Gi}}}]}]}]}}\n", `consumes 20Gi of counter "memory", but set "mem" holds 10Gi`},
		{"bad taint effect", "nodeGroups:\n- {name: g, maxSize: 2, template: {taints: [{key: a, effect: Never}]}}\n", `template.taints[0].effect "Never"`},
		{"bad label value", "nodeGroups:\n- {name: g, maxSize: 2, template: {labels: {a: 'not ok'}}}\n", `template.labels`},
		{"reserved label", "nodeGroups:\n- {name: g, maxSize: 2, template: {labels: {autoscaling.dra-autoscaler.io/node-group: x}}}\n", `set by the provider`},
		{"topology conflict", "nodeGroups:\n- {name: g, maxSize: 2, topology: {rack: a}, template: {labels: {rack: b}}}\n", `topology[rack]: "a" conflicts`},
		{"negative fault", "nodeGroups:\n- {name: g, maxSize: 2, faults: {outOfResourcesAfter: -1}}\n", `faults.outOfResourcesAfter (-1)`},
		{"both never-register faults", "nodeGroups:\n- {name: g, maxSize: 2, faults: {neverRegister: true, neverRegisterAfter: 1}}\n", `not both`},
		{"negative neverRegisterAfter", "nodeGroups:\n- {name: g, maxSize: 2, faults: {neverRegisterAfter: -1}}\n", `node group "g": faults.neverRegisterAfter (-1) must not be negative`},
		{"negative neverReadyAfter", "nodeGroups:\n- {name: g, maxSize: 2, faults: {neverReadyAfter: -2}}\n", `node group "g": faults.neverReadyAfter (-2) must not be negative`},
		{"both never-ready faults", "nodeGroups:\n- {name: g, maxSize: 2, faults: {neverReady: true, neverReadyAfter: 1}}\n", `set neverReady or neverReadyAfter, not both`},
		{"both driver faults", "nodeGroups:\n- {name: g, maxSize: 2, faults: {driversNeverPublish: true, incompletePool: true}}\n", `set driversNeverPublish or incompletePool, not both`},
		{"bad CSI driver name", "nodeGroups:\n- {name: g, maxSize: 2, template: {csiDrivers: [{name: 'Not A Driver'}]}}\n", `template.csiDrivers[0].name "Not A Driver"`},
		{"CSI driver twice", "nodeGroups:\n- {name: g, maxSize: 2, template: {csiDrivers: [{name: ebs.csi.aws.com}, {name: ebs.csi.aws.com}]}}\n", `template.csiDrivers[1].name "ebs.csi.aws.com": listed twice`},
		{"negative CSI limit", "nodeGroups:\n- {name: g, maxSize: 2, template: {csiDrivers: [{name: ebs.csi.aws.com, maxVolumes: -1}]}}\n", `template.csiDrivers[0].maxVolumes (-1) must not be negative`},
		{"failure rate above 1", "nodeGroups:\n- {name: g, maxSize: 2, faults: {failureRate: 1.5}}\n", `faults.failureRate (1.5) must be between 0 and 1`},
		{"negative failure rate", "nodeGroups:\n- {name: g, maxSize: 2, faults: {failureRate: -0.1}}\n", `faults.failureRate (-0.1) must be between 0 and 1`},
		{"nodes error rate above 1", "nodeGroups:\n- {name: g, maxSize: 2, faults: {nodesErrorRate: 2}}\n", `faults.nodesErrorRate (2) must be between 0 and 1`},
		{"negative target size error rate", "nodeGroups:\n- {name: g, maxSize: 2, faults: {targetSizeErrorRate: -1}}\n", `faults.targetSizeErrorRate (-1) must be between 0 and 1`},
		{"unknown failure mode", "nodeGroups:\n- {name: g, maxSize: 2, faults: {failureRate: 0.2, failureMode: later}}\n", `faults.failureMode "later": must be one of atRequest, neverRegister, neverReady`},
		{"negative visibility delay", "nodeGroups:\n- {name: g, maxSize: 2, faults: {instancesVisibleAfter: -1s}}\n", `faults.instancesVisibleAfter (-1s) must not be negative`},
		{"bad visibility delay", "nodeGroups:\n- {name: g, maxSize: 2, faults: {instancesVisibleAfter: soon}}\n", `node group "g" (nodeGroups[0]): faults.instancesVisibleAfter: time: invalid duration`},
		{"bad seed", "nodeGroups:\n- {name: g, maxSize: 2, faults: {seed: abc}}\n", `faults.seed`},
		{"bad state namespace", "stateNamespace: Kube_System\nnodeGroups:" + validGroup, `stateNamespace "Kube_System"`},
		{"decode error beside stateNamespace", "stateNamespace: kwok\nnodeGroups:\n- {name: g, maxSize: 2, bootDelay: 2x}\n", `node group "g" (nodeGroups[0]): bootDelay: time: unknown unit`},
		{"stateNamespace not a string", "stateNamespace: [a]\nnodeGroups:" + validGroup, `stateNamespace: cannot unmarshal array`},
		{"empty driver name", "nodeGroups:\n- {name: g, maxSize: 2, template: {drivers: [{devices: [{name: d}]}]}}\n", `node group "g": template.drivers[0].driver: driver name is required`},
		{"driver without devices", "nodeGroups:\n- {name: g, maxSize: 2, template: {drivers: [{driver: a.example.com}]}}\n", `at least one device is required`},
		{"duplicate driver", "nodeGroups:\n- {name: g, maxSize: 2, template: {drivers: [{driver: a.example.com, devices: [{name: d}]}, {driver: a.example.com, devices: [{name: d}]}]}}\n", `duplicate driver`},
		{"colliding driver names", "nodeGroups:\n- {name: g, maxSize: 2, template: {drivers: [{driver: a.example.com, devices: [{name: d}]}, {driver: a-example.com, devices: [{name: d}]}]}}\n", `slice names would collide`},
		{"bad device quantity", "nodeGroups:\n- {name: g, maxSize: 2, template: {drivers: [{driver: a.example.com, devices: [{name: d, capacity: {memory: {value: 8Q}}}]}]}}\n", `template.drivers[0].devices[0].capacity[memory].value: quantities must match`},
		{"unknown device field", "nodeGroups:\n- {name: g, maxSize: 2, template: {drivers: [{driver: a.example.com, devices: [{name: d, colour: red}]}]}}\n", `template.drivers[0].devices[0].colour: unknown field "colour"`},
		{"duplicate device", "nodeGroups:\n- {name: g, maxSize: 2, template: {drivers: [{driver: a.example.com, devices: [{name: d}, {name: d}]}]}}\n", `devices[1] (d): duplicate device name`},
		{"bad attribute name", "nodeGroups:\n- {name: g, maxSize: 2, template: {drivers: [{driver: a.example.com, devices: [{name: d, attributes: {'bad name': {int: 1}}}]}]}}\n", `template.drivers[0] (a.example.com).devices[0]: attributes: Invalid value: "bad name"`},
		{"bad driver name", "nodeGroups:\n- {name: g, maxSize: 2, template: {drivers: [{driver: not_a_domain, devices: [{name: d}]}]}}\n", `template.drivers[0] (not_a_domain): driver`},
		{"unknown counter set", "nodeGroups:\n- {name: g, maxSize: 2, template: {drivers: [{driver: a.example.com, devices: [{name: d, consumesCounters: [{counterSet: gpu-0, counters: {memory: {value: 1Gi}}}]}]}]}}\n", `devices[0] (d).consumesCounters[0]: unknown counter set "gpu-0"`},
		{"unknown counter", "nodeGroups:\n- {name: g, maxSize: 2, template: {drivers: [{driver: a.example.com, sharedCounters: [{name: gpu-0, counters: {memory: {value: 8Gi}}}], devices: [{name: d, consumesCounters: [{counterSet: gpu-0, counters: {cores: {value: 1}}}]}]}]}}\n", `counter set "gpu-0" has no counter "cores"`},
		{"reservation negative count", "nodeGroups:" + validGroup + "reservations:\n- {id: r, kind: Open, nodeGroups: [g], count: -1}\n", `reservation "r": count (-1) must not be negative`},
		{"reservation end before start", "nodeGroups:" + validGroup + "reservations:\n- {id: r, kind: CapacityBlock, nodeGroups: [g], count: 1, start: '2030-01-02T00:00:00Z', end: '2030-01-01T00:00:00Z'}\n", `end (2030-01-01T00:00:00Z) must be after start (2030-01-02T00:00:00Z)`},
		{"reservation bad time", "nodeGroups:" + validGroup + "reservations:\n- {id: r, kind: Open, nodeGroups: [g], count: 1, start: tomorrow}\n", `reservation "r" (reservations[0]): start:`},
		{"reservation unknown group", "nodeGroups:" + validGroup + "reservations:\n- {id: r, kind: Open, nodeGroups: [h], count: 1}\n", `nodeGroups[0]: unknown node group "h"`},
		{"reservation bad kind", "nodeGroups:" + validGroup + "reservations:\n- {id: r, kind: Spot, nodeGroups: [g], count: 1}\n", `kind "Spot"`},
		{"reservation missing id", "nodeGroups:" + validGroup + "reservations:\n- {kind: Open, nodeGroups: [g], count: 1}\n", `reservations[0]: id is required`},
		{"duplicate reservation", "nodeGroups:" + validGroup + "reservations:\n- {id: r, kind: Open, nodeGroups: [g]}\n- {id: r, kind: Open, nodeGroups: [g]}\n", `reservation "r": duplicate id`},
		{"block without window", "nodeGroups:" + validGroup + "reservations:\n- {id: r, kind: CapacityBlock, nodeGroups: [g], count: 1}\n", `needs both start and end`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := ParseConfig([]byte(tc.yaml))
			if err == nil {
				t.Fatalf("want an error containing %q, got config %+v", tc.want, cfg)
			}
			t.Logf("error: %v", err)
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q\ndoes not contain %q", err, tc.want)
			}
		})
	}
}

func TestParseConfigValid(t *testing.T) {
	cfg, err := ParseConfig([]byte(`
nodeGroups:
- name: gpu-reserved
  maxSize: 4
  price: 20
  capacityType: reserved
  bootDelay: 2s
  topology: {rack: rack-a}
  template:
    capacity: {cpu: 64, memory: 512Gi}
    drivers:
    - driver: gpu.example.com
      sharedCounters: [{name: gpu-0, counters: {memory: {value: 80Gi}}}]
      devices:
      - name: gpu-0
        attributes: {resource.kubernetes.io/pcieRoot: {string: pci0}}
        consumesCounters: [{counterSet: gpu-0, counters: {memory: {value: 80Gi}}}]
  faults: {outOfResourcesAfter: 3, neverRegisterAfter: 2, failureRate: 0.2, failureMode: neverReady, seed: 42,
    neverReadyAfter: 1, incompletePool: true, instancesVisibleAfter: 30s, nodesErrorRate: 0.1, targetSizeErrorRate: 1}
stateNamespace: kwok-state
reservations:
- {id: res-1, kind: CapacityBlock, nodeGroups: [gpu-reserved], count: 2, start: "2030-01-01T00:00:00Z", end: "2030-01-02T00:00:00Z", price: 10}
`))
	if err != nil {
		t.Fatalf("ParseConfig: %v", err)
	}
	g := cfg.NodeGroups[0]
	if g.BootDelay.Seconds() != 2 || *g.Faults.OutOfResourcesAfter != 3 || g.Topology["rack"] != "rack-a" {
		t.Errorf("decoded group = %+v", g)
	}
	if f := g.Faults; f.FailureRate != 0.2 || f.FailureMode != FailNeverReady || f.Seed != 42 || *f.NeverReadyAfter != 1 || !f.IncompletePool ||
		f.InstancesVisibleAfter.Duration != 30*time.Second || f.NodesErrorRate != 0.1 || f.TargetSizeErrorRate != 1 || cfg.StateNamespace != "kwok-state" {
		t.Errorf("decoded faults = %+v, stateNamespace %q", f, cfg.StateNamespace)
	}
	if r := cfg.Reservations[0]; r.Count != 2 || r.End.Sub(r.Start.Time).Hours() != 24 {
		t.Errorf("decoded reservation = %+v", r)
	}
}

func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(good, []byte("nodeGroups:"+validGroup), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("nodeGroups:\n- {name: g, minSize: 2, maxSize: 1}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadConfig(good); err != nil {
		t.Errorf("LoadConfig(good): %v", err)
	}
	for path, want := range map[string]string{
		bad:                           bad + `: node group "g": maxSize (1) is less than minSize (2)`,
		filepath.Join(dir, "missing"): "no such file",
	} {
		if _, err := LoadConfig(path); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("LoadConfig(%s) = %v, want an error containing %q", path, err, want)
		}
	}
}

// A config built in code is validated by New as well.
func TestNewValidates(t *testing.T) {
	g := cpuGroup("g", 2, 1)
	if _, err := New(nil, &Config{NodeGroups: []NodeGroupConfig{g}}); err == nil {
		t.Error("New without a client succeeded")
	}
	if _, err := New(fake.NewClientset(), &Config{NodeGroups: []NodeGroupConfig{g}}); err == nil || !strings.Contains(err.Error(), "maxSize (1) is less than minSize (2)") {
		t.Errorf("New with max < min = %v", err)
	}
}

// Configs built in code and marshalled (as the end-to-end harness does)
// load back unchanged.
func TestConfigRoundTrip(t *testing.T) {
	gpu, mig := gpuGroup("gpu", 0, 4), partitionableGroup("mig")
	gpu.Price, gpu.Faults.OutOfResourcesAfter = ptr.To(32.0), ptr.To(3)
	gpu.Faults.FailureRate, gpu.Faults.FailureMode, gpu.Faults.Seed, gpu.Faults.NeverReadyAfter = 0.25, FailNeverRegister, -7, ptr.To(2)
	gpu.Faults.InstancesVisibleAfter = metav1.Duration{Duration: time.Minute}
	gpu.BootDelay = metav1.Duration{Duration: 2 * time.Second}
	start := metav1.NewTime(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	in := &Config{
		NodeGroups: []NodeGroupConfig{gpu, mig},
		Reservations: []ReservationConfig{{ID: "r", Kind: cloudprovider.ReservationCapacityBlock, NodeGroups: []string{"gpu"},
			Count: 2, Start: &start, End: &metav1.Time{Time: start.Add(time.Hour)}}},
		StateNamespace: "kwok-state",
	}
	data, err := yaml.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := ParseConfig(data)
	if err != nil {
		t.Fatalf("ParseConfig of a marshalled config: %v\n%s", err, data)
	}
	if !apiequality.Semantic.DeepEqual(in, out) {
		t.Errorf("round trip changed the config:\n%s", cmp.Diff(in, out))
	}
}
