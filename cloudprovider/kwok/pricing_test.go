package kwok

import (
	"errors"
	"math"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

func TestPricing(t *testing.T) {
	gpu, cpu, free := gpuGroup("gpu", 0, 2), cpuGroup("cpu", 0, 2), cpuGroup("free", 0, 2)
	gpu.Price, cpu.Price = ptr.To(32.0), ptr.To(0.2) // cpu: 0.05 per core-hour
	e := newEnv(t, &Config{NodeGroups: []NodeGroupConfig{gpu, cpu, free}})
	model, err := e.p.Pricing()
	if err != nil {
		t.Fatalf("Pricing: %v", err)
	}
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	end := start.Add(90 * time.Minute)

	tmpl, _ := e.group(t, "gpu").TemplateNodeInfo()
	tests := []struct {
		name    string
		node    *corev1.Node
		want    float64
		wantErr bool
	}{
		{name: "template node", node: tmpl.Node, want: 48},
		{name: "node by label", node: builder.Node("c").Label(LabelNodeGroup, "cpu").Obj(), want: 0.3},
		{name: "group without price", node: builder.Node("f").Label(LabelNodeGroup, "free").Obj(), wantErr: true},
		{name: "foreign node", node: builder.Node("x").Obj(), wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := model.NodePrice(tc.node, start, end)
			if (err != nil) != tc.wantErr || math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("NodePrice = %v, %v; want %v (error %t)", got, err, tc.want, tc.wantErr)
			}
		})
	}
	pod := builder.Pod("ns", "p").CPU("2").Obj()
	if got, err := model.PodPrice(pod, start, end); err != nil || math.Abs(got-0.15) > 1e-9 {
		t.Errorf("PodPrice = %v, %v; want 2 cores * 0.05 * 1.5h = 0.15", got, err)
	}

	unpriced := newEnv(t, &Config{NodeGroups: []NodeGroupConfig{cpuGroup("cpu", 0, 1)}})
	if _, err := unpriced.p.Pricing(); !errors.Is(err, cloudprovider.ErrNotImplemented) {
		t.Errorf("Pricing without prices = %v, want ErrNotImplemented", err)
	}
}

func TestReservations(t *testing.T) {
	reserved, shared, ondemand := gpuGroup("gpu-reserved", 0, 10), gpuGroup("gpu-shared", 0, 10), gpuGroup("gpu-ondemand", 0, 10)
	reserved.CapacityType = CapacityReserved
	reserved.BootDelay = metav1.Duration{Duration: time.Minute} // booting instances count
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.Time { return &metav1.Time{Time: now.Add(d)} }
	cfg := &Config{
		NodeGroups: []NodeGroupConfig{reserved, shared, ondemand},
		Reservations: []ReservationConfig{
			{ID: "open", Kind: cloudprovider.ReservationOpen, NodeGroups: []string{"gpu-reserved", "gpu-shared"}, Count: 2, Price: ptr.To(10.0)},
			{ID: "spill", Kind: cloudprovider.ReservationTargeted, NodeGroups: []string{"gpu-reserved"}, Count: 5},
			{ID: "future-block", Kind: cloudprovider.ReservationCapacityBlock, NodeGroups: []string{"gpu-shared"}, Count: 4, Start: at(10 * time.Minute), End: at(time.Hour)},
			{ID: "idle", Kind: cloudprovider.ReservationOpen, NodeGroups: []string{"gpu-ondemand"}, Count: 1},
		},
	}
	e := newEnv(t, cfg)
	if _, err := e.group(t, "gpu-reserved").IncreaseSize(t.Context(), 3); err != nil {
		t.Fatal(err)
	}
	if _, err := e.group(t, "gpu-shared").IncreaseSize(t.Context(), 1); err != nil {
		t.Fatal(err)
	}

	check := func(when string, want map[string]int) {
		t.Helper()
		got, err := e.p.Reservations()
		if err != nil {
			t.Fatalf("Reservations: %v", err)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d reservations, want %d", when, len(got), len(want))
		}
		for _, r := range got {
			if r.InUse != want[r.ID] {
				t.Errorf("%s: reservation %s in use %d of %d, want %d", when, r.ID, r.InUse, r.Count, want[r.ID])
			}
		}
	}
	// 3 reserved + 1 shared: "open" takes 2 reserved, "spill" the third;
	// the shared one finds "open" full and "future-block" not started.
	check("now", map[string]int{"open": 2, "spill": 1, "future-block": 0, "idle": 0})

	got, _ := e.p.Reservations()
	if r := got[2]; !r.Start.Equal(now.Add(10*time.Minute)) || !r.End.Equal(now.Add(time.Hour)) || r.Kind != cloudprovider.ReservationCapacityBlock {
		t.Errorf("future-block = %+v", r)
	}
	if got[0].Price != 10 || len(got[0].NodeGroups) != 2 {
		t.Errorf("open = %+v", got[0])
	}

	e.clock.Step(15 * time.Minute)
	check("block active", map[string]int{"open": 2, "spill": 1, "future-block": 1, "idle": 0})
	e.clock.Step(time.Hour)
	check("block ended", map[string]int{"open": 2, "spill": 1, "future-block": 0, "idle": 0})
}
