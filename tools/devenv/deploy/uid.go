package deploy

import (
	"bytes"
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"
)

// AssignUID is what OpenShift's restricted-v2 admission does to a pod that pins no user:
// it runs the pod as a uid from the namespace's range (e.g. 1000680000) with group 0.
// As a Helm post-renderer it sets that on every Deployment's pod template, so a test
// sees the service run as a platform would run it, with nothing pinned in the chart.
type AssignUID int64

// Run implements postrender.PostRenderer.
func (u AssignUID) Run(in *bytes.Buffer) (*bytes.Buffer, error) {
	var out bytes.Buffer
	for i, doc := range strings.Split(in.String(), "\n---") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if obj["kind"] == "Deployment" {
			tmpl := dig(obj, "spec", "template", "spec")
			sc, _ := tmpl["securityContext"].(map[string]any)
			if sc == nil {
				sc = map[string]any{}
			}
			if _, pinned := sc["runAsUser"]; pinned {
				return nil, fmt.Errorf("document %d: the Deployment pins runAsUser, which restricted-v2 refuses", i)
			}
			sc["runAsUser"] = int64(u)
			tmpl["securityContext"] = sc
		}
		b, err := yaml.Marshal(obj)
		if err != nil {
			return nil, err
		}
		out.WriteString("---\n")
		out.Write(b)
	}
	return &out, nil
}

// dig returns the map at path in obj, making the maps on the way.
func dig(obj map[string]any, path ...string) map[string]any {
	m := obj
	for _, k := range path {
		next, _ := m[k].(map[string]any)
		if next == nil {
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	return m
}
