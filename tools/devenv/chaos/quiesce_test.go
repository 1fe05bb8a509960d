package chaos

import (
	"slices"
	"testing"
)

func TestPodlessDeployments(t *testing.T) {
	dep := func(name, id, inc string, deleting bool) Object {
		return Object{Name: name, ID: id, Incarnation: inc, Deleting: deleting}
	}
	pod := func(id, inc string) Object { return Object{Name: "p-" + id, ID: id, Incarnation: inc} }
	for _, tc := range []struct {
		name string
		f    Final
		want []string
	}{
		{"every Deployment has a pod", Final{Deployments: []Object{dep("app-a", "c-1", "i1", false)}, Pods: []Object{pod("c-1", "i1")}}, nil},
		{"no pod at all", Final{Deployments: []Object{dep("app-b", "c-2", "i2", false), dep("app-a", "c-1", "i1", false)}, Pods: []Object{pod("c-1", "i1")}},
			[]string{"app-b (c-2)"}},
		{"a pod of an earlier incarnation does not count", Final{Deployments: []Object{dep("app-a", "c-1", "i2", false)}, Pods: []Object{pod("c-1", "i1")}},
			[]string{"app-a (c-1)"}},
		{"a Deployment being deleted is not waited for", Final{Deployments: []Object{dep("app-a", "c-1", "i1", true)}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := podlessDeployments(tc.f); !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
