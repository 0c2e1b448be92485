// Command demo shows the autoscaler at work on the local control plane
// (make up): it starts dra-autoscaler on the example node groups
// (deploy/kwok/kwok-provider.yaml: a CPU group and a GPU group whose nodes
// have 8 GPUs and 8 NICs paired by PCIe root, both from zero), applies an
// inference workload whose pods each claim a GPU plus the NIC on its root,
// and some CPU-only pods, then reports nodes as they appear and pods as
// they run, and sums up.
//
// --provider=kwok (the default) runs the autoscaler's kwok provider on
// those groups; --provider=clusterapi makes them Cluster API
// MachineDeployments of the dev infrastructure provider (test/capi/infra;
// make up CAPI=1 runs it and the Cluster API manager) and runs the
// autoscaler's clusterapi provider on them (capi.go).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/kwok"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

const (
	ns        = "demo"
	gpuDriver = "gpu.example.com"
	nicDriver = "nic.example.com"
	// pcieRoot is the standard attribute both drivers publish, so one
	// matchAttribute constraint can pair a GPU with a NIC.
	pcieRoot = "resource.kubernetes.io/pcieRoot"
)

type options struct {
	kubeconfig, autoscaler, cloudConfig, logFile, provider string
	gpuPods, cpuPods                                       int
	timeout                                                time.Duration
}

// scene is what differs between the providers: the node groups the
// autoscaler scales and how their nodes are found.
type scene interface {
	// setUp creates the provider's objects in the demo namespace, before
	// the autoscaler starts (it reads its node groups at start-up).
	setUp(ctx context.Context) error
	// args are the autoscaler's provider flags.
	args() []string
	// nodes maps the groups' nodes to their group.
	nodes(ctx context.Context) (map[string]string, error)
}

func main() {
	var o options
	flag.StringVar(&o.kubeconfig, "kubeconfig", "_out/cluster/kubeconfig", "kubeconfig of the cluster")
	flag.StringVar(&o.autoscaler, "autoscaler", "_out/bin/dra-autoscaler", "the dra-autoscaler binary")
	flag.StringVar(&o.cloudConfig, "cloud-config", "deploy/kwok/kwok-provider.yaml", "the node groups, as the kwok provider's config")
	flag.StringVar(&o.provider, "provider", "kwok", "the autoscaler's cloud provider: kwok, or clusterapi (Cluster API machines; make up CAPI=1)")
	flag.StringVar(&o.logFile, "log", "_out/demo-autoscaler.log", "where the autoscaler logs")
	flag.IntVar(&o.gpuPods, "gpu-pods", 3, "inference pods, each claiming a GPU and its NIC")
	flag.IntVar(&o.cpuPods, "cpu-pods", 2, "CPU-only pods")
	flag.DurationVar(&o.timeout, "timeout", 3*time.Minute, "how long to wait for every pod to run")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		os.Exit(1)
	}
}

func run(o options) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	var sc scene
	switch o.provider {
	case "kwok":
		sc = kwokScene{client: client, cloudConfig: o.cloudConfig}
	case "clusterapi":
		if sc, err = newCAPIScene(cfg, client, o); err != nil {
			return err
		}
	default:
		return fmt.Errorf("--provider=%q: want kwok or clusterapi", o.provider)
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	if err := cleanup(ctx, client); err != nil {
		return fmt.Errorf("removing an earlier run: %w", err)
	}
	if err := createNamespace(ctx, client); err != nil {
		return err
	}
	if err := sc.setUp(ctx); err != nil {
		return err
	}
	stop, err := startAutoscaler(o, sc)
	if err != nil {
		return err
	}
	defer stop()
	if err := apply(ctx, client, o); err != nil {
		return err
	}
	fmt.Printf("applied: %d inference pods (1 GPU + the NIC on its PCIe root each) and %d CPU pods; no node can run them yet\n", o.gpuPods, o.cpuPods)
	start := time.Now()
	if err := watch(ctx, client, sc, o.gpuPods+o.cpuPods, start); err != nil {
		return fmt.Errorf("%w (autoscaler log: %s)", err, o.logFile)
	}
	return summary(context.Background(), client, sc, time.Since(start))
}

// kwokScene: the autoscaler's kwok provider adds the nodes itself.
type kwokScene struct {
	client      kubernetes.Interface
	cloudConfig string
}

func (kwokScene) setUp(context.Context) error { return nil }

func (k kwokScene) args() []string {
	return []string{"--cloud-provider=kwok", "--cloud-config=" + k.cloudConfig}
}

func (k kwokScene) nodes(ctx context.Context) (map[string]string, error) {
	nodes, err := k.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: kwok.LabelNodeGroup})
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, n := range nodes.Items {
		out[n.Name] = n.Labels[kwok.LabelNodeGroup]
	}
	return out, nil
}

func startAutoscaler(o options, sc scene) (func(), error) {
	logFile, err := os.Create(o.logFile)
	if err != nil {
		return nil, err
	}
	args := append([]string{"--kubeconfig=" + o.kubeconfig}, sc.args()...)
	cmd := exec.Command(o.autoscaler, append(args, "--scan-interval=2s", "--leader-elect=false", "--address=127.0.0.1:0", "--v=2")...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", o.autoscaler, err)
	}
	fmt.Printf("dra-autoscaler started with --cloud-provider=%s (pid %d, log %s)\n", o.provider, cmd.Process.Pid, o.logFile)
	return func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		logFile.Close()
	}, nil
}

