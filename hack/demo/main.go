// Command demo shows the autoscaler at work on the local control plane
// (make up). It starts dra-autoscaler, leaves it running for a look
// further, and plays scenes, each saying what to look for and what
// happened; a scene that does not behave makes it exit 1, so the demo is
// also a smoke test (go test ./hack/demo).
//
// The first scene runs on the example node groups of --cloud-config
// (deploy/kwok/kwok-provider.yaml: a CPU group and a GPU group whose nodes
// have 8 GPUs and 8 NICs paired by PCIe root): an inference workload whose
// pods each claim a GPU plus the NIC on its root, and some CPU-only pods.
// The scenes after it (scenes.go) show what a pod-by-pod, device-blind
// autoscaler cannot do: gangs in one rack, all or nothing, reservations
// first, GPU slices packed, an explanation for a pod no group can help,
// and scale-down that keeps paid capacity. Their groups are in
// scenes-kwok.yaml.
//
// --provider=kwok (the default) runs the autoscaler's kwok provider on
// all those groups; --provider=clusterapi makes the first scene's groups
// Cluster API MachineDeployments of the dev infrastructure provider
// (test/capi/infra; make up CAPI=1 runs it and the Cluster API manager),
// runs the autoscaler's clusterapi provider on them (capi.go) and plays
// the first scene only.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/kwok"
	"github.com/dra-autoscaler/dra-autoscaler/test/controlplane"
	"github.com/dra-autoscaler/dra-autoscaler/test/poll"
)

const (
	ns        = "demo"
	gpuDriver = "gpu.example.com"
	nicDriver = "nic.example.com"
	// pcieRoot is the standard attribute both drivers publish, so one
	// matchAttribute constraint can pair a GPU with a NIC.
	pcieRoot = "resource.kubernetes.io/pcieRoot"
	gpuTaint = "example.com/gpu"
)

type options struct {
	kubeconfig, autoscaler, cloudConfig, scenesConfig, sharingConfig string
	logFile, provider, stateDir, address, featureGates               string
	gpuPods, cpuPods                                                 int
	timeout, sceneTimeout, unneededTime, scanInterval                time.Duration
	out                                                              io.Writer
}

// provider is what differs between the cloud providers: the node groups
// the autoscaler scales and how their nodes are found.
type provider interface {
	// setUp creates the provider's objects in the demo namespace, before
	// the autoscaler starts (it reads its node groups at start-up).
	setUp(ctx context.Context) error
	// args are the autoscaler's provider flags.
	args() []string
	// nodes maps the groups' nodes to their group.
	nodes(ctx context.Context) (map[string]string, error)
}

func main() {
	o, err := parseOptions(os.Args[1:], os.Stdout)
	if err != nil {
		os.Exit(2)
	}
	if err := run(context.Background(), o); err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		os.Exit(1)
	}
}

func parseOptions(args []string, out io.Writer) (options, error) {
	o := options{out: out}
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.StringVar(&o.kubeconfig, "kubeconfig", "_out/cluster/kubeconfig", "kubeconfig of the cluster")
	fs.StringVar(&o.stateDir, "state-dir", "_out/cluster", "the control plane's state directory: the autoscaler's pid file and the merged config go there, for make down and explain")
	fs.StringVar(&o.autoscaler, "autoscaler", "_out/bin/dra-autoscaler", "the dra-autoscaler binary")
	fs.StringVar(&o.cloudConfig, "cloud-config", "deploy/kwok/kwok-provider.yaml", "the first scene's node groups, as the kwok provider's config")
	fs.StringVar(&o.scenesConfig, "scenes-config", "hack/demo/scenes-kwok.yaml", "the further scenes' node groups and reservation, as the kwok provider's config")
	fs.StringVar(&o.sharingConfig, "sharing-config", "deploy/examples/kwok-sharing.yaml", "the kwok config whose "+sharingGroup+" group the sharing scene scales")
	fs.StringVar(&o.provider, "provider", "kwok", "the autoscaler's cloud provider: kwok, or clusterapi (Cluster API machines; make up CAPI=1; first scene only)")
	fs.StringVar(&o.logFile, "log", "_out/demo-autoscaler.log", "where the autoscaler logs")
	fs.StringVar(&o.address, "address", "127.0.0.1:16446", "the autoscaler's /metrics and /health-check address")
	fs.StringVar(&o.featureGates, "feature-gates", controlplane.DefaultFeatureGates, "the autoscaler's --feature-gates: the local control plane's")
	fs.IntVar(&o.gpuPods, "gpu-pods", 3, "the first scene's inference pods, each claiming a GPU and its NIC")
	fs.IntVar(&o.cpuPods, "cpu-pods", 2, "the first scene's CPU-only pods")
	fs.DurationVar(&o.timeout, "timeout", 3*time.Minute, "how long cleaning up an earlier run and starting may take")
	fs.DurationVar(&o.sceneTimeout, "scene-timeout", 90*time.Second, "how long each scene may take")
	fs.DurationVar(&o.unneededTime, "scale-down-unneeded-time", 10*time.Second, "the autoscaler's --scale-down-unneeded-time (upstream's default is 10m)")
	fs.DurationVar(&o.scanInterval, "scan-interval", time.Second, "the autoscaler's --scan-interval")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		err := fmt.Errorf("unexpected arguments: %v", fs.Args())
		fmt.Fprintln(fs.Output(), err)
		return o, err
	}
	if o.gpuPods < 0 || o.cpuPods < 0 || o.sceneTimeout <= 0 || o.scanInterval <= 0 || o.unneededTime < 0 {
		err := fmt.Errorf("--gpu-pods, --cpu-pods and --scale-down-unneeded-time must not be negative, --scene-timeout and --scan-interval must be positive")
		fmt.Fprintln(fs.Output(), err)
		return o, err
	}
	return o, nil
}

