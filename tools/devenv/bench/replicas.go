package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// ReplicaResult is the staleness between two replicas: a create or delete answered by A,
// then GETs on B until B agrees.
type ReplicaResult struct {
	Tries int `json:"tries"`
	// CreateAgree: from A's 201 to B's first 200 showing the same container (id,
	// create_time, spec, service). DeleteAgree: from A's 204 to B's first 404.
	CreateAgree Dist `json:"create_agree"`
	DeleteAgree Dist `json:"delete_agree"`
	// The limit: when a plain informer in the benchmark process (a watch like B's) had
	// seen the Deployment and the Service (create) or the Deployment's deletion, counted
	// from A's answer; 0 when it saw them before A answered.
	CreateWatch Dist `json:"create_watch_delay"`
	DeleteWatch Dist `json:"delete_watch_delay"`
	// B answered 404 for a container A had already created (answered 201).
	NotFoundAfterCreate int `json:"b_404_after_a_201"`
	// TriesWith404: how many of the tries saw at least one such 404.
	TriesWith404 int `json:"tries_with_b_404_after_a_201"`
	// B answered 200 with a different or partial container (e.g. no service yet).
	IncompleteAfterCreate int `json:"b_incomplete_after_a_201"`
	// B answered 200 for a container A had already deleted (answered 204).
	FoundAfterDelete int `json:"b_200_after_a_204"`
	// Tries in which B did not agree within 10 s (counted as 10 s).
	NeverAgreed int `json:"never_agreed_10s"`
	// B's GETs, all answers.
	Gets int `json:"b_gets"`
	// Mismatch is the first partial or different answer of B after A's 201, beside A's.
	Mismatch string `json:"first_mismatch,omitempty"`
	// Aborted: the measurement stopped after this many tries, because B kept
	// disagreeing (every such try costs 10 s).
	Aborted int `json:"aborted_after_tries,omitempty"`
}

func replicaSpec(name string) []byte {
	return bytes.Replace(specJSON(name), []byte(`"metadata":{"name":"`+name+`"}`),
		[]byte(`"metadata":{"name":"`+name+`","labels":{"bench":"replicas"}}`), 1)
}

// do sends one request and returns status and body.
func (s *Service) do(method, path string, body []byte) (int, []byte, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, s.URL+path, r)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.Client().Do(req)
	if err != nil {
		return 0, nil, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, b, err
}

// sameContainer: both answers show the same container, fully (its Service included).
// The pod's IP (spec.network.ip) is left out: it appears once the pod has one, so a
// later answer has it and the create's answer usually not.
func sameContainer(a, b []byte) bool {
	norm := func(body []byte) (map[string]any, bool) {
		var m map[string]any
		if json.Unmarshal(body, &m) != nil {
			return nil, false
		}
		out := map[string]any{}
		for _, k := range []string{"id", "create_time", "spec", "service"} {
			out[k] = m[k]
		}
		if spec, ok := out["spec"].(map[string]any); ok {
			if nw, ok := spec["network"].(map[string]any); ok {
				delete(nw, "ip")
			}
		}
		return out, true
	}
	x, ok1 := norm(a)
	y, ok2 := norm(b)
	return ok1 && ok2 && reflect.DeepEqual(x, y)
}

// seenLog records when a plain informer saw objects labelled bench=replicas appear
// (Deployment and Service) and the Deployment go.
type seenLog struct {
	mu                   sync.Mutex
	dep, svc, depDeleted map[string]time.Time
}

func (l *seenLog) mark(m map[string]time.Time, obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	o, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if id := container.InstanceID(o.GetLabels()); id != "" {
		if _, ok := m[id]; !ok {
			m[id] = now
		}
	}
}

func (l *seenLog) get(m map[string]time.Time, id string) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := m[id]
	return t, ok
}

