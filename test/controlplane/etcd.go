package controlplane

import (
	"fmt"
	"net/url"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// startEtcd runs etcd inside this process, the version k8s.io/kubernetes pins.
func startEtcd(cfg *ClusterConfig, timeout time.Duration) (*embed.Etcd, error) {
	logPath := cfg.path("etcd.log")
	ec := embed.NewConfig()
	ec.Name = "local"
	ec.Dir = cfg.path("etcd")
	client := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", cfg.Ports.Etcd)}
	peer := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", cfg.Ports.EtcdPeer)}
	ec.ListenClientUrls, ec.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	ec.ListenPeerUrls, ec.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	ec.InitialCluster = ec.InitialClusterFromName(ec.Name)
	ec.LogLevel = "warn"
	ec.LogOutputs = []string{logPath}
	// A development store: losing it on a power cut is fine, fsync latency
	// on a shared disk is not.
	ec.UnsafeNoFsync = true
	e, err := embed.StartEtcd(ec)
	if err != nil {
		return nil, componentError("etcd", fmt.Sprintf("failed to start: %v", err), logPath)
	}
	select {
	case <-e.Server.ReadyNotify():
		return e, nil
	case err := <-e.Err():
		e.Close()
		return nil, componentError("etcd", fmt.Sprintf("failed: %v", err), logPath)
	case <-time.After(timeout):
		e.Server.Stop()
		e.Close()
		return nil, componentError("etcd", fmt.Sprintf("not ready after %s", timeout), logPath)
	}
}
