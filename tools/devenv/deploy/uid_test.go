package deploy

import (
	"bytes"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestAssignUID(t *testing.T) {
	const deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: sp}\nspec:\n  template:\n    spec:\n      securityContext: {runAsNonRoot: true}\n"
	const service = "apiVersion: v1\nkind: Service\nmetadata: {name: sp}\n"
	for _, tc := range []struct {
		name, in, err string
		want          map[string]any // the Deployment's pod securityContext
	}{
		{name: "deployment and service", in: "---\n" + service + "---\n" + deployment,
			want: map[string]any{"runAsNonRoot": true, "runAsUser": float64(1000680000)}},
		{name: "no pod securityContext", in: "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: sp}\nspec: {}\n",
			want: map[string]any{"runAsUser": float64(1000680000)}},
		{name: "pinned", in: strings.Replace(deployment, "runAsNonRoot: true", "runAsUser: 65532", 1), err: "pins runAsUser"},
		{name: "not yaml", in: "kind: [", err: "document 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := AssignUID(1000680000).Run(bytes.NewBufferString(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			for _, doc := range strings.Split(out.String(), "\n---") {
				var obj map[string]any
				if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
					t.Fatal(err)
				}
				if obj["kind"] == "Deployment" {
					got = obj["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["securityContext"].(map[string]any)
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("securityContext %v, want %v", got, tc.want)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("%s = %v, want %v", k, got[k], v)
				}
			}
		})
	}
}
