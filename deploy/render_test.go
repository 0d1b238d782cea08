// Package deploy holds the tests of the container image, the Helm chart
// and the systemd unit: the chart renders as `helm template` renders it,
// every manifest validates against the Kubernetes API's types and schema,
// and the command lines they give `hoplite node` run.
package deploy

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"k8s.io/apimachinery/pkg/util/yaml"
	sigsyaml "sigs.k8s.io/yaml"
)

const (
	chartDir    = "helm/hoplite"
	releaseName = "hoplite"
	namespace   = "store"
	// kubeVersion is the Kubernetes the chart renders for: that of the
	// k8s.io/api whose types and schema validate it (go.mod).
	kubeVersion = "v1.37.0"
)

// render is `helm template hoplite helm/hoplite --namespace store
// --kube-version 1.37.0` with vals over values.yaml: the chart's
// manifests, one YAML document each.
func render(t *testing.T, vals map[string]any) ([]string, error) {
	t.Helper()
	chrt, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := chartutil.ParseKubeVersion(kubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	install := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	install.DryRun, install.ClientOnly, install.Replace, install.IncludeCRDs = true, true, true, true
	install.ReleaseName, install.Namespace, install.KubeVersion = releaseName, namespace, kv
	rel, err := install.Run(chrt, vals)
	if err != nil {
		return nil, err
	}
	var docs []string
	manifests := rel.Manifest
	for _, h := range rel.Hooks {
		manifests += "\n---\n" + h.Manifest
	}
	r := yaml.NewYAMLReader(bufio.NewReader(strings.NewReader(manifests)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(bytes.TrimSpace(stripComments(doc))) > 0 {
			docs = append(docs, string(doc))
		}
	}
	return docs, nil
}

// mustRender is render that fails the test on an error.
func mustRender(t *testing.T, vals map[string]any) []string {
	t.Helper()
	docs, err := render(t, vals)
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	return docs
}

// values parses YAML values as `helm template -f` takes them.
func values(t *testing.T, y string) map[string]any {
	t.Helper()
	v := map[string]any{}
	if err := sigsyaml.Unmarshal([]byte(y), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// stripComments drops the whole-line comments of a YAML document (Helm
// writes "# Source: ..." before each).
func stripComments(doc []byte) []byte {
	var out []string
	for _, l := range strings.Split(string(doc), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			out = append(out, l)
		}
	}
	return []byte(strings.Join(out, "\n"))
}
