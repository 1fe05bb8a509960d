package access

import (
	"os"
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/kubernetes/scheme"
)

// The shipped Role grants exactly what the service uses: nothing missing (the service
// would fail), nothing more ("only what the provider needs").
func TestRoleGrantsExactlyRequired(t *testing.T) {
	b, err := os.ReadFile("../../deploy/base/role.yaml")
	if err != nil {
		t.Fatal(err)
	}
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(b, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	role, ok := obj.(*rbacv1.Role)
	if !ok {
		t.Fatalf("role.yaml holds a %T", obj)
	}
	var granted []Permission
	for _, r := range role.Rules {
		if len(r.ResourceNames) > 0 || len(r.NonResourceURLs) > 0 {
			t.Errorf("rule %+v: only whole resources are expected", r)
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					granted = append(granted, Permission{Verb: v, Group: g, Resource: res})
				}
			}
		}
	}
	for _, p := range granted {
		if !slices.Contains(Required, p) {
			t.Errorf("role.yaml grants %s, which the service never uses (not in Required)", p)
		}
	}
	for _, p := range Required {
		if !slices.Contains(granted, p) {
			t.Errorf("role.yaml lacks %s (in Required)", p)
		}
	}
}
