package app_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/dcm-project/k8s-container-sp/internal/devenv/harness/testenv"
)

// Two replicas behind one Service: a client's GET may reach the replica that did not
// make the write. A 404 must be authoritative: B never says "not found" for a container
// A has already answered 201 for, however far B's cache lags.
func TestGetOnTheOtherReplicaIsNever404AfterCreate(t *testing.T) {
	ns := testenv.Namespace(t)
	a := startProvider(t, ns)
	b := startProvider(t, ns)
	a.waitSynced(t)
	b.waitSynced(t)
	notFound := 0
	var waited time.Duration
	for i := range 40 {
		id := fmt.Sprintf("both-%d", i)
		create(t, a, id, spec("both", "nginx"))
		start := time.Now()
		r := do(t, http.MethodGet, b.URL+containers+"/"+id, nil)
		waited += time.Since(start)
		switch r.Status {
		case http.StatusOK:
		case http.StatusNotFound:
			notFound++
		default:
			t.Fatalf("GET on B: %d %s", r.Status, r.Body)
		}
	}
	if notFound > 0 {
		t.Errorf("B answered 404 for %d of 40 containers A had created", notFound)
	}
	t.Logf("GET on B right after the create on A: %s on average", (waited / 40).Round(100*time.Microsecond))
	// An unknown id: one apiserver read (the record), then an authoritative 404.
	before := b.Requests.Load()
	if r := do(t, http.MethodGet, b.URL+containers+"/never-made", nil); r.Status != http.StatusNotFound {
		t.Errorf("unknown id: %d %s", r.Status, r.Body)
	}
	if n := b.Requests.Load() - before; n < 1 || n > 3 {
		t.Errorf("confirming a miss made %d apiserver requests", n)
	}
}
