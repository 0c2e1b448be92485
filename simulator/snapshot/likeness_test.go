package snapshot

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// LocalDevices reads the same after a Reset whether the next build adds
// the same slice objects (their facts are kept) or copies of them, and
// tells apart a slice that changed or a device allocated since.
func TestLocalDevicesAcrossResets(t *testing.T) {
	const driver = "gpu.example.com"
	slice := func(model string) *resourceapi.ResourceSlice {
		return builder.ResourceSlice("n1-gpus", "n1", driver, "n1").
			Devices(builder.Device("gpu-0").Attr("model", model), builder.Device("gpu-1").Attr("model", model)).Obj()
	}
	allocated := builder.Claim("ns", "c").Request(builder.Request("gpu", "gpu")).
		Allocated("n1", builder.AllocatedDevice("gpu", driver, "n1", "gpu-1")).Obj()
	shared := builder.ResourceSlice("n1-shared", "n1", driver, "n1-shared").Devices(builder.Device("gpu-2").AllowMultipleAllocations()).Obj()
	kept := slice("a100")
	s := newTestSnapshot(t)
	// The models differ to a class that reads them.
	byModel := builder.DeviceClass("gpu").Selector(`device.attributes["gpu.example.com"].model != ""`).Obj()
	build := func(sl *resourceapi.ResourceSlice, claimed bool) (LocalDevices, bool) {
		t.Helper()
		mustOK(t, s.Reset())
		mustOK(t, s.SetDeviceClass(byModel))
		mustOK(t, s.AddNode(builder.Node("n1").Obj()))
		mustOK(t, s.SetResourceSlice(sl))
		if claimed {
			mustOK(t, s.SetResourceClaim(allocated))
		}
		return s.LocalDevices("n1")
	}
	first, ok := build(kept, true)
	if !ok || len(first.Slices) != 1 || !cmp.Equal(first.Used, []string{"0/gpu-1"}) {
		t.Fatalf("LocalDevices = %+v, %v; want one slice with gpu-1 used", first, ok)
	}
	tests := []struct {
		name      string
		slice     *resourceapi.ResourceSlice
		claimed   bool
		wantSame  bool
		wantNotOK bool
	}{
		{name: "the same slice object", slice: kept, claimed: true, wantSame: true},
		{name: "an equal copy", slice: slice("a100"), claimed: true, wantSame: true},
		{name: "the same object, nothing allocated", slice: kept},
		{name: "a changed slice", slice: slice("h100"), claimed: true},
		{name: "a device shared between claims", slice: shared, wantNotOK: true},
		{name: "the same object again", slice: kept, claimed: true, wantSame: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := build(tc.slice, tc.claimed)
			if ok == tc.wantNotOK {
				t.Fatalf("ok = %v, want %v", ok, !tc.wantNotOK)
			}
			if !tc.wantNotOK && cmp.Equal(got, first) != tc.wantSame {
				t.Errorf("LocalDevices = %+v, first build %+v; want equal: %v", got, first, tc.wantSame)
			}
		})
	}
}

// Facts warmed as slices arrive are what a build would make: a build
// takes those of the very objects it adds and leaves a replaced slice's,
// and the snapshot reads the same either way. Warm runs beside the
// snapshot's use (go test -race checks that it may).
func TestSliceWarmer(t *testing.T) {
	const driver = "gpu.example.com"
	slice := func(node, model string) *resourceapi.ResourceSlice {
		return builder.ResourceSlice(node+"-gpus", node, driver, node).
			Devices(builder.Device("gpu-0").Attr("model", model), builder.Device("gpu-1").Attr("model", model)).Obj()
	}
	allocated := builder.Claim("ns", "c").Request(builder.Request("gpu", "gpu")).
		Allocated("n1", builder.AllocatedDevice("gpu", driver, "n1", "gpu-1")).Obj()
	build := func(s *Snapshot, sl *resourceapi.ResourceSlice) LocalDevices {
		t.Helper()
		mustOK(t, s.Reset())
		mustOK(t, s.SetDeviceClass(builder.DeviceClass("gpu").Selector(`device.attributes["gpu.example.com"].model != ""`).Obj()))
		mustOK(t, s.AddNode(builder.Node("n1").Obj()))
		mustOK(t, s.SetResourceSlice(sl))
		mustOK(t, s.SetResourceClaim(allocated))
		devs, ok := s.LocalDevices("n1")
		if !ok {
			t.Fatal("LocalDevices not ok")
		}
		return devs
	}
	want := build(newTestSnapshot(t), slice("n1", "a100"))

	s := newTestSnapshot(t)
	w := s.SliceWarmer()
	arrived := slice("n1", "a100")
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Warm(slice("n2", "a100"))
		w.Warm(builder.ResourceSlice("unbound", "", driver, "network").Obj())
		w.Warm(arrived)
	}()
	build(s, slice("n1", "a100")) // a build while slices arrive
	<-done
	if got := waiting(w); got != 2 {
		t.Fatalf("%d slices warm, want 2 (a slice bound to no node is not)", got)
	}
	if got := build(s, arrived); !cmp.Equal(got, want) {
		t.Errorf("LocalDevices from warmed facts = %+v, want %+v", got, want)
	}
	if got := waiting(w); got != 1 {
		t.Errorf("%d slices warm after the build took one, want 1", got)
	}
	// A slice replaced by one not warmed yet: the build makes the new
	// one's facts rather than take the old one's.
	w.Warm(arrived)
	if got := build(s, slice("n1", "h100")); cmp.Equal(got, want) {
		t.Errorf("a replaced slice read as the old one: %+v", got)
	}
	w.Forget(arrived)
	w.Forget(slice("n2", "a100"))
	if got := waiting(w); got != 0 {
		t.Errorf("%d slices warm after every one was taken or forgotten, want 0", got)
	}
}

