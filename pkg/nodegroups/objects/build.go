package objects

import (
	"context"
	"fmt"
	"hash/fnv"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"

	"github.com/dra-autoscaler/dra-autoscaler/apis/autoscaling/v1alpha1"
	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/backoff"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/limits"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/reservations"
)

// PublishInput is what one pass tells the NodeGroup objects.
type PublishInput struct {
	Now    time.Time
	Groups []*nodegroups.Info
	// Exist are the ids of every group the provider has, Groups' and
	// those left out of this pass (an invalid answer): only the objects
	// of groups not among them are deleted.
	Exist []string
	// Added are the nodes this pass's scale-ups added, by group: the
	// groups were read before them.
	Added map[string]int
	// Usage is the cluster's usage for the cluster-wide limits, this
	// pass's scale-ups included.
	Usage limits.Usage
	// Reservations is the pass's count (nil: none).
	Reservations *reservations.Count
	// DeviceClasses are the cluster's classes (in the runner's snapshot).
	DeviceClasses []*resourceapi.DeviceClass
	// Unsafe says why the cluster was too unhealthy to scale ("" if not).
	Unsafe string
	// Rooms are the nodes of groups of units, what each has left
	// (NodeRooms); nil: none.
	Rooms map[string]NodeRoom
}

// Sources are where the status comes from besides the pass.
type Sources struct {
	Limiter *limits.Limiter
	Backoff *backoff.Backoff
	// Pricing is nil when the provider has no prices.
	Pricing cloudprovider.PricingModel
	// ProvisionTimes are a group's last request-to-usable times
	// (track.Tracker); nil: none are shown.
	ProvisionTimes func(group string) []time.Duration
	// Devices counts the devices of each class a new node of the group
	// brings (estimator.DeviceCounter); nil: not counted.
	Devices         func(ctx context.Context, group string, t *cloudprovider.NodeTemplate, classes []*resourceapi.DeviceClass) (map[string]int, error)
	ScaleUpFromZero bool
}

// Status is one group's status for in.
func (s *Sources) Status(ctx context.Context, g *nodegroups.Info, in PublishInput) v1alpha1.NodeGroupStatus {
	added := in.Added[g.Id]
	st := v1alpha1.NodeGroupStatus{NodeGroup: g.Id, MinSize: int32(g.Min), MaxSize: int32(g.Max), TargetSize: int32(g.Target + added),
		ReadyNodes: int32(len(g.Ready)), BootingNodes: int32(len(g.Booting)), UpcomingNodes: int32(g.Upcoming() + added),
		Health: v1alpha1.NodeGroupHealthy}
	l := GroupLimits{Size: g.Size() + added, Max: g.Max, Unsafe: in.Unsafe}
	if s.Backoff != nil {
		if b, off := s.Backoff.Get(g.Id, in.Now); off {
			l.Backoff, l.BackedOff = b, true
			st.Health = v1alpha1.NodeGroupBackoff
			st.Message = fmt.Sprintf("scale-up failed (%s); backed off", b.Reason)
			st.Backoff = &v1alpha1.NodeGroupBackoffStatus{Reason: b.Reason, Until: metav1.NewTime(b.Until.Truncate(time.Second)), Failures: int32(b.Failures)}
		}
	}
	if g.Template == nil {
		l.NoTemplate = fmt.Sprint(g.TemplateErr)
		st.Health, st.Message = v1alpha1.NodeGroupNoTemplate, l.NoTemplate
	} else {
		l.FromZeroDisabled = l.Size == 0 && !s.ScaleUpFromZero
		st.Template = s.template(ctx, g, in.DeviceClasses)
		for _, c := range st.Template.DeviceClasses {
			if l.PerNode == nil {
				l.PerNode = map[string]int{}
			}
			l.PerNode[c.Name] = int(c.Devices)
		}
		if s.Limiter != nil {
			want := max(g.Max-l.Size, 0)
			if room, reason := s.Limiter.MaxNewNodes(in.Usage, g.Template.Node, want); reason != "" {
				l.ClusterRoom, l.ClusterLimit = room, reason
			}
		}
		if s.Pricing != nil {
			if p, err := s.Pricing.NodePrice(g.Template.Node, in.Now, in.Now.Add(time.Hour)); err == nil && !math.IsNaN(p) && !math.IsInf(p, 0) {
				st.PricePerNodeHour = price(p)
			}
		}
	}
	st.CapacityType = reservations.CapacityOnDemand
	if g.Template != nil && g.Template.Node.Labels[reservations.LabelCapacityType] != "" {
		st.CapacityType = g.Template.Node.Labels[reservations.LabelCapacityType]
	}
	if b := reservationBook(in.Reservations); b != nil {
		st.CapacityType = b.CapacityType(g.Id)
		if served(b, g.Id) {
			left := int32(b.Available(g.Id, nil))
			st.ReservationLeft = &left
		}
		l.ReservedOnly, l.ReservationLeft = b.ReservedOnly(g.Id), b.Available(g.Id, nil)
	}
	if s.ProvisionTimes != nil {
		if ds := s.ProvisionTimes(g.Id); len(ds) > 0 {
			st.ProvisioningTime = &v1alpha1.ProvisioningTime{Samples: int32(len(ds)),
				P50: metav1.Duration{Duration: Percentile(ds, 50).Round(100 * time.Millisecond)},
				P90: metav1.Duration{Duration: Percentile(ds, 90).Round(100 * time.Millisecond)}}
		}
	}
	st.Provisionable = Provisionable(l)
	if g.Template != nil {
		st.UnitSize, st.Units = units(g, in.Rooms)
	}
	return st
}

