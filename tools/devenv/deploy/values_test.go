package deploy

import (
	"reflect"
	"strings"
	"testing"
)

func TestValues(t *testing.T) {
	for _, tc := range []struct {
		ref, repo, tag, err string
		extra               map[string]any
	}{
		{ref: "quay.io/dcm-project/k8s-container-service-provider:v1.2.3", repo: "quay.io/dcm-project/k8s-container-service-provider", tag: "v1.2.3"},
		{ref: "127.0.0.1:5000/team/sp:dev", repo: "127.0.0.1:5000/team/sp", tag: "dev"},
		{ref: "nginx:alpine", repo: "docker.io/library/nginx", tag: "alpine"},
		{ref: "quay.io/a/b:v1", repo: "quay.io/a/b", tag: "v1", extra: map[string]any{"replicas": 2}},
		{ref: "quay.io/a/b@sha256:" + strings.Repeat("0", 64), err: "not a digest"},
		{ref: "Bad Ref", err: "image \"Bad Ref\""},
	} {
		v, err := Values(tc.ref, "nats://10.88.0.1:4222", "http://10.88.0.1:8080/api/v1alpha1", 1, tc.extra)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Values(%q): %v, want error %q", tc.ref, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("Values(%q): %v", tc.ref, err)
		}
		if img := v["image"].(map[string]any); img["repository"] != tc.repo || img["tag"] != tc.tag {
			t.Errorf("Values(%q) image = %v, want %s:%s", tc.ref, img, tc.repo, tc.tag)
		}
		want := 1
		if r, ok := tc.extra["replicas"]; ok {
			want = r.(int)
		}
		if v["replicas"] != want {
			t.Errorf("replicas %v, want %d", v["replicas"], want)
		}
		env := v["extraEnv"].([]any)
		if names := []any{env[0].(map[string]any)["name"], env[1].(map[string]any)["name"]}; !reflect.DeepEqual(names, []any{"POD_IP", "SP_ENDPOINT"}) {
			t.Errorf("extraEnv names %v: POD_IP must come first so $(POD_IP) expands", names)
		}
	}
}
