package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/clusterapi"
	"github.com/dra-autoscaler/dra-autoscaler/test/capi"
	"github.com/dra-autoscaler/dra-autoscaler/test/e2e/framework"
)

// A MachineDeployment labelled with a CapacityReservation that names no
// node group, and an on-demand one of the same shape: of 3 pods needing a
// node each, the reserved one takes 2 (its count) and the on-demand one 1;
// a 4th pod goes on demand too. The reserved MachineDeployment's replicas
// never pass 2, and the object's status counts it.
func TestCAPIReservationLabel(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	crs := reservationsClient(t, s.c)
	env := s.c.CAPI(t)
	env.NewCluster(s.ctx, t, s.ns, "c1")
	name := s.group("res")
	createReservation(s.ctx, t, crs, reservation(name, map[string]any{"count": int64(2)}))
	s.capiGroupWith(t, env, "reserved", "4", "16Gi", nil, []capi.GroupOption{capi.Labels(map[string]string{clusterapi.LabelCapacityReservation: name})})
	s.capiGroup(t, env, "ondemand", "4", "16Gi", nil)

	// Every replicas value the reserved MachineDeployment ever had, from a
	// watch.
	w, err := env.Dynamic.Resource(capi.MachineDeploymentResource).Namespace(s.ns).Watch(s.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var mu sync.Mutex
	maxReplicas := int64(0)
	go func() {
		for ev := range w.ResultChan() {
			if u, ok := ev.Object.(*unstructured.Unstructured); ok && u.GetName() == "reserved" {
				n, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
				mu.Lock()
				maxReplicas = max(maxReplicas, n)
				mu.Unlock()
			}
		}
	}()
	s.c.StartAutoscaler(t, nil, env.AutoscalerArgs(s.ns, "c1")...)

	counts := func(ctx context.Context) (reserved, ondemand int, summary string, err error) {
		r, rSum, err := capiNodes(ctx, env, s.ns, "reserved")
		if err != nil {
			return 0, 0, "", err
		}
		o, oSum, err := capiNodes(ctx, env, s.ns, "ondemand")
		return len(r), len(o), "reserved " + rSum + "; on-demand " + oSum, err
	}
	waitCounts := func(pods, reserved, ondemand int) {
		t.Helper()
		framework.Eventually(s.ctx, t, 3*time.Minute, fmt.Sprintf("%d pods bound", pods), func(ctx context.Context) (bool, string, error) {
			n, seen, err := s.podsSeen(ctx)
			return n == pods, seen, err
		})
		framework.Eventually(s.ctx, t, time.Minute, fmt.Sprintf("%d reserved and %d on-demand machines with nodes", reserved, ondemand), func(ctx context.Context) (bool, string, error) {
			r, o, summary, err := counts(ctx)
			return err == nil && r == reserved && o == ondemand, summary, err
		})
	}
	for i := range 3 {
		s.c.Create(s.ctx, t, s.pod(fmt.Sprintf("job-%d", i)).CPU("3").Obj())
	}
	waitCounts(3, 2, 1)
	group := "MachineDeployment/" + s.ns + "/reserved"
	framework.Eventually(s.ctx, t, time.Minute, "status: 2 used, 0 available, serves "+group, func(ctx context.Context) (bool, string, error) {
		used, avail, active, err := reservationStatus(ctx, crs, name)
		msg, _ := activeMessage(ctx, crs, name)
		return used == 2 && avail == 0 && active == "Active" && strings.Contains(msg, group),
			fmt.Sprintf("used=%d available=%d active=%s (%s)", used, avail, active, msg), err
	})
	s.c.Create(s.ctx, t, s.pod("job-3").CPU("3").Obj())
	waitCounts(4, 2, 2)
	mu.Lock()
	defer mu.Unlock()
	if maxReplicas != 2 {
		t.Errorf("the reserved MachineDeployment reached %d replicas; its reservation holds 2", maxReplicas)
	}
}

// activeMessage is the message of the object's Active condition.
func activeMessage(ctx context.Context, crs dynamic.NamespaceableResourceInterface, name string) (string, error) {
	u, err := crs.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Active" {
			return fmt.Sprint(m["message"]), nil
		}
	}
	return "", nil
}
