package app_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/agent"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness/testenv"
)

// DCM's environment agent forwards a create as the bare spec with Idempotency-Key (its
// event id) and no id, and retries it (5xx, 429, transport) with the same key, here
// through the other of two replicas: every answer is the first one's container (the
// same id, 201, the same body), one Deployment and one Service in the cluster, also when
// the tries race each other on both replicas; the key with another spec is a 422
// naming it; the agent's delete by DCM's id (which the provider never learned) is a
// final 404; a delete by the provider's id deletes it.
func TestAgentCreateRetriedWithItsKey(t *testing.T) {
	ns := testenv.Namespace(t)
	// Both replicas resolve the image through one registry: every try pins one digest.
	images := withEnv(newLocalRegistry(t).holding(t, "nginx")...)
	a, b := startProvider(t, ns, images), startProvider(t, ns, images)
	a.waitSynced(t)
	b.waitSynced(t)
	endpoints := []string{a.URL + containers, b.URL + containers}
	bare, err := json.Marshal(spec("db", "nginx", withPorts(port(5432, "internal")))["spec"])
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs := testenv.Cluster(t).Client
	objects := func(id string) (deps, svcs int) {
		t.Helper()
		sel := metav1.ListOptions{LabelSelector: container.InstanceSelector(id)}
		dl, err := cs.AppsV1().Deployments(ns).List(ctx, sel)
		if err != nil {
			t.Fatal(err)
		}
		sl, err := cs.CoreV1().Services(ns).List(ctx, sel)
		if err != nil {
			t.Fatal(err)
		}
		return len(dl.Items), len(sl.Items)
	}
	shape := func(ans agent.Answer) (id string, members []string) {
		t.Helper()
		var c map[string]any
		if ans.Status != http.StatusCreated || json.Unmarshal(ans.Body, &c) != nil {
			t.Fatalf("create: %d %s", ans.Status, ans.Body)
		}
		for k := range c {
			members = append(members, k)
		}
		slices.Sort(members)
		id, _ = c["id"].(string)
		return id, members
	}

	first, err := agent.Create(ctx, endpoints[:1], bare, "event-1")
	if err != nil {
		t.Fatal(err)
	}
	id, members := shape(first)
	if id != container.IDForKey("event-1") {
		t.Errorf("id %s, want the key's %s", id, container.IDForKey("event-1"))
	}
	again, err := agent.Create(ctx, endpoints[1:], bare, "event-1")
	if err != nil {
		t.Fatal(err)
	}
	if id2, members2 := shape(again); id2 != id || !slices.Equal(members, members2) {
		t.Errorf("the retry through the other replica answered %s, the first %s", again.Body, first.Body)
	}
	if !strings.Contains(string(first.Body), `"digest":"sha256:`) || !strings.Contains(string(again.Body), `"digest":"sha256:`) {
		t.Errorf("the image was not pinned: %s / %s", first.Body, again.Body)
	}
	if deps, svcs := objects(id); deps != 1 || svcs != 1 {
		t.Errorf("%d Deployments, %d Services", deps, svcs)
	}

	// Tries racing each other on both replicas.
	var wg sync.WaitGroup
	answers := make([]agent.Answer, 6)
	for i := range answers {
		wg.Go(func() {
			answers[i], _ = agent.Create(ctx, []string{endpoints[i%2], endpoints[(i+1)%2]}, bare, "event-2")
		})
	}
	wg.Wait()
	raced := container.IDForKey("event-2")
	for i, ans := range answers {
		if got, _ := shape(ans); got != raced {
			t.Errorf("try %d answered %d %s", i, ans.Status, ans.Body)
		}
	}
	if deps, svcs := objects(raced); deps != 1 || svcs != 1 {
		t.Errorf("racing tries made %d Deployments, %d Services", deps, svcs)
	}

	other, err := json.Marshal(spec("db", "nginx:2")["spec"])
	if err != nil {
		t.Fatal(err)
	}
	reused, err := agent.Create(ctx, endpoints, other, "event-1")
	if err != nil {
		t.Fatal(err)
	}
	var p map[string]any
	_ = json.Unmarshal(reused.Body, &p)
	if reused.Status != http.StatusUnprocessableEntity || p["type"] != "https://dcm-project.github.io/problems/idempotency-key-reused" {
		t.Errorf("the key with another spec: %d %s", reused.Status, reused.Body)
	}

	// The real agent's delete names DCM's own id, which the create (no ?id=) never told
	// the provider: a 404, final for the agent (not retried), and the container stays.
	dcmID := uuid.NewString()
	if del, err := agent.Delete(ctx, endpoints, dcmID, "event-delete-dcm"); err != nil || del.Status != http.StatusNotFound ||
		del.Tries != 1 || del.Outcome != agent.NonRetryable {
		t.Errorf("delete by DCM's id: %+v %v", del, err)
	}
	if deps, svcs := objects(id); deps != 1 || svcs != 1 {
		t.Errorf("after the delete by DCM's id: %d Deployments, %d Services", deps, svcs)
	}

	// A delete that names the provider's id deletes it.
	for _, id := range []string{id, raced} {
		del, err := agent.Delete(ctx, endpoints, id, "event-delete-"+id)
		if err != nil || del.Status != http.StatusNoContent || del.Outcome != "" {
			t.Errorf("delete %s: %+v %v", id, del, err)
		}
	}
}