// demo is one run: the cluster, the provider and the autoscaler.
type demo struct {
	o      options
	client kubernetes.Interface
	prov   provider
	// cfg is the kwok provider's config of every group (nil with Cluster
	// API), written to cfgPath for the autoscaler and explain.
	cfg     *kwok.Config
	cfgPath string
	auto    *autoscaler
}

func run(ctx context.Context, o options) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.stateDir, 0o755); err != nil {
		return err
	}
	d := &demo{o: o, client: client}
	switch o.provider {
	case "kwok":
		if d.cfg, err = mergeConfigs(o); err != nil {
			return err
		}
		d.cfgPath = o.stateDir + "/demo-kwok-provider.yaml"
		if err := writeConfig(d.cfgPath, d.cfg); err != nil {
			return err
		}
		d.prov = kwokProvider{client: client, cloudConfig: d.cfgPath}
	case "clusterapi":
		if d.prov, err = newCAPIProvider(cfg, client, o); err != nil {
			return err
		}
	default:
		return fmt.Errorf("--provider=%q: want kwok or clusterapi", o.provider)
	}
	// An autoscaler an earlier run left would scale for this run's pods
	// with the old groups; it goes before anything is cleaned up.
	if _, err := controlplane.StopAutoscaler(o.stateDir); err != nil {
		return err
	}
	setupCtx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	if err := cleanup(setupCtx, client); err != nil {
		return fmt.Errorf("removing an earlier run: %w", err)
	}
	if err := createNamespace(setupCtx, client); err != nil {
		return err
	}
	if err := d.prov.setUp(setupCtx); err != nil {
		return err
	}
	progress := controlplane.NewPrinter(o.out)
	if d.auto, err = startAutoscaler(setupCtx, o, d.prov, progress); err != nil {
		return err
	}
	// Left running on success, for the hints below; stopped on failure
	// to set up, where there is nothing to look at.
	if err := createClasses(setupCtx, d); err != nil {
		return errors.Join(err, d.auto.stop())
	}
	results := d.play(ctx, d.scenes())
	printSummary(o.out, results)
	d.printHints()
	var failed []string
	for _, r := range results {
		if r.err != nil {
			failed = append(failed, r.scene.name)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d scene(s) did not behave: %v (autoscaler log: %s)", len(failed), failed, o.logFile)
	}
	return nil
}

// kwokProvider: the autoscaler's kwok provider adds the nodes itself.
type kwokProvider struct {
	client      kubernetes.Interface
	cloudConfig string
}

func (kwokProvider) setUp(context.Context) error { return nil }

func (k kwokProvider) args() []string {
	return []string{"--cloud-provider=kwok", "--cloud-config=" + k.cloudConfig}
}

func (k kwokProvider) nodes(ctx context.Context) (map[string]string, error) {
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

func createNamespace(ctx context.Context, client kubernetes.Interface) error {
	opts := metav1.CreateOptions{}
	return errors.Join(
		errOf(client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, opts)),
		// The ServiceAccount controller may have been first.
		ignoreExists(client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, opts)),
	)
}

// cleanup removes what an earlier run of either provider left, so every run
// starts from zero.
func cleanup(ctx context.Context, client kubernetes.Interface) error {
	del := metav1.DeleteOptions{}
	// The namespace goes first, while kwok still manages the nodes that
	// finish its pods' deletion (and, with Cluster API, while its
	// controllers delete the Machines and their Nodes). With it go the
	// kwok provider's records of its instances (stateNamespace).
	if err := ignoreNotFound(client.CoreV1().Namespaces().Delete(ctx, ns, del)); err != nil {
		return err
	}
	if err := poll.Until(ctx, 2*time.Minute, "namespace "+ns+" gone", func(ctx context.Context) (bool, string, error) {
		_, err := client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err), nil
	}); err != nil {
		return fmt.Errorf("%w (with Cluster API objects of an earlier run in it, the Cluster API manager must run: make up CAPI=1)", err)
	}
	errs := []error{
		// The kwok provider's nodes; their slices are owned by them, so
		// the garbage collector removes those. (Cluster API's went with
		// their Machines, in the namespace.)
		ignoreNotFound(client.CoreV1().Nodes().DeleteCollection(ctx, del, metav1.ListOptions{LabelSelector: kwok.LabelNodeGroup})),
	}
	for _, c := range []string{"gpu", "nic"} {
		errs = append(errs, ignoreNotFound(client.ResourceV1().DeviceClasses().Delete(ctx, c, del)))
	}
	return errors.Join(errs...)
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