func createNamespace(ctx context.Context, client kubernetes.Interface) error {
	opts := metav1.CreateOptions{}
	return errors.Join(
		errOf(client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, opts)),
		// The ServiceAccount controller may have been first.
		ignoreExists(client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, opts)),
	)
}

func apply(ctx context.Context, client kubernetes.Interface, o options) error {
	tmpl := builder.ClaimTemplate(ns, "gpu-and-nic").
		Request(builder.Request("gpu", "gpu"), builder.Request("nic", "nic")).
		MatchAttribute(pcieRoot).Obj()
	opts := metav1.CreateOptions{}
	errs := []error{
		errOf(client.ResourceV1().DeviceClasses().Create(ctx, builder.DeviceClass("gpu").Driver(gpuDriver).Obj(), opts)),
		errOf(client.ResourceV1().DeviceClasses().Create(ctx, builder.DeviceClass("nic").Driver(nicDriver).Obj(), opts)),
		errOf(client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, tmpl, opts)),
	}
	for i := range o.gpuPods {
		pod := builder.Pod(ns, fmt.Sprintf("inference-%d", i)).CPU("4").Memory("16Gi").
			ClaimFromTemplate("accel", "gpu-and-nic").Toleration("example.com/gpu", "true", corev1.TaintEffectNoSchedule).Obj()
		errs = append(errs, errOf(client.CoreV1().Pods(ns).Create(ctx, pod, opts)))
	}
	for i := range o.cpuPods {
		pod := builder.Pod(ns, fmt.Sprintf("web-%d", i)).CPU("3").Memory("1Gi").Obj()
		errs = append(errs, errOf(client.CoreV1().Pods(ns).Create(ctx, pod, opts)))
	}
	return errors.Join(errs...)
}

// watch prints nodes as they register and pods as they start.
func watch(ctx context.Context, client kubernetes.Interface, sc scene, want int, start time.Time) error {
	seen := map[string]bool{}
	say := func(key, msg string) {
		if !seen[key] {
			seen[key] = true
			fmt.Printf("  +%5.1fs  %s\n", time.Since(start).Seconds(), msg)
		}
	}
	return wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		nodes, err := sc.nodes(ctx)
		if err != nil {
			return false, nil
		}
		for _, name := range slices.Sorted(maps.Keys(nodes)) {
			say("node/"+name, fmt.Sprintf("node %s added to group %s", name, nodes[name]))
		}
		pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
				say("pod/"+p.Name, fmt.Sprintf("pod %s Running on %s", p.Name, p.Spec.NodeName))
			}
		}
		return running == want, nil
	})
}

// cleanup removes what an earlier run of either provider left, so every run
// starts from zero.
func cleanup(ctx context.Context, client kubernetes.Interface) error {
	del := metav1.DeleteOptions{}
	// The namespace goes first, while kwok still manages the nodes that
	// finish its pods' deletion (and, with Cluster API, while its
	// controllers delete the Machines and their Nodes).
	if err := ignoreNotFound(client.CoreV1().Namespaces().Delete(ctx, ns, del)); err != nil {
		return err
	}
	if err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		return fmt.Errorf("namespace %s not gone (with Cluster API objects of an earlier run in it, the Cluster API manager must run: make up CAPI=1): %w", ns, err)
	}
	return errors.Join(
		ignoreNotFound(client.ResourceV1().DeviceClasses().Delete(ctx, "gpu", del)),
		ignoreNotFound(client.ResourceV1().DeviceClasses().Delete(ctx, "nic", del)),
		// The kwok provider's nodes; their slices are owned by them, so
		// the garbage collector removes those. (Cluster API's went with
		// their Machines, in the namespace.)
		ignoreNotFound(client.CoreV1().Nodes().DeleteCollection(ctx, del, metav1.ListOptions{LabelSelector: kwok.LabelNodeGroup})),
	)
}

func summary(ctx context.Context, client kubernetes.Interface, sc scene, took time.Duration) error {
	pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	nodes, err := sc.nodes(ctx)
	if err != nil {
		return err
	}
	perGroup := map[string]int{}
	for _, g := range nodes {
		perGroup[g]++
	}
	var groups []string
	for g, n := range perGroup {
		groups = append(groups, fmt.Sprintf("%s +%d", g, n))
	}
	sort.Strings(groups)
	fmt.Printf("\nin %s the autoscaler added %d node(s) (%s) and the scheduler ran every pod:\n", took.Round(100*time.Millisecond), len(nodes), strings.Join(groups, ", "))
	sort.Slice(pods.Items, func(i, j int) bool { return pods.Items[i].Name < pods.Items[j].Name })
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "POD\tNODE\tPHASE\tDEVICES")
	for _, p := range pods.Items {
		var devices []string
		for _, s := range p.Status.ResourceClaimStatuses {
			if s.ResourceClaimName == nil {
				continue
			}
			claim, err := client.ResourceV1().ResourceClaims(ns).Get(ctx, *s.ResourceClaimName, metav1.GetOptions{})
			if err != nil || claim.Status.Allocation == nil {
				continue
			}
			for _, r := range claim.Status.Allocation.Devices.Results {
				devices = append(devices, r.Device)
			}
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", p.Name, p.Spec.NodeName, p.Status.Phase, strings.Join(devices, ","))
	}
	return w.Flush()
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func ignoreExists[T any](_ T, err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// errOf drops a create call's object and keeps its error.
func errOf[T any](_ T, err error) error { return err }
