// Package helm renders and lints the dra-autoscaler chart
// (deploy/charts/dra-autoscaler) with the Helm Go SDK, as `helm template`
// and `helm lint` would: for the tests beside it, `make chart-render` and
// the end-to-end tests, with no helm binary.
//
// It is a module of its own, like hack/kustomize: the Helm SDK requires
// newer versions of modules the autoscaler shares with k8s.io/kubernetes,
// and raising them in the main module would rebuild all of Kubernetes for
// a test tool.
package helm

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"strings"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	"helm.sh/helm/v4/pkg/strvals"
)

// Release names the installation.
type Release struct {
	Name, Namespace string
}

// DefaultRelease is how the docs install the chart: release
// dra-autoscaler in kube-system.
var DefaultRelease = Release{Name: "dra-autoscaler", Namespace: "kube-system"}

// Values parses --set style assignments (a.b=c,d[0].e=f) into values.
func Values(sets ...string) (map[string]any, error) {
	vals := map[string]any{}
	for _, s := range sets {
		if err := strvals.ParseInto(s, vals); err != nil {
			return nil, fmt.Errorf("--set %s: %w", s, err)
		}
	}
	return vals, nil
}

// Render renders the chart in dir as an install of rel with vals over the
// chart's values: the CRDs of crds/ first, then the templates in Helm's
// install order, as one multi-document YAML stream.
func Render(dir string, rel Release, vals map[string]any) ([]byte, error) {
	ch, err := loader.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("load chart %s: %w", dir, err)
	}
	top, err := util.ToRenderValues(ch, vals, common.ReleaseOptions{Name: rel.Name, Namespace: rel.Namespace, Revision: 1, IsInstall: true}, common.DefaultCapabilities)
	if err != nil {
		return nil, fmt.Errorf("values: %w", err)
	}
	files, err := engine.Render(ch, top)
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", dir, err)
	}
	// Templates only: NOTES.txt and helpers are not manifests.
	for name := range files {
		if !strings.HasSuffix(name, ".yaml") {
			delete(files, name)
		}
	}
	hooks, manifests, err := releaseutil.SortManifests(files, nil, releaseutil.InstallOrder)
	if err != nil {
		return nil, fmt.Errorf("sort manifests: %w", err)
	}
	if len(hooks) > 0 {
		return nil, fmt.Errorf("the chart has %d hooks; this renderer applies none", len(hooks))
	}
	var b bytes.Buffer
	crds := ch.CRDObjects()
	sort.Slice(crds, func(i, j int) bool { return crds[i].Filename < crds[j].Filename })
	for _, c := range crds {
		writeDoc(&b, c.Filename, string(c.File.Data))
	}
	for _, m := range manifests {
		writeDoc(&b, m.Name, m.Content)
	}
	return b.Bytes(), nil
}

func writeDoc(b *bytes.Buffer, source, content string) {
	content = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(content), "---"))
	if content == "" {
		return
	}
	fmt.Fprintf(b, "---\n# Source: %s\n%s\n", source, content)
}

// Lint runs Helm's lint action (what `helm lint --strict` runs) on the
// chart in dir with vals, and returns every message of warning severity
// or above as one error.
func Lint(dir, namespace string, vals map[string]any) error {
	l := action.NewLint()
	l.Strict = true
	l.Namespace = namespace
	res := l.Run([]string{dir}, vals)
	var errs []error
	for _, m := range res.Messages {
		if m.Severity >= support.WarningSev {
			errs = append(errs, fmt.Errorf("%s", m.Error()))
		}
	}
	errs = append(errs, res.Errors...)
	if res.TotalChartsLinted != 1 {
		errs = append(errs, fmt.Errorf("%d charts linted, want 1", res.TotalChartsLinted))
	}
	return errors.Join(errs...)
}