// Replicas measures the staleness between replicas a and b (same namespace): tries
// times, create on a then GET on b until b agrees, delete on a then GET on b until 404.
func (e *Env) Replicas(ctx context.Context, a, b *Service, ns string, tries int) (ReplicaResult, error) {
	res := ReplicaResult{Tries: tries}
	seen := &seenLog{dep: map[string]time.Time{}, svc: map[string]time.Time{}, depDeleted: map[string]time.Time{}}
	f := informers.NewSharedInformerFactoryWithOptions(e.Admin, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = "bench=replicas" }))
	deps, svcs := f.Apps().V1().Deployments().Informer(), f.Core().V1().Services().Informer()
	_, _ = deps.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { seen.mark(seen.dep, obj) },
		UpdateFunc: func(_, obj any) {
			if d, ok := obj.(*appsv1.Deployment); ok && d.DeletionTimestamp != nil {
				seen.mark(seen.depDeleted, obj)
			}
		},
		DeleteFunc: func(obj any) { seen.mark(seen.depDeleted, obj) },
	})
	_, _ = svcs.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		if _, ok := obj.(*corev1.Service); ok {
			seen.mark(seen.svc, obj)
		}
	}})
	stop := make(chan struct{})
	defer func() { close(stop); f.Shutdown() }()
	f.Start(stop)
	f.WaitForCacheSync(stop)

	const patience = 10 * time.Second
	watchDelay := func(seenAt time.Time, ok bool, answered time.Time) time.Duration {
		if !ok {
			return patience
		}
		return max(0, seenAt.Sub(answered))
	}
	var create, del, createWatch, delWatch []time.Duration
	for i := range tries {
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		if res.NeverAgreed >= 3 {
			res.Aborted = i
			break
		}
		id := fmt.Sprintf("repl-%04d", i)
		path := "/api/v1alpha1/containers/" + id
		code, body, err := a.do(http.MethodPost, "/api/v1alpha1/containers?id="+id, replicaSpec("app"))
		if err != nil {
			return res, err
		}
		if code != http.StatusCreated {
			return res, fmt.Errorf("POST %s on A: %d %s", id, code, body)
		}
		answered := time.Now()
		saw404 := false
		for {
			c, got, err := b.do(http.MethodGet, path, nil)
			if err != nil {
				return res, err
			}
			res.Gets++
			if c == http.StatusOK && sameContainer(body, got) {
				create = append(create, time.Since(answered))
				break
			}
			switch c {
			case http.StatusNotFound:
				res.NotFoundAfterCreate++
				saw404 = true
			case http.StatusOK:
				res.IncompleteAfterCreate++
				if res.Mismatch == "" {
					res.Mismatch = fmt.Sprintf("A answered %s; B answered %s", body, got)
				}
			}
			if time.Since(answered) > patience {
				res.NeverAgreed++
				create = append(create, patience)
				break
			}
		}
		if saw404 {
			res.TriesWith404++
		}
		_ = waitUntil(ctx, 2*time.Second, func() bool {
			_, d := seen.get(seen.dep, id)
			_, s := seen.get(seen.svc, id)
			return d && s
		})
		ds, dok := seen.get(seen.dep, id)
		ss, sok := seen.get(seen.svc, id)
		if ss.After(ds) {
			ds = ss
		}
		createWatch = append(createWatch, watchDelay(ds, dok && sok, answered))

		code, body, err = a.do(http.MethodDelete, path, nil)
		if err != nil {
			return res, err
		}
		if code != http.StatusNoContent {
			return res, fmt.Errorf("DELETE %s on A: %d %s", id, code, body)
		}
		answered = time.Now()
		for {
			c, _, err := b.do(http.MethodGet, path, nil)
			if err != nil {
				return res, err
			}
			res.Gets++
			if c == http.StatusNotFound {
				del = append(del, time.Since(answered))
				break
			}
			if c == http.StatusOK {
				res.FoundAfterDelete++
			}
			if time.Since(answered) > patience {
				res.NeverAgreed++
				del = append(del, patience)
				break
			}
		}
		// The informer may see the deletion a moment after B: wait for it (bounded).
		_ = waitUntil(ctx, 2*time.Second, func() bool { _, ok := seen.get(seen.depDeleted, id); return ok })
		dd, ok := seen.get(seen.depDeleted, id)
		delWatch = append(delWatch, watchDelay(dd, ok, answered))
	}
	res.CreateAgree, res.DeleteAgree = summarize(create), summarize(del)
	res.CreateWatch, res.DeleteWatch = summarize(createWatch), summarize(delWatch)
	return res, nil
}
