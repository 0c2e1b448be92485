// Command demo shows the autoscaler at work on the local control plane
// (make up): it starts dra-autoscaler with the kwok provider and the example
// node groups (deploy/kwok/kwok-provider.yaml: a CPU group and a GPU
// group whose nodes have 8 GPUs and 8 NICs paired by PCIe root, both from
// zero), applies an inference workload whose pods each claim a GPU plus the
// NIC on its root, and some CPU-only pods, then reports nodes as they
// appear and pods as they run, and sums up.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
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
	kubeconfig, autoscaler, cloudConfig, logFile string
	gpuPods, cpuPods                             int
	timeout                                      time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.kubeconfig, "kubeconfig", "_out/cluster/kubeconfig", "kubeconfig of the cluster")
	flag.StringVar(&o.autoscaler, "autoscaler", "_out/bin/dra-autoscaler", "the dra-autoscaler binary")
	flag.StringVar(&o.cloudConfig, "cloud-config", "deploy/kwok/kwok-provider.yaml", "kwok provider node groups")
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
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	if err := cleanup(ctx, client); err != nil {
		return fmt.Errorf("removing an earlier run: %w", err)
	}
	stop, err := startAutoscaler(o)
	if err != nil {
		return err
	}
	defer stop()
	if err := apply(ctx, client, o); err != nil {
		return err
	}
	fmt.Printf("applied: %d inference pods (1 GPU + the NIC on its PCIe root each) and %d CPU pods; no node can run them yet\n", o.gpuPods, o.cpuPods)
	start := time.Now()
	if err := watch(ctx, client, o.gpuPods+o.cpuPods, start); err != nil {
		return fmt.Errorf("%w (autoscaler log: %s)", err, o.logFile)
	}
	return summary(context.Background(), client, time.Since(start))
}

func startAutoscaler(o options) (func(), error) {
	logFile, err := os.Create(o.logFile)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(o.autoscaler, "--kubeconfig="+o.kubeconfig, "--cloud-provider=kwok", "--cloud-config="+o.cloudConfig,
		"--scan-interval=2s", "--leader-elect=false", "--address=127.0.0.1:0", "--v=2")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", o.autoscaler, err)
	}
	fmt.Printf("dra-autoscaler started (pid %d, log %s)\n", cmd.Process.Pid, o.logFile)
	return func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		logFile.Close()
	}, nil
}

func apply(ctx context.Context, client kubernetes.Interface, o options) error {
	tmpl := builder.ClaimTemplate(ns, "gpu-and-nic").
		Request(builder.Request("gpu", "gpu"), builder.Request("nic", "nic")).
		MatchAttribute(pcieRoot).Obj()
	opts := metav1.CreateOptions{}
	errs := []error{
		errOf(client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, opts)),
		// The ServiceAccount controller may have been first.
		ignoreExists(client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, opts)),
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
func watch(ctx context.Context, client kubernetes.Interface, want int, start time.Time) error {
	seen := map[string]bool{}
	say := func(key, msg string) {
		if !seen[key] {
			seen[key] = true
			fmt.Printf("  +%5.1fs  %s\n", time.Since(start).Seconds(), msg)
		}
	}
	return wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: kwok.LabelNodeGroup})
		if err != nil {
			return false, nil
		}
		for _, n := range nodes.Items {
			say("node/"+n.Name, fmt.Sprintf("node %s added to group %s", n.Name, n.Labels[kwok.LabelNodeGroup]))
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

// cleanup removes what an earlier run left, so every run starts from zero.
// The provider's slices are owned by their nodes: the garbage collector
// removes them with the nodes.
func cleanup(ctx context.Context, client kubernetes.Interface) error {
	del := metav1.DeleteOptions{}
	// The namespace goes first, while kwok still manages the nodes that
	// finish its pods' deletion.
	if err := ignoreNotFound(client.CoreV1().Namespaces().Delete(ctx, ns, del)); err != nil {
		return err
	}
	if err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		return fmt.Errorf("namespace %s not gone: %w", ns, err)
	}
	return errors.Join(
		ignoreNotFound(client.ResourceV1().DeviceClasses().Delete(ctx, "gpu", del)),
		ignoreNotFound(client.ResourceV1().DeviceClasses().Delete(ctx, "nic", del)),
		ignoreNotFound(client.CoreV1().Nodes().DeleteCollection(ctx, del, metav1.ListOptions{LabelSelector: kwok.LabelNodeGroup})),
	)
}

func summary(ctx context.Context, client kubernetes.Interface, took time.Duration) error {
	pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: kwok.LabelNodeGroup})
	if err != nil {
		return err
	}
	perGroup := map[string]int{}
	for _, n := range nodes.Items {
		perGroup[n.Labels[kwok.LabelNodeGroup]]++
	}
	var groups []string
	for g, n := range perGroup {
		groups = append(groups, fmt.Sprintf("%s +%d", g, n))
	}
	sort.Strings(groups)
	fmt.Printf("\nin %s the autoscaler added %d node(s) (%s) and the scheduler ran every pod:\n", took.Round(100*time.Millisecond), len(nodes.Items), strings.Join(groups, ", "))
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
