package kubeerr

import (
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// A ResourceQuota's refusal, as the apiserver's quota admission words it, names the
// quota and shows the namespace's usage across every tenant: the client's answer names
// only the resources exceeded, in fixed words; the message is kept for the log.
func TestQuotaRefusalShowsNoUsage(t *testing.T) {
	dep := schema.GroupResource{Group: "apps", Resource: "deployments"}
	cases := []struct{ msg, want string }{
		{"exceeded quota: team-a-secret-quota, requested: limits.memory=2Gi, used: limits.memory=61Gi, limited: limits.memory=62Gi",
			"resources: the containers' namespace quota does not allow this container (limits.memory)"},
		{"exceeded quota: q, requested: limits.cpu=2,limits.memory=2Gi, used: limits.cpu=63,limits.memory=61Gi, limited: limits.cpu=64,limits.memory=62Gi",
			"resources: the containers' namespace quota does not allow this container (limits.cpu, limits.memory)"},
		{"exceeded quota: no-services, requested: services=1, used: services=0, limited: services=0",
			"resources: the containers' namespace quota does not allow this container (services)"},
		{"exceeded quota: q, requested: count/deployments.apps=1, used: count/deployments.apps=5000, limited: count/deployments.apps=5000",
			"resources: the containers' namespace quota does not allow this container (count/deployments.apps)"},
		{"exceeded quota: q, requested: requests.example.com/gpu=1, used: requests.example.com/gpu=8, limited: requests.example.com/gpu=8",
			"resources: the containers' namespace quota does not allow this container (requests.example.com/gpu)"},
		// A form it does not know: the fixed text alone.
		{"exceeded quota: q", "resources: the containers' namespace quota does not allow this container"},
		{"exceeded quota: q, requested: <script>=1, used: x=1, limited: x=1", "resources: the containers' namespace quota does not allow this container"},
	}
	for _, tc := range cases {
		err := Classify("creating Deployment", apierrors.NewForbidden(dep, "web-x", errors.New(tc.msg)))
		var se *Error
		if !errors.As(err, &se) || se.Kind != KindQuota || len(se.Fields) != 1 {
			t.Fatalf("%q: %v", tc.msg, err)
		}
		if got := se.Fields[0].Detail; got != tc.want {
			t.Errorf("%q:\n got %q\nwant %q", tc.msg, got, tc.want)
		}
		for _, leak := range []string{"used:", "limited:", "61Gi", "62Gi", "5000", "team-a-secret-quota", "=8"} {
			if strings.Contains(se.Fields[0].Detail, leak) || strings.Contains(se.Message, leak) {
				t.Errorf("the answer shows %q: %q / %q", leak, se.Fields[0].Detail, se.Message)
			}
		}
		if !strings.Contains(se.Error(), tc.msg) {
			t.Errorf("the log loses the quota's message: %v", se)
		}
	}
	long := "exceeded quota: q, requested: "
	for i := range 20 {
		long += "count/r" + strings.Repeat("x", i) + ".example.com=1,"
	}
	if got := QuotaText(long + ", used: x, limited: x"); strings.Count(got, ",") > maxQuotaResources || !strings.HasSuffix(got, "…)") {
		t.Errorf("many resources: %q", got)
	}
}
