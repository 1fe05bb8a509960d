package chart

import (
	"fmt"
	"path/filepath"
	"runtime"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// Dir is the chart's directory, found from this file, so tests and tools run from any
// directory.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "deploy", "helm", "k8s-container-sp")
}

// Release names the release and its namespace, as `helm template NAME -n NAMESPACE`.
type Release struct{ Name, Namespace string }

// Render renders the chart with valuesYAML (a values file's content; empty for the
// defaults), as `helm template` does: the values are checked against
// values.schema.json first, and its error names the field. It returns the objects in
// the order Helm would install them, NOTES.txt left out.
func Render(rel Release, valuesYAML []byte) ([]*unstructured.Unstructured, error) {
	files, err := renderFiles(rel, valuesYAML)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(files))
	for name := range files {
		if !strings.HasSuffix(name, "NOTES.txt") {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	var objs []*unstructured.Unstructured
	for _, name := range names {
		manifests := releaseutil.SplitManifests(files[name])
		keys := make([]string, 0, len(manifests))
		for k := range manifests {
			keys = append(keys, k)
		}
		sort.Sort(releaseutil.BySplitManifestsOrder(keys))
		for _, k := range keys {
			var m map[string]any
			if err := yaml.Unmarshal([]byte(manifests[k]), &m); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			if len(m) == 0 {
				continue
			}
			objs = append(objs, &unstructured.Unstructured{Object: m})
		}
	}
	return objs, nil
}

// Notes renders the chart as Render does and returns NOTES.txt, what helm install prints.
func Notes(rel Release, valuesYAML []byte) (string, error) {
	files, err := renderFiles(rel, valuesYAML)
	if err != nil {
		return "", err
	}
	for name, text := range files {
		if strings.HasSuffix(name, "NOTES.txt") {
			return text, nil
		}
	}
	return "", fmt.Errorf("the chart has no NOTES.txt")
}

// renderFiles renders every template, the values checked against values.schema.json first.
func renderFiles(rel Release, valuesYAML []byte) (map[string]string, error) {
	ch, err := loader.Load(Dir())
	if err != nil {
		return nil, err
	}
	vals, err := chartutil.ReadValues(valuesYAML)
	if err != nil {
		return nil, fmt.Errorf("values: %w", err)
	}
	top, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{
		Name: rel.Name, Namespace: rel.Namespace, Revision: 1, IsInstall: true,
	}, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, err
	}
	return engine.Render(ch, top)
}