// template describes what a new node of g brings.
func (s *Sources) template(ctx context.Context, g *nodegroups.Info, classes []*resourceapi.DeviceClass) *v1alpha1.NodeGroupTemplate {
	t := &v1alpha1.NodeGroupTemplate{Source: g.TemplateSource, Allocatable: g.Template.Node.Status.Allocatable.DeepCopy()}
	if len(t.Allocatable) == 0 {
		t.Allocatable = g.Template.Node.Status.Capacity.DeepCopy()
	}
	byDriver := map[string]int32{}
	for _, sl := range g.Template.ResourceSlices {
		if len(sl.Spec.Devices) > 0 {
			byDriver[sl.Spec.Driver] += int32(len(sl.Spec.Devices))
		}
	}
	for _, d := range slices.Sorted(maps.Keys(byDriver)) {
		t.Drivers = append(t.Drivers, v1alpha1.DriverDevices{Driver: d, Devices: byDriver[d]})
	}
	if s.Devices == nil || len(byDriver) == 0 {
		return t
	}
	counts, err := s.Devices(ctx, g.Id, g.Template, classes)
	if err != nil {
		// The rest of the status still holds; the counts come next pass.
		klog.FromContext(ctx).Error(err, "Counting the devices of each class on a new node failed", "nodeGroup", g.Id)
		return t
	}
	for _, c := range slices.Sorted(maps.Keys(counts)) {
		if counts[c] > 0 {
			t.DeviceClasses = append(t.DeviceClasses, v1alpha1.ClassDevices{Name: c, Devices: int32(counts[c])})
		}
	}
	return t
}

func reservationBook(c *reservations.Count) *reservations.Book {
	if c == nil {
		return nil
	}
	return c.Book
}

// served: some reservation of the book serves the group.
func served(b *reservations.Book, group string) bool {
	for _, sl := range b.Slots() {
		if slices.Contains(b.ServedGroups(sl), group) {
			return true
		}
	}
	return false
}

// price is p as a decimal with at most 4 places.
func price(p float64) string {
	return strconv.FormatFloat(math.Round(p*1e4)/1e4, 'f', -1, 64)
}

// ObjectName is the NodeGroup object's name for a group id: the id when
// it is a valid name, else the id made one, with a hash of the id so that
// two ids never share a name.
func ObjectName(id string) string {
	if len(validation.IsDNS1123Subdomain(id)) == 0 {
		return id
	}
	var b strings.Builder
	for _, r := range strings.ToLower(id) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '.':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	name := strings.Trim(b.String(), "-.")
	if len(name) > 200 {
		name = name[:200]
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	return strings.Trim(fmt.Sprintf("%s-%08x", name, h.Sum32()), "-.")
}

// sortedNames lists a map's keys in order.
func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
