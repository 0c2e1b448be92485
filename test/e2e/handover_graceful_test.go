package e2e

import (
	"context"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/kwok"
	"github.com/dra-autoscaler/dra-autoscaler/test/e2e/framework"
)

// apiProxy is one replica's own way to the API server: it passes every
// request, except that while cut it fails the replica's lease requests,
// as a partition between that replica and the lease would. The replica
// goes on running its loop, with the API server in reach.
type apiProxy struct {
	srv        *httptest.Server
	cut        atomic.Bool
	kubeconfig string
}

func newAPIProxy(t *testing.T, c *framework.Cluster) *apiProxy {
	t.Helper()
	transport, err := rest.TransportFor(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	target, err := url.Parse(c.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	rp := &httputil.ReverseProxy{Transport: transport, FlushInterval: -1, // watches stream
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Header.Del("Authorization") // the proxy's transport authenticates
		}}
	p := &apiProxy{}
	p.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p.cut.Load() && strings.Contains(r.URL.Path, "/leases/") {
			http.Error(w, "partitioned from the lease", http.StatusServiceUnavailable)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.srv.Close)
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["proxy"] = &clientcmdapi.Cluster{Server: p.srv.URL,
		CertificateAuthorityData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.srv.Certificate().Raw})}
	cfg.AuthInfos["proxy"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["proxy"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "proxy"}
	cfg.CurrentContext = "proxy"
	p.kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, p.kubeconfig); err != nil {
		t.Fatal(err)
	}
	return p
}

// pair is two live replicas of one autoscaler, each through its own proxy.
type pair struct {
	s       *scenario
	cfg     kwok.Config
	args    []string
	proxies [2]*apiProxy
	procs   [2]*framework.Autoscaler
	leader  int
	// acted are the log lines of what replicas did while not holding the
	// lease (after a cut's renew deadline): must stay empty. evicted
	// counts the evictions of the processes that ended.
	acted   []string
	evicted int
}

// actions are the log lines of a replica acting on the world.
var actions = []string{`"Scale-up"`, "Removing empty node", "Draining and removing node", "Evicted pod"}

func (p *pair) launch(t *testing.T, i int) {
	p.procs[i] = p.s.c.StartAutoscaler(t, p.cfg, append(p.args, "--kubeconfig="+p.proxies[i].kubeconfig)...)
}

func (p *pair) waitLeads(t *testing.T, i, times int) {
	t.Helper()
	framework.Eventually(p.s.ctx, t, time.Minute, fmt.Sprintf("replica %d leads", i), func(ctx context.Context) (bool, string, error) {
		return strings.Count(p.procs[i].Log(), "Became leader") >= times, "", nil
	})
	p.leader = i
}

// handover makes the leader give the lease to the other replica, either
// gracefully (SIGTERM: it finishes its pass and drains, then releases) or
// by losing it while it runs (its lease requests fail; the lease expires;
// the other takes it). The old leader is then started again as the
// standby, so two replicas always run.
func (p *pair) handover(t *testing.T, graceful bool) {
	t.Helper()
	old, next := p.leader, 1-p.leader
	led := strings.Count(p.procs[next].Log(), "Became leader")
	if graceful {
		p.procs[old].Stop()
	} else {
		p.proxies[old].cut.Store(true)
		// Until the renew deadline (2s) it may still act as the leader.
		time.Sleep(2 * time.Second)
		from := len(p.procs[old].Log())
		framework.Eventually(p.s.ctx, t, time.Minute, "the cut-off leader stops", func(ctx context.Context) (bool, string, error) {
			return p.procs[old].Exited(), "", nil
		})
		for _, l := range strings.Split(p.procs[old].Log()[from:], "\n") {
			for _, a := range actions {
				if strings.Contains(l, a) {
					p.acted = append(p.acted, l)
				}
			}
		}
		p.proxies[old].cut.Store(false)
	}
	p.waitLeads(t, next, led+1)
	p.evicted += strings.Count(p.procs[old].Log(), "Evicted pod")
	p.launch(t, old)
}

// Two live replicas hand the lease over twenty times, half of them while
// scale-ups are under way and half while nodes are removed, alternately
// by a graceful stop and by a lease that expires while the old leader
// still runs: every gang gets exactly its nodes (no double scale-up), the
// idle nodes all go, and no replica acts after it lost the lease.
func TestGracefulHandovers(t *testing.T) {
	t.Parallel()
	s := newScenarioWithin(t, 25*time.Minute)
	g := s.gpuGroup("gpu2", 24, 2)
	g.BootDelay.Duration = 3 * time.Second // the handover lands while nodes boot
	p := &pair{s: s, cfg: kwok.Config{NodeGroups: []kwok.NodeGroupConfig{g}}, args: []string{
		"--namespace=" + s.ns, "--leader-elect=true", "--leader-elect-resource-namespace=" + s.ns, "--leader-elect-resource-name=autoscaler",
		"--leader-elect-lease-duration=3s", "--leader-elect-renew-deadline=2s", "--leader-elect-retry-period=250ms",
		"--max-node-provision-time=1m", "--scale-down-unneeded-time=2s", "--scale-down-delay-after-add=0s",
		"--scale-down-delay-after-delete=0s", "--scale-down-delay-after-failure=0s"}}
	p.proxies = [2]*apiProxy{newAPIProxy(t, s.c), newAPIProxy(t, s.c)}
	p.launch(t, 0)
	p.waitLeads(t, 0, 1)
	p.launch(t, 1)
	const rounds = 10
	handovers := 0
	handover := func() {
		p.handover(t, handovers%2 == 0)
		handovers++
	}
	s.gangsAcrossHandovers(t, g, rounds, func() string { return p.procs[p.leader].Log() }, handover)
	// Pods that prefer the nodes of the gangs about to finish: once the
	// gangs go, those nodes are drained (evictions) rather than emptied.
	nodes, err := s.groupNodes(s.ctx, g.Name)
	if err != nil {
		t.Fatal(err)
	}
	var finishing []string
	for _, n := range nodes {
		pods, err := s.c.Client.CoreV1().Pods(s.ns).List(s.ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + n.Name})
		if err != nil {
			t.Fatal(err)
		}
		for _, pod := range pods.Items {
			if gangOf(pod.Name) < rounds/2 {
				finishing = append(finishing, n.Name)
				break
			}
		}
	}
	movable := s.pod("movable").CPU("1").Obj()
	movable.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
		Weight: 100, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{
			Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: finishing}}}}}}}
	s.replicas(t, "movable", 6, movable)
	s.readyReplicas(t, 2*time.Minute, map[string]int32{"movable": 6})
	s.removalsAcrossHandovers(t, g, rounds, handover)
	s.readyReplicas(t, 2*time.Minute, map[string]int32{"movable": 6})
	if len(p.acted) > 0 {
		t.Errorf("replicas acted after losing the lease:\n%s", strings.Join(p.acted, "\n"))
	}
	evicted := p.evicted
	for _, a := range p.procs {
		evicted += strings.Count(a.Log(), "Evicted pod")
	}
	t.Logf("%d handovers (half graceful, half a lost lease); %d nodes for %d running gangs; %d pods evicted, all by the leader of the moment",
		handovers, rounds, rounds/2, evicted)
}

// gangOf is the gang number of a member pod "g<n>-<i>", or -1.
func gangOf(pod string) int {
	var n, i int
	if _, err := fmt.Sscanf(pod, "g%d-%d", &n, &i); err != nil {
		return -1
	}
	return n
}
