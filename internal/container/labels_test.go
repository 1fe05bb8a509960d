package container

import (
	"testing"

	"k8s.io/apimachinery/pkg/labels"
)

// A lookup by id selects the container's objects and never another DCM provider's
// objects that carry the same id (issue 23 item 3).
func TestInstanceSelector(t *testing.T) {
	sel, err := labels.Parse(InstanceSelector("db-1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   bool
	}{
		{"the container's object", SystemLabels("db-1"), true},
		{"with user labels too", map[string]string{LabelManagedBy: "dcm", LabelInstanceID: "db-1", LabelServiceType: "container", "team": "a"}, true},
		{"another container", SystemLabels("db-2"), false},
		{"a database provider's object", map[string]string{LabelManagedBy: "dcm", LabelInstanceID: "db-1", LabelServiceType: "database"}, false},
		{"no service type", map[string]string{LabelManagedBy: "dcm", LabelInstanceID: "db-1"}, false},
		{"not DCM's", map[string]string{LabelManagedBy: "someone", LabelInstanceID: "db-1", LabelServiceType: "container"}, false},
	} {
		if got := sel.Matches(labels.Set(tc.labels)); got != tc.want {
			t.Errorf("%s: matches %v, want %v", tc.name, got, tc.want)
		}
	}
}
