package app_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness/testenv"
)

// A POST through one replica and a DELETE of the same id through the other, started
// together, as DCM's crossing retries send them. At rest, whatever the order: a 204
// leaves no workload, no Service outlives its Deployment, and, with NATS up, every
// deleted record is let go after exactly one DELETED. A POST a loaded apiserver answers
// 503 (its id not reserved in time) leaves nothing either.
func TestCreateDeleteRaceAcrossReplicas(t *testing.T) {
	for _, natsUp := range []bool{true, false} {
		name := "NATS up"
		if !natsUp {
			name = "NATS down"
		}
		t.Run(name, func(t *testing.T) { createDeleteRace(t, natsUp) })
	}
}

func createDeleteRace(t *testing.T, natsUp bool) {
	const ids = 40
	ns := testenv.Namespace(t)
	srv, stream := natsWithStream(t)
	a := startProvider(t, ns, withNATS(srv.URL))
	b := startProvider(t, ns, withNATS(srv.URL))
	a.waitSynced(t)
	b.waitSynced(t)
	if !natsUp {
		srv.Stop()
	}

	// The DELETE starts 0-35 ms after the POST, from a fixed seed: each run races the
	// same way as far as the scheduler allows.
	rng := rand.New(rand.NewPCG(47, 47))
	names := make([]string, ids)
	delays := make([]time.Duration, ids)
	for i := range ids {
		names[i] = fmt.Sprintf("race-%d", i)
		delays[i] = time.Duration(rng.IntN(36)) * time.Millisecond
	}
	deleted, refused := make([]bool, ids), make([]bool, ids)
	var wg sync.WaitGroup
	for i, id := range names {
		wg.Go(func() {
			r := do(t, http.MethodPost, a.URL+containers+"?id="+id,
				spec("race", "nginx", withPorts(port(8080, "internal"))))
			switch r.Status {
			case http.StatusCreated, http.StatusConflict:
			case http.StatusServiceUnavailable:
				// A loaded apiserver did not reserve the id in time: nothing was made.
				refused[i] = true
			default:
				t.Errorf("POST %s: %d %s", id, r.Status, r.Body)
			}
		})
		wg.Go(func() {
			time.Sleep(delays[i])
			switch r := do(t, http.MethodDelete, b.URL+containers+"/"+id, nil); r.Status {
			case http.StatusNoContent:
				deleted[i] = true
			case http.StatusNotFound:
			default:
				t.Errorf("DELETE %s: %d %s", id, r.Status, r.Body)
			}
		})
	}
	wg.Wait()

	n, m := 0, 0
	for i := range ids {
		if deleted[i] {
			n++
		}
		if refused[i] {
			m++
		}
	}
	t.Logf("%d of %d DELETEs answered 204; %d POSTs 503", n, ids, m)
	if m > ids/2 {
		t.Fatalf("%d of %d POSTs answered 503: too few races to tell", m, ids)
	}
	testenv.Eventually(t, 60*time.Second, "no workload after a 204, no Service without its Deployment", func() error {
		var wrong []string
		for i, id := range names {
			deps, svcs := running(t, ns, id)
			switch {
			case deleted[i] && len(deps)+len(svcs) > 0:
				wrong = append(wrong, fmt.Sprintf("%s deleted: Deployments %v, Services %v", id, deps, svcs))
			case refused[i] && len(deps)+len(svcs) > 0:
				wrong = append(wrong, fmt.Sprintf("%s refused (503): Deployments %v, Services %v", id, deps, svcs))
			case len(svcs) > 0 && len(deps) == 0:
				wrong = append(wrong, fmt.Sprintf("%s: Services %v without a Deployment", id, svcs))
			}
		}
		if len(wrong) > 0 {
			return fmt.Errorf("%d of %d ids wrong: %s", len(wrong), ids, strings.Join(wrong, "; "))
		}
		return nil
	})
	for i, id := range names {
		if !deleted[i] {
			continue
		}
		for _, p := range []*provider{a, b} {
			if r := do(t, http.MethodGet, p.URL+containers+"/"+id, nil); r.Status != http.StatusNotFound {
				t.Errorf("GET %s after its 204: %d %s", id, r.Status, r.Body)
			}
		}
	}
	if !natsUp {
		return
	}
	records := testenv.Cluster(t).Client.CoreV1().ConfigMaps(ns)
	testenv.Eventually(t, 60*time.Second, "every deleted record finalized, one DELETED each", func() error {
		for i, id := range names {
			if !deleted[i] {
				continue
			}
			if _, err := records.Get(context.Background(), container.RecordName(id), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("record of %s still there (%v)", id, err)
			}
			seen := map[string]bool{}
			for _, ev := range storedEvents(t, stream, id) {
				if ev.Data.Status == "DELETED" {
					seen[ev.ID] = true
				}
			}
			if len(seen) != 1 {
				return fmt.Errorf("%s: %d DELETED events stored, want 1", id, len(seen))
			}
		}
		return nil
	})
}
