// Command demo applies an example inference workload to the local control
// plane (make up) and shows it running: a node with 8 GPUs and 8 NICs paired
// by PCIe root, published in a ResourceSlice, and pods each claiming one GPU
// plus the NIC on the same root. The real scheduler allocates and binds.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
	"github.com/dra-autoscaler/dra-autoscaler/test/controlplane"
)

const (
	ns        = "demo"
	gpuDriver = "gpu.example.com"
	nicDriver = "nic.example.com"
	// pcieRoot is the standard attribute both drivers publish, so one
	// matchAttribute constraint can pair a GPU with a NIC.
	pcieRoot = "resource.kubernetes.io/pcieRoot"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "_out/cluster/kubeconfig", "kubeconfig of the cluster")
	pods := flag.Int("pods", 3, "inference pods to run")
	timeout := flag.Duration("timeout", 2*time.Minute, "how long to wait for the pods")
	flag.Parse()
	if err := run(*kubeconfig, *pods, *timeout); err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		os.Exit(1)
	}
}

func run(kubeconfig string, pods int, timeout time.Duration) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := cleanup(ctx, client); err != nil {
		return fmt.Errorf("removing an earlier run: %w", err)
	}
	if err := apply(ctx, client, pods); err != nil {
		return err
	}
	fmt.Printf("applied: node gpu-node-0 (8 GPUs + 8 NICs), %d pods claiming a GPU and the NIC on its PCIe root\n", pods)
	err = wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		running := 0
		for _, p := range list.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == pods, nil
	})
	if err != nil {
		return fmt.Errorf("pods not Running within %s: %w", timeout, err)
	}
	return summary(context.Background(), client)
}

func apply(ctx context.Context, client kubernetes.Interface, pods int) error {
	node := builder.Node("gpu-node-0").CPU("64").Memory("512Gi").Label("node.kubernetes.io/instance-type", "gpu-8x").Obj()
	node.Annotations = map[string]string{controlplane.KwokNodeAnnotation: controlplane.KwokNodeAnnotationValue}
	var gpus, nics []*builder.DeviceBuilder
	for i := range 8 {
		root := fmt.Sprintf("pci%d", i)
		gpus = append(gpus, builder.Device(fmt.Sprintf("gpu-%d", i)).Attr(pcieRoot, root).Capacity("memory", "80Gi"))
		nics = append(nics, builder.Device(fmt.Sprintf("nic-%d", i)).Attr(pcieRoot, root))
	}
	tmpl := builder.ClaimTemplate(ns, "gpu-and-nic").
		Request(builder.Request("gpu", "gpu"), builder.Request("nic", "nic")).
		MatchAttribute(pcieRoot).Obj()
	opts := metav1.CreateOptions{}
	errs := []error{
		errOf(client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, opts)),
		errOf(client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, opts)),
		errOf(client.ResourceV1().DeviceClasses().Create(ctx, builder.DeviceClass("gpu").Driver(gpuDriver).Obj(), opts)),
		errOf(client.ResourceV1().DeviceClasses().Create(ctx, builder.DeviceClass("nic").Driver(nicDriver).Obj(), opts)),
		errOf(client.CoreV1().Nodes().Create(ctx, node, opts)),
		errOf(client.ResourceV1().ResourceSlices().Create(ctx, builder.ResourceSlice("gpu-node-0-gpus", node.Name, gpuDriver, node.Name).Devices(gpus...).Obj(), opts)),
		errOf(client.ResourceV1().ResourceSlices().Create(ctx, builder.ResourceSlice("gpu-node-0-nics", node.Name, nicDriver, node.Name).Devices(nics...).Obj(), opts)),
		errOf(client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, tmpl, opts)),
	}
	for i := range pods {
		pod := builder.Pod(ns, fmt.Sprintf("inference-%d", i)).CPU("4").Memory("16Gi").ClaimFromTemplate("accel", "gpu-and-nic").Obj()
		errs = append(errs, errOf(client.CoreV1().Pods(ns).Create(ctx, pod, opts)))
	}
	return errors.Join(errs...)
}

// cleanup removes what an earlier run of the demo left, so every run starts
// from the same state.
func cleanup(ctx context.Context, client kubernetes.Interface) error {
	del := metav1.DeleteOptions{}
	errs := []error{
		ignoreNotFound(client.CoreV1().Namespaces().Delete(ctx, ns, del)),
		ignoreNotFound(client.CoreV1().Nodes().Delete(ctx, "gpu-node-0", del)),
		ignoreNotFound(client.ResourceV1().ResourceSlices().Delete(ctx, "gpu-node-0-gpus", del)),
		ignoreNotFound(client.ResourceV1().ResourceSlices().Delete(ctx, "gpu-node-0-nics", del)),
		ignoreNotFound(client.ResourceV1().DeviceClasses().Delete(ctx, "gpu", del)),
		ignoreNotFound(client.ResourceV1().DeviceClasses().Delete(ctx, "nic", del)),
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// errOf drops a create call's object and keeps its error.
func errOf[T any](_ T, err error) error { return err }

func summary(ctx context.Context, client kubernetes.Interface) error {
	list, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "POD\tNODE\tPHASE\tDEVICES")
	for _, p := range list.Items {
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