// waiting is how many slices' facts wait in w for a build.
func waiting(w *SliceWarmer) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.facts)
}

// A slice's facts outlive resets whose builds do not read them, as a
// pass's first build (load.Prepare: the templates only) does not read the
// nodes' slices, and are made again only once keepResets builds in a
// row left them unread.
func TestSliceFactsKeptAcrossAPass(t *testing.T) {
	const driver = "gpu.example.com"
	kept := builder.ResourceSlice("n1-gpus", "n1", driver, "n1").Devices(builder.Device("gpu-0")).Obj()
	s := newTestSnapshot(t)
	build := func(read bool) {
		t.Helper()
		mustOK(t, s.Reset())
		mustOK(t, s.AddNode(builder.Node("n1").Obj()))
		mustOK(t, s.SetResourceSlice(kept))
		if !read {
			return
		}
		if _, ok := s.LocalDevices("n1"); !ok {
			t.Fatal("LocalDevices not ok")
		}
	}
	tests := []struct {
		name     string
		reads    []bool // builds in turn: whether each reads the node
		wantMade int
	}{
		{name: "read by every build", reads: []bool{true, true, true}, wantMade: 1},
		{name: "passes of two builds, the second reading", reads: []bool{true, false, true, false, true}, wantMade: 1},
		{name: "unread by one build", reads: []bool{true, false, true}, wantMade: 1},
		{name: "unread by keepResets builds", reads: []bool{true, false, false, true}, wantMade: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s.facts.facts, s.facts.made = nil, 0
			for _, read := range tc.reads {
				build(read)
			}
			if s.facts.made != tc.wantMade {
				t.Errorf("facts made %d times, want %d", s.facts.made, tc.wantMade)
			}
		})
	}
}

// DeviceIDs are each device's MakeDeviceID, in order, for a slice whose
// facts are kept and for one that cannot be digested alike.
func TestDeviceIDs(t *testing.T) {
	const driver = "gpu.example.com"
	s := newTestSnapshot(t)
	sl := builder.ResourceSlice("n1-gpus", "n1", driver, "n1").Devices(builder.Device("gpu-0"), builder.Device("gpu-1")).Obj()
	want := []structured.DeviceID{structured.MakeDeviceID(driver, "n1", "gpu-0"), structured.MakeDeviceID(driver, "n1", "gpu-1")}
	for range 2 { // made, then kept
		if got := s.DeviceIDs(sl, "n1"); !slices.Equal(got, want) {
			t.Fatalf("DeviceIDs = %v, want %v", got, want)
		}
	}
	if got := SliceDeviceIDs(sl); !slices.Equal(got, want) {
		t.Errorf("SliceDeviceIDs = %v, want %v", got, want)
	}
}

