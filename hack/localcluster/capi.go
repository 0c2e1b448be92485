package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/dra-autoscaler/dra-autoscaler/test/capi/infra"
	"github.com/dra-autoscaler/dra-autoscaler/test/controlplane"
)

// startCAPI runs Cluster API on the control plane, as the e2e tests do:
// the core manager (webhook-less) and the dev infrastructure provider of
// test/capi/infra in this process. The returned stop ends both.
func startCAPI(ctx context.Context, o options, cp *controlplane.ControlPlane) (func() error, error) {
	crdDir, err := controlplane.CAPICRDDir(ctx)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cp.RESTConfig)
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(cp.RESTConfig)
	if err != nil {
		return nil, err
	}
	names, err := infra.InstallCRDs(ctx, dyn)
	if err != nil {
		return nil, err
	}
	if err := controlplane.WaitCRDsEstablished(ctx, cp.RESTConfig, names, time.Minute); err != nil {
		return nil, err
	}
	cfg := cp.ClusterConfig()
	mgr, err := controlplane.StartCAPIManager(ctx, controlplane.CAPIConfig{
		Kubeconfig: cfg.KubeconfigPath(), RESTConfig: cp.RESTConfig, BinDir: cfg.BinDir, StateDir: o.stateDir,
		CRDDir: crdDir, ReadyTimeout: o.readyTimeout,
	})
	if err != nil {
		return nil, err
	}
	ictx, cancel := context.WithCancel(ctx)
	go func() {
		if err := infra.New(dyn, kube, infra.Options{KubeletVersion: controlplane.KubernetesVersion}).Run(ictx); err != nil {
			fmt.Fprintf(os.Stderr, "dev infrastructure: %v\n", err)
		}
	}()
	fmt.Printf("Cluster API %s running (log %s)\n", controlplane.CAPIVersion, mgr.LogPath)
	return func() error { cancel(); return mgr.Stop() }, nil
}
