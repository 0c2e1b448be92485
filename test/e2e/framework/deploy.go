package framework

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
)

// Kustomize builds a kustomization of the repository (dir relative to the
// module root) with hack/kustomize, the kustomize Go library, and returns
// its objects.
func (c *Cluster) Kustomize(t testing.TB, dir string) []*unstructured.Unstructured {
	t.Helper()
	root := filepath.Dir(filepath.Dir(c.BinDir))
	return c.runManifestTool(t, "kustomize build "+dir, "kustomize", ".", filepath.Join(root, dir))
}

// HelmRender renders the chart deploy/charts/dra-autoscaler as an install
// of release name in namespace with hack/helm (the Helm Go SDK), sets
// given as helm's --set, and returns its objects: the CRDs, then the
// templates in Helm's install order.
func (c *Cluster) HelmRender(t testing.TB, name, namespace string, sets ...string) []*unstructured.Unstructured {
	t.Helper()
	args := []string{"./cmd/render", "--name", name, "--namespace", namespace}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	return c.runManifestTool(t, fmt.Sprintf("helm render %v", sets), "helm", args...)
}

// runManifestTool runs `go run args...` in the module hack/<module> (a
// tool with its own dependencies, which this module cannot import) and
// decodes the manifests it prints.
func (c *Cluster) runManifestTool(t testing.TB, what, module string, args ...string) []*unstructured.Unstructured {
	t.Helper()
	root := filepath.Dir(filepath.Dir(c.BinDir))
	cmd := exec.Command("go", append([]string{"run"}, args...)...)
	cmd.Dir = filepath.Join(root, "hack", module)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", what, err, stderr.String())
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	var objs []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("output of %s: %v", what, err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
	return objs
}

// Apply server-side applies the objects with the admin client, as
// `kubectl apply --server-side` does. Kinds whose API the server does not
// serve yet (a CRD applied just before) are retried until served.
func (c *Cluster) Apply(ctx context.Context, t testing.TB, objs ...*unstructured.Unstructured) {
	t.Helper()
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.Client.Discovery()))
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		what := fmt.Sprintf("%s %s/%s", gvk.Kind, o.GetNamespace(), o.GetName())
		Eventually(ctx, t, time.Minute, "applied "+what, func(ctx context.Context) (bool, string, error) {
			m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if err != nil {
				mapper.Reset()
				return false, err.Error(), nil
			}
			data, err := json.Marshal(o.Object)
			if err != nil {
				return false, "", err
			}
			var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
			if m.Scope.Name() == meta.RESTScopeNameNamespace {
				ri = dyn.Resource(m.Resource).Namespace(o.GetNamespace())
			}
			_, err = ri.Patch(ctx, o.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{FieldManager: "e2e", Force: ptr.To(true)})
			if err != nil {
				return false, err.Error(), nil
			}
			return true, "", nil
		})
	}
}

// ServiceAccountKubeconfig writes a kubeconfig that authenticates as the
// ServiceAccount with a token from the TokenRequest API (an hour long), the
// way a pod's projected token does, and returns its path.
func (c *Cluster) ServiceAccountKubeconfig(ctx context.Context, t testing.TB, namespace, name string) string {
	t.Helper()
	tr, err := c.Client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for ServiceAccount %s/%s: %v", namespace, name, err)
	}
	ca := c.Config.CAData
	if len(ca) == 0 && c.Config.CAFile != "" {
		if ca, err = os.ReadFile(c.Config.CAFile); err != nil {
			t.Fatal(err)
		}
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: c.Config.Host, CertificateAuthorityData: ca}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts["sa"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: name}
	cfg.CurrentContext = "sa"
	path := filepath.Join(t.TempDir(), name+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}
