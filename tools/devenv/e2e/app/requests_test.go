package app_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness/testenv"
)

// The apiserver requests of a container's life through the running service, its
// status controller included (tools/devenv/e2e/store/requests_test.go pins the store's
// paths one by one; docs/architecture.md lists them). Only requests about the
// container are counted: its record by name, and writes of Deployments and Services;
// the election's renewals, the API probe and the informers' watches are background
// work of the service's own.
func TestRequestsOfAContainersLife(t *testing.T) {
	ns, _, events, p := withStream(t)
	const id = "counted"
	record := "/configmaps/" + container.RecordName(id)
	about := func(calls []apiCall, serving bool) []string {
		var out []string
		for _, c := range calls {
			method, path, _ := strings.Cut(c.Kind, " ")
			_, rest, ok := strings.Cut(path, "/namespaces/"+ns)
			switch {
			case !ok || c.Serving != serving:
				continue
			case strings.HasSuffix(rest, record):
				out = append(out, method+" "+record)
			case method != http.MethodGet && (strings.HasPrefix(rest, "/deployments") || strings.HasPrefix(rest, "/services") || rest == "/configmaps"):
				if i := strings.LastIndex(rest, "-"); i > 0 && strings.Count(rest, "/") > 1 {
					rest = rest[:i+1] + "*" // a generated name
				}
				out = append(out, method+" "+rest)
			}
		}
		slices.Sort(out)
		return out
	}
	check := func(what string, got []string, want ...string) {
		t.Helper()
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s: requests %q, want %q", what, got, want)
		}
	}

	mark := len(p.Calls())
	create(t, p, id, spec("web", "nginx", withPorts(port(80, "internal"))))
	check("create", about(p.Calls()[mark:], true), "POST /configmaps", "POST /deployments", "POST /services")
	events.waitStatus(id, "RUNNING", "", 30*time.Second)
	p.waitIdle(t)

	mark = len(p.Calls())
	if r := do(t, http.MethodDelete, p.URL+containers+"/"+id, nil); r.Status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	check("DELETE", about(p.Calls()[mark:], true), "DELETE "+record, "DELETE /deployments/web-*", "DELETE /services/web-*")
	events.waitStatus(id, "DELETED", "", 30*time.Second)
	testenv.Eventually(t, 30*time.Second, "the record gone", func() error {
		_, err := testenv.Cluster(t).Client.CoreV1().ConfigMaps(ns).Get(context.Background(), container.RecordName(id), metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return err
		}
		return nil
	})
	p.waitIdle(t)
	// The controller's: the finalizer off once the DELETED is delivered. No confirmation:
	// this leadership reported the container live, and a deletion timestamp never goes
	// back (status.needsConfirmation).
	check("the controller after the DELETE", about(p.Calls()[mark:], false), "PATCH "+record)
}
