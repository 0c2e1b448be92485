package snapshot

import (
	"errors"
	"testing"

	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

func TestNodeGen(t *testing.T) {
	const driver = "gpu.example.com"
	claim := func(name, node string) func(*Snapshot) error {
		return func(s *Snapshot) error {
			return s.SetResourceClaim(builder.Claim("ns", name).Request(builder.Request("gpu", "gpu")).
				Allocated(node, builder.AllocatedDevice("gpu", driver, node, "gpu-0")).Obj())
		}
	}
	tests := []struct {
		name                       string
		change                     func(*Snapshot) error
		wantN1, wantN2, wantShared bool // which parts get a new Gen
	}{
		{"a pod on n1", func(s *Snapshot) error { return s.AddPod(builder.Pod("ns", "p").Obj(), "n1") }, true, false, false},
		{"an allocation on n2's devices", claim("c", "n2"), false, true, false},
		{"a slice of n1", func(s *Snapshot) error {
			return s.SetResourceSlice(builder.ResourceSlice("s1b", "n1", driver, "n1b").Devices(builder.Device("gpu-1")).Obj())
		}, true, false, false},
		{"a slice of no node", func(s *Snapshot) error {
			return s.SetResourceSlice(builder.ResourceSlice("net", "", driver, "net").Devices(builder.Device("nic-0")).Obj())
		}, false, false, true},
		{"a device class", func(s *Snapshot) error { return s.SetDeviceClass(builder.DeviceClass("nic").Driver(driver).Obj()) }, false, false, true},
		{"a pending pod", func(s *Snapshot) error { return s.AddPendingPod(builder.Pod("ns", "q").Obj()) }, false, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestSnapshot(t)
			for _, n := range []string{"n1", "n2"} {
				mustOK(t, s.AddNode(builder.Node(n).Obj()))
				mustOK(t, s.SetResourceSlice(builder.ResourceSlice(n, n, driver, n).Devices(builder.Device("gpu-0")).Obj()))
			}
			n1, n2 := s.NodeGen("n1"), s.NodeGen("n2")
			s.Fork()
			mustOK(t, tc.change(s))
			g1, g2 := s.NodeGen("n1"), s.NodeGen("n2")
			if got := g1.Node != n1.Node; got != tc.wantN1 {
				t.Errorf("n1 changed: %v, want %v", got, tc.wantN1)
			}
			if got := g2.Node != n2.Node; got != tc.wantN2 {
				t.Errorf("n2 changed: %v, want %v", got, tc.wantN2)
			}
			if got := g1.Shared != n1.Shared; got != tc.wantShared {
				t.Errorf("shared part changed: %v, want %v", got, tc.wantShared)
			}
			mustOK(t, s.Revert())
			if s.NodeGen("n1") != n1 || s.NodeGen("n2") != n2 {
				t.Errorf("after Revert: %v %v, want %v %v", s.NodeGen("n1"), s.NodeGen("n2"), n1, n2)
			}
			// The same change again after the revert: a Gen not seen before,
			// so nothing memoised in the reverted fork can be taken for it.
			s.Fork()
			mustOK(t, tc.change(s))
			if changed := tc.wantN1 || tc.wantN2 || tc.wantShared; changed && s.NodeGen("n1") == g1 && s.NodeGen("n2") == g2 {
				t.Errorf("Gens %v %v repeat those of the reverted fork", g1, g2)
			}
			mustOK(t, s.Revert())
		})
	}
}

// Reset starts a pass, not the counter: the same changes made after a
// Reset give Gens never seen before it, for touched nodes and untouched
// ones alike, so caches kept across passes may key by Gen.
func TestGensOutliveReset(t *testing.T) {
	const driver = "gpu.example.com"
	tests := []struct {
		name  string
		build func(*Snapshot) error
	}{
		{"nothing", func(*Snapshot) error { return nil }},
		{"a node", func(s *Snapshot) error { return s.AddNode(builder.Node("n1").Obj()) }},
		{"a node with a slice and a pod", func(s *Snapshot) error {
			return errors.Join(s.AddNode(builder.Node("n1").Obj()),
				s.SetResourceSlice(builder.ResourceSlice("n1", "n1", driver, "n1").Devices(builder.Device("gpu-0")).Obj()),
				s.AddPod(builder.Pod("ns", "p").Obj(), "n1"))
		}},
		{"a device class", func(s *Snapshot) error { return s.SetDeviceClass(builder.DeviceClass("gpu").Driver(driver).Obj()) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestSnapshot(t)
			seen := map[Gen]uint64{}
			for pass := range 3 {
				if pass > 0 {
					mustOK(t, s.Reset())
				}
				if s.Epoch() != uint64(pass) {
					t.Fatalf("epoch %d after %d resets", s.Epoch(), pass)
				}
				mustOK(t, tc.build(s))
				for _, n := range []string{"n1", "absent", ""} {
					g := s.NodeGen(n)
					if e, ok := seen[g]; ok && e != s.Epoch() {
						t.Errorf("pass %d: node %q has Gen %v, which it had in pass %d", pass, n, g, e)
					}
					seen[g] = s.Epoch()
				}
			}
		})
	}
}