// Nodes whose devices differ only in attributes nothing reads have equal
// LocalDevices. A claim that reads one of them, added after keys were
// made, tells them apart from then on and gives every node a Gen never
// seen before, even once the fork it was added in is reverted; a claim
// that reads an attribute every device has its own value of (a uuid)
// leaves them alike, and its pods are not covered.
func TestLocalDevicesReadAttributes(t *testing.T) {
	const driver = "gpu.example.com"
	slice := func(node, model, rev string) *resourceapi.ResourceSlice {
		b := builder.ResourceSlice(node+"-gpus", node, driver, node)
		for _, d := range []string{"gpu-0", "gpu-1"} {
			b.Devices(builder.Device(d).Attr("model", model).Attr("rev", rev).Attr("uuid", "GPU-"+node+"-"+d))
		}
		return b.Obj()
	}
	byModel := builder.DeviceClass("gpu").Selector(`device.attributes["gpu.example.com"].model == "a100"`).Obj()
	byUUID := builder.Claim("ns", "one").Request(builder.Request("gpu", "gpu").Selector(`device.attributes["gpu.example.com"].uuid == "GPU-n1-gpu-0"`)).Obj()
	byRev := builder.Claim("ns", "rev").Request(builder.Request("gpu", "gpu").Selector(`device.attributes["gpu.example.com"].rev == "r2"`)).Obj()
	s := newTestSnapshot(t)
	build := func(model, rev string) {
		t.Helper()
		mustOK(t, s.Reset())
		mustOK(t, s.SetDeviceClass(byModel))
		for _, n := range []struct{ node, model, rev string }{{"n1", "a100", "r1"}, {"n2", model, rev}} {
			mustOK(t, s.AddNode(builder.Node(n.node).Obj()))
			mustOK(t, s.SetResourceSlice(slice(n.node, n.model, n.rev)))
		}
	}
	alike := func() bool {
		t.Helper()
		a, okA := s.LocalDevices("n1")
		b, okB := s.LocalDevices("n2")
		if !okA || !okB {
			t.Fatalf("LocalDevices not ok: %v, %v", okA, okB)
		}
		return cmp.Equal(a, b)
	}
	build("a100", "r1")
	if !alike() {
		t.Error("nodes differing in uuids only, which nothing reads, are unlike")
	}
	build("h100", "r1")
	if alike() {
		t.Error("nodes differing in models, which a class reads, are alike")
	}

	build("a100", "r2")
	if !alike() {
		t.Fatal("nodes differing in revisions nothing reads are unlike")
	}
	before := s.NodeGen("n1")
	s.Fork()
	mustOK(t, s.SetResourceClaim(byRev))
	if alike() {
		t.Error("nodes differing in revisions are alike once a claim reads them")
	}
	mustOK(t, s.Revert())
	if after := s.NodeGen("n1"); after == before {
		t.Errorf("Gen %+v after the reads grew, reverted, is the one from before", after)
	}
	if alike() {
		t.Error("the reverted claim's reads were forgotten within the build")
	}

	// A claim reading uuids, which tell every device apart, leaves keys
	// as they were: its pod is not covered, one reading revisions is.
	build("a100", "r1")
	if !alike() {
		t.Fatal("the next build still reads revisions")
	}
	mustOK(t, s.SetResourceClaim(byUUID))
	mustOK(t, s.SetResourceClaim(byRev))
	if !alike() {
		t.Error("a claim reading uuids made nodes unlike")
	}
	// Once the set knows uuids are read (and left out), another claim
	// reading them moves no Gen.
	gen := s.NodeGen("n1")
	other := builder.Claim("ns", "two").Request(builder.Request("gpu", "gpu").Selector(`device.attributes["gpu.example.com"].uuid == "GPU-n2-gpu-1"`)).Obj()
	mustOK(t, s.SetResourceClaim(other))
	if got := s.NodeGen("n1"); got != gen || !alike() {
		t.Errorf("another claim reading uuids moved the Gen from %+v to %+v, or made nodes unlike", gen, got)
	}
	pinned := builder.Pod("ns", "pinned").Claim("gpu", "one").Obj()
	revved := builder.Pod("ns", "revved").Claim("gpu", "rev").Obj()
	if s.CoversPod(pinned) || !s.CoversPod(revved) || !s.CoversPod(builder.Pod("ns", "plain").Obj()) {
		t.Errorf("CoversPod: pinned %v (want false), by revision %v, without claims %v (want true)",
			s.CoversPod(pinned), s.CoversPod(revved), s.CoversPod(builder.Pod("ns", "plain").Obj()))
	}
	// A claim read before any key was made costs no Gen.
	mustOK(t, s.Reset())
	gen = s.NodeGen("")
	mustOK(t, s.SetResourceClaim(byRev))
	if got := s.NodeGen(""); got.Shared != gen.Shared {
		t.Errorf("the shared Gen moved from %d to %d for a claim added before any key", gen.Shared, got.Shared)
	}
}
