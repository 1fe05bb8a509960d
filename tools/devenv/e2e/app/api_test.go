package app_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness/testenv"
)

const containers = "/api/v1alpha1/containers"

// countObjects counts what the provider owns in ns: Deployments, Services and id
// reservations.
func countObjects(t *testing.T, ns string) (deps, svcs, records int) {
	t.Helper()
	return countBySelector(t, ns, container.LabelManagedBy+"=dcm")
}

// objectsOf counts the Deployments, Services and reservations carrying these ids.
func objectsOf(t *testing.T, ns string, ids ...string) (deps, svcs, records int) {
	t.Helper()
	return countBySelector(t, ns, container.LabelInstanceID+" in ("+strings.Join(ids, ",")+")")
}

func countBySelector(t *testing.T, ns, selector string) (deps, svcs, records int) {
	t.Helper()
	cs := testenv.Cluster(t).Client
	ctx := context.Background()
	sel := metav1.ListOptions{LabelSelector: selector}
	d, err := cs.AppsV1().Deployments(ns).List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	s, err := cs.CoreV1().Services(ns).List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	l, err := cs.CoreV1().ConfigMaps(ns).List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	return len(d.Items), len(s.Items), len(l.Items)
}

// deploymentOf is the one Deployment of a container, read from the apiserver.
func deploymentOf(t *testing.T, ns, id string) *appsv1.Deployment {
	t.Helper()
	deps, err := testenv.Cluster(t).Client.AppsV1().Deployments(ns).List(context.Background(),
		metav1.ListOptions{LabelSelector: container.InstanceSelector(id)})
	if err != nil || len(deps.Items) != 1 {
		t.Fatalf("Deployments of %s: %v %v", id, deps, err)
	}
	return &deps.Items[0]
}

// deleteByHand deletes a container's Deployment directly, as someone using kubectl would.
func deleteByHand(t *testing.T, ns, id string) {
	t.Helper()
	d := deploymentOf(t, ns, id)
	if err := testenv.Cluster(t).Client.AppsV1().Deployments(ns).Delete(context.Background(), d.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// expectNothing waits until the provider has nothing left in ns. A deleted Deployment
// stays (terminating) until its DELETED status event is delivered, so allow a moment.
func expectNothing(t *testing.T, ns string) {
	t.Helper()
	testenv.Eventually(t, 15*time.Second, "nothing left behind", func() error {
		if d, s, l := countObjects(t, ns); d+s+l != 0 {
			return fmt.Errorf("%d Deployments, %d Services, %d reservations", d, s, l)
		}
		return nil
	})
}

// The whole life of one container through the API, checked against the cluster.
func TestContainerLifecycle(t *testing.T) {
	ns := testenv.Namespace(t)
	// The seed's example by default: an internal port beside an external one is exposed
	// by the one external Service, and said so.
	p := startProvider(t, ns)
	p.waitSynced(t)
	cs := testenv.Cluster(t).Client
	ctx := context.Background()

	body := spec("web-app", "quay.io/myapp:v1.2", withPorts(port(8080, "external"), port(9090, "internal"), port(9100, "none")),
		func(s map[string]any) {
			s["metadata"].(map[string]any)["labels"] = map[string]any{"team": "payments"}
			s["resources"].(map[string]any)["cpu"] = map[string]any{"min": "500m", "max": 2}
			s["process"] = map[string]any{"command": []string{"/app/start"}, "args": []string{"--config", "/etc/c.yaml"},
				"env": []any{map[string]any{"name": "ENV", "value": "production"}}}
			s["provider_hints"] = map[string]any{"anything": []int{1, 2}}
		})
	r := do(t, http.MethodPost, p.URL+containers+"?id=web-1", body)
	if r.Status != http.StatusCreated {
		t.Fatalf("POST: %d %s", r.Status, r.Body)
	}
	j := r.JSON
	if j["id"] != "web-1" || j["path"] != "containers/web-1" || j["status"] != "PENDING" || j["create_time"] != j["update_time"] {
		t.Errorf("create envelope: %s", r.Body)
	}
	rs := j["spec"].(map[string]any)
	if rs["metadata"].(map[string]any)["namespace"] != ns || rs["resources"].(map[string]any)["cpu"].(map[string]any)["min"] != "500m" {
		t.Errorf("create spec: %s", r.Body)
	}
	svc := j["service"].(map[string]any)
	if svc["type"] != "LoadBalancer" || svc["cluster_ip"] == "" || len(svc["ports"].([]any)) != 2 {
		t.Errorf("create service: %v", svc)
	}
	// The answer says what is exposed: 9090 is external too, as GET will say below.
	for i, want := range []string{"external", "external", "none"} {
		if v := rs["network"].(map[string]any)["ports"].([]any)[i].(map[string]any)["visibility"]; v != want {
			t.Errorf("create: port %d visibility %v, want %s", i, v, want)
		}
	}

	// The cluster holds exactly what the design says.
	d := deploymentOf(t, ns, "web-1")
	if !strings.HasPrefix(d.Name, "web-app-") || *d.Spec.Replicas != 1 || d.Labels["team"] != "payments" ||
		d.Labels[container.LabelManagedBy] != "dcm" || d.Labels[container.LabelServiceType] != "container" ||
		d.Spec.Template.Labels[container.LabelInstanceID] != "web-1" {
		t.Errorf("deployment meta: %+v", d.ObjectMeta)
	}
	c := d.Spec.Template.Spec.Containers[0]
	if c.Resources.Requests.Cpu().String() != "500m" || c.Resources.Limits.Memory().String() != "128Mi" ||
		c.Args[1] != "/etc/c.yaml" || *d.Spec.Template.Spec.AutomountServiceAccountToken {
		t.Errorf("deployment container: %+v", c)
	}
	svcs, err := cs.CoreV1().Services(ns).List(ctx, metav1.ListOptions{LabelSelector: container.InstanceSelector("web-1")})
	if err != nil || len(svcs.Items) != 1 || svcs.Items[0].Name != svc["name"] || svcs.Items[0].Labels["team"] != "payments" {
		t.Fatalf("services: %+v %v", svcs, err)
	}

	// GET is served at once (read-your-writes), then turns RUNNING with the Pod IP.
	var got response
	testenv.Eventually(t, 30*time.Second, "RUNNING with an IP", func() error {
		got = do(t, http.MethodGet, p.URL+containers+"/web-1", nil)
		if got.Status != http.StatusOK {
			return fmt.Errorf("GET %d %s", got.Status, got.Body)
		}
		net := got.JSON["spec"].(map[string]any)["network"].(map[string]any)
		if got.JSON["status"] != "RUNNING" || net["ip"] == nil {
			return fmt.Errorf("%v %v", got.JSON["status"], net["ip"])
		}
		return nil
	})
	ports := got.JSON["spec"].(map[string]any)["network"].(map[string]any)["ports"].([]any)
	for i, want := range []string{"external", "external", "none"} { // inferred from the LoadBalancer
		if v := ports[i].(map[string]any)["visibility"]; v != want {
			t.Errorf("port %d visibility %v, want %s", i, v, want)
		}
	}
	if sp := got.JSON["service"].(map[string]any)["ports"].([]any)[0].(map[string]any); sp["node_port"] == nil {
		t.Errorf("LoadBalancer port without node_port: %v", sp)
	}

	// The cloud gives the LoadBalancer an address: GET shows it.
	if err := harness.SetLoadBalancerIngress(ctx, cs, ns, svc["name"].(string), "203.0.113.10", ""); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "external_ip", func() error {
		got = do(t, http.MethodGet, p.URL+containers+"/web-1", nil)
		if ip := got.JSON["service"].(map[string]any)["external_ip"]; ip != "203.0.113.10" {
			return fmt.Errorf("external_ip %v", ip)
		}
		return nil
	})

	list := do(t, http.MethodGet, p.URL+containers, nil)
	if list.Status != http.StatusOK || len(list.JSON["containers"].([]any)) != 1 || list.JSON["next_page_token"] != nil {
		t.Errorf("LIST: %s", list.Body)
	}

	if r := do(t, http.MethodDelete, p.URL+containers+"/web-1", nil); r.Status != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", r.Status, r.Body)
	}
	expectProblem(t, do(t, http.MethodGet, p.URL+containers+"/web-1", nil), http.StatusNotFound, "not-found")
	expectProblem(t, do(t, http.MethodDelete, p.URL+containers+"/web-1", nil), http.StatusNotFound, "not-found")
	expectNothing(t, ns)
	// Pods go by cascade.
	testenv.Eventually(t, 30*time.Second, "pods gone", func() error {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err == nil && len(pods.Items) > 0 {
			err = fmt.Errorf("%d pods left", len(pods.Items))
		}
		return err
	})
}

func TestCreateWithoutIDGeneratesOne(t *testing.T) {
	ns := testenv.Namespace(t)
	p := startProvider(t, ns)
	p.waitSynced(t)
	r := do(t, http.MethodPost, p.URL+containers, spec("worker", "nginx"))
	if r.Status != http.StatusCreated {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	id, _ := r.JSON["id"].(string)
	if len(id) != 36 || r.JSON["service"] != nil {
		t.Errorf("id %q service %v", id, r.JSON["service"])
	}
	if g := do(t, http.MethodGet, p.URL+containers+"/"+id, nil); g.Status != http.StatusOK {
		t.Errorf("GET generated id: %d %s", g.Status, g.Body)
	}
}

// Bad input gets a 400 listing every problem (DCM's shape: one -> detail and pointer,
// several -> errors in contract order), and nothing is created.
func TestCreateRejectsBadInput(t *testing.T) {
	ns := testenv.Namespace(t)
	p := startProvider(t, ns)
	p.waitSynced(t)
	cases := []struct {
		name   string
		url    string
		body   any
		status int
		fields []string
	}{
		{"reserved id", "?id=health", spec("web", "nginx"), 400, []string{"-"}},
		{"bad id", "?id=Web_1", spec("web", "nginx"), 400, []string{"-"}},
		{"reserved id beside schema problems", "?id=health", spec("Web", "nginx"), 400, []string{"#/spec/metadata/name", "-"}},
		{"a bare spec is checked as the spec (DCM's agent sends it so)", "?id=a1", spec("Web", "nginx")["spec"], 400, []string{"#/spec/metadata/name"}},
		{"neither a spec nor a Container", "?id=a1", map[string]any{"name": "web"}, 400, nil},
		{"not json", "?id=a1", "{nope", 400, nil},
		{"many problems at once", "?id=a1", spec("Web", "quay.io/My App", func(s map[string]any) {
			s["service_type"] = "vm"
			s["resources"] = map[string]any{"cpu": map[string]any{"min": 4, "max": "2"}, "memory": map[string]any{"min": "1GB", "max": "1XB"}}
			s["metadata"].(map[string]any)["labels"] = map[string]any{"dcm.project/managed-by": "me"}
			s["process"] = map[string]any{"env": []any{map[string]any{"name": "A", "value": ""}, map[string]any{"name": "A", "value": ""}}}
			s["network"] = map[string]any{"ports": []any{port(80, "internal"), port(80, "public"), port(0, "none")}}
		}), 400, []string{"#/spec/resources/cpu/min", "#/spec/resources/memory/max", "#/spec/metadata/labels/dcm.project~1managed-by",
			"#/spec/service_type", "#/spec/metadata/name", "#/spec/image/reference", "#/spec/process/env/1/name",
			"#/spec/network/ports/1/container_port", "#/spec/network/ports/1/visibility", "#/spec/network/ports/2/container_port"}},
		{"name starting with a digit cannot name a Service", "?id=a1", spec("1web", "nginx", withPorts(port(80, "internal"))), 400, []string{"#/spec/metadata/name"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := do(t, http.MethodPost, p.URL+containers+tc.url, tc.body)
			expectProblem(t, r, tc.status, "invalid-argument")
			if got := r.problemPointers(); tc.fields != nil && !slices.Equal(got, tc.fields) {
				t.Errorf("pointers %q, want %q: %s", got, tc.fields, r.Body)
			}
		})
	}
	expectNothing(t, ns)
}

func TestDuplicateIDConflictsAndChangesNothing(t *testing.T) {
	ns := testenv.Namespace(t)
	p := startProvider(t, ns)
	p.waitSynced(t)
	if r := do(t, http.MethodPost, p.URL+containers+"?id=dup", spec("first", "nginx:1")); r.Status != 201 {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	cs := testenv.Cluster(t).Client
	before, _ := cs.AppsV1().Deployments(ns).List(context.Background(), metav1.ListOptions{})
	r := do(t, http.MethodPost, p.URL+containers+"?id=dup", spec("second", "nginx:2", withPorts(port(80, "internal"))))
	expectProblem(t, r, http.StatusConflict, "already-exists")
	after, _ := cs.AppsV1().Deployments(ns).List(context.Background(), metav1.ListOptions{})
	if len(after.Items) != 1 || after.Items[0].UID != before.Items[0].UID || after.Items[0].Spec.Template.Spec.Containers[0].Image != "nginx:1" {
		t.Errorf("existing container changed: %+v", after.Items)
	}
	if d, s, l := countObjects(t, ns); d != 1 || s != 0 || l != 1 {
		t.Errorf("objects: %d %d %d", d, s, l)
	}
}

// 50 concurrent creates with one id, spread over two instances of the service: exactly
// one wins, and the losers leave nothing behind.
func TestConcurrentCreatesOneWinner(t *testing.T) {
	ns := testenv.Namespace(t)
	a, b := startProvider(t, ns), startProvider(t, ns)
	a.waitSynced(t)
	b.waitSynced(t)
	const n = 50
	codes := make(chan int, n)
	start := make(chan struct{})
	for i := range n {
		url := a.URL
		if i%2 == 1 {
			url = b.URL
		}
		go func() {
			<-start
			r := do(t, http.MethodPost, url+containers+"?id=race", spec(fmt.Sprintf("c%d", i), "nginx", withPorts(port(80, "internal"))))
			codes <- r.Status
		}()
	}
	close(start)
	count := map[int]int{}
	for range n {
		count[<-codes]++
	}
	if count[201] != 1 || count[409] != n-1 {
		t.Errorf("answers = %v, want one 201 and %d 409", count, n-1)
	}
	if d, s, l := countObjects(t, ns); d != 1 || s != 1 || l != 1 {
		t.Errorf("objects: %d Deployments, %d Services, %d reservations; want 1 each", d, s, l)
	}
}

// A failure after the Deployment exists (a quota refuses the Service) rolls everything
// back.
func TestCreateRollsBackWhenServiceFails(t *testing.T) {
	ns := testenv.Namespace(t)
	cs := testenv.Cluster(t).Client
	ctx := context.Background()
	_, err := cs.CoreV1().ResourceQuotas(ns).Create(ctx, &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "no-services"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceServices: resourceZero()}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The quota controller must have computed usage before the quota is enforced.
	testenv.Eventually(t, 20*time.Second, "quota status", func() error {
		q, err := cs.CoreV1().ResourceQuotas(ns).Get(ctx, "no-services", metav1.GetOptions{})
		if err == nil && q.Status.Hard == nil {
			err = fmt.Errorf("not yet")
		}
		return err
	})
	p := startProvider(t, ns)
	p.waitSynced(t)
	r := do(t, http.MethodPost, p.URL+containers+"?id=rb", spec("web", "nginx", withPorts(port(80, "internal"))))
	expectProblem(t, r, http.StatusForbidden, "permission-denied")
	expectNothing(t, ns)
	// The id is free again.
	if r := do(t, http.MethodPost, p.URL+containers+"?id=rb", spec("web", "nginx")); r.Status != 201 {
		t.Errorf("retry without ports: %d %s", r.Status, r.Body)
	}
}

func TestMalformedRequests(t *testing.T) {
	ns := testenv.Namespace(t)
	p := startProvider(t, ns)
	p.waitSynced(t)
	big := `{"spec":{"x":"` + strings.Repeat("a", 2<<20) + `"}}`
	expectProblem(t, do(t, http.MethodPost, p.URL+containers+"?id=big", big), http.StatusRequestEntityTooLarge, "content-too-large")
	expectProblem(t, do(t, http.MethodPut, p.URL+containers+"/x", nil), http.StatusMethodNotAllowed, "method-not-allowed")
	expectProblem(t, do(t, http.MethodGet, p.URL+"/api/v1alpha1/nothing", nil), http.StatusNotFound, "not-found")
	expectProblem(t, do(t, http.MethodGet, p.URL+containers+"/Not_An_Id", nil), http.StatusBadRequest, "invalid-argument")
	for _, q := range []string{"max_page_size=-1", "max_page_size=abc", "page_token=garbage", "page_token=" + strings.Repeat("x", 600)} {
		expectProblem(t, do(t, http.MethodGet, p.URL+containers+"?"+q, nil), http.StatusBadRequest, "invalid-argument")
	}
	// AEP-158: 0 is the default page size, one above the maximum is the maximum.
	for _, q := range []string{"max_page_size=0", "max_page_size=5000"} {
		if r := do(t, http.MethodGet, p.URL+containers+"?"+q, nil); r.Status != http.StatusOK {
			t.Errorf("%s: %d %s, want 200", q, r.Status, r.Body)
		}
	}
	expectNothing(t, ns)
}

func TestHealth(t *testing.T) {
	ns := testenv.Namespace(t)
	p := startProvider(t, ns)
	// Health reads the last background probe of the apiserver (every 5 s, the first at
	// start).
	testenv.Eventually(t, 10*time.Second, "healthy", func() error {
		for _, path := range []string{"/health", containers + "/health"} {
			r := do(t, http.MethodGet, p.URL+path, nil)
			if r.Status != 200 || r.JSON["status"] != "healthy" || r.JSON["type"] != "k8s-container-service-provider.dcm.io/health" ||
				r.JSON["path"] != "health" || r.JSON["version"] != "test" || r.JSON["uptime"] == nil {
				return fmt.Errorf("%s: %d %s", path, r.Status, r.Body)
			}
		}
		return nil
	})
	// The reproduction from the hardening issue: 200 concurrent health polls made every
	// Kubernetes call wait. Now they cost no apiserver request at all.
	p.waitSynced(t)
	mark, start := len(p.Calls()), time.Now()
	const polls = 200
	var wg sync.WaitGroup
	for range polls {
		wg.Go(func() {
			if r := do(t, http.MethodGet, p.URL+"/health", nil); r.Status != 200 {
				t.Errorf("health: %d", r.Status)
			}
		})
	}
	wg.Wait()
	window, elapsed := p.Calls()[mark:], time.Since(start)
	// What the polls sent themselves, on their requests' contexts: nothing, exactly.
	// Background work runs meanwhile, and the window grows with the machine's load, so
	// its requests are not counted; but none of it repeats more often than every 2 s
	// (the election's renewal, election.RetryPeriod; the API probe every 5 s), while a
	// cost per poll that went through background work would repeat up to 200 times.
	// Each kind of request may therefore come at most twice per second of the window,
	// plus two.
	limit := 2 + int(elapsed/time.Second)
	kinds, serving := map[string]int{}, map[string]int{}
	for _, c := range window {
		if c.Serving {
			serving[c.Kind]++
		}
		kinds[c.Kind]++
	}
	if len(serving) > 0 {
		t.Errorf("%d health polls sent apiserver requests themselves, want none: %v", polls, serving)
	}
	for kind, n := range kinds {
		if n > limit {
			t.Errorf("%d health polls in %s: %s sent %d times, more often than background work does (at most %d)",
				polls, elapsed.Round(time.Millisecond), kind, n, limit)
		}
	}
	t.Logf("%d health polls in %s; apiserver requests meanwhile, by kind: %v", polls, elapsed.Round(time.Millisecond), kinds)
	// The control: a request whose handler does call the apiserver is seen as one, so
	// the check above can fail.
	mark = len(p.Calls())
	create(t, p, "control", spec("control", "nginx"))
	if !slices.ContainsFunc(p.Calls()[mark:], func(c apiCall) bool { return c.Serving }) {
		t.Errorf("a create's apiserver requests were not told apart from background work: %v", p.Calls()[mark:])
	}
	// Readiness and liveness, Kubernetes style.
	for _, path := range []string{"/readyz", "/livez"} {
		if r := do(t, http.MethodGet, p.URL+path, nil); r.Status != 200 || string(r.Body) != "ok\n" {
			t.Errorf("%s: %d %q", path, r.Status, r.Body)
		}
	}
}

// Reads after the caches synced cost no apiserver request.
func TestReadsServedFromCache(t *testing.T) {
	ns := testenv.Namespace(t)
	p := startProvider(t, ns)
	p.waitSynced(t)
	for i := range 5 {
		if r := do(t, http.MethodPost, p.URL+containers+fmt.Sprintf("?id=c%d", i), spec("c", "nginx")); r.Status != 201 {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
	}
	before := p.Requests.Load()
	for i := range 5 {
		if r := do(t, http.MethodGet, p.URL+containers+fmt.Sprintf("/c%d", i), nil); r.Status != 200 {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		if r := do(t, http.MethodGet, p.URL+containers+"?max_page_size=2", nil); r.Status != 200 {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
	}
	// Watches stay open (they are not new requests); nothing else may be sent.
	if n := p.Requests.Load() - before; n != 0 {
		t.Errorf("%d apiserver requests during reads, want 0", n)
	}
}

func resourceZero() resource.Quantity { return resource.MustParse("0") }

// A replica that died between reserving an id and creating the Deployment leaves a bare
// reservation: it is never taken over (it could be a container deleted by hand whose
// DELETED is not sent yet); once it is older than twice the create timeout, the status
// controller reports it DELETED and deletes it, and a create of the id then succeeds.
// Before that, and whenever a Deployment exists, the id stays taken.
func TestAbandonedReservationIsCleanedUp(t *testing.T) {
	ns := testenv.Namespace(t)
	p := startProvider(t, ns, withEnv("SP_K8S_CREATE_TIMEOUT=1s"))
	p.waitSynced(t)
	cs := testenv.Cluster(t).Client
	ctx := context.Background()
	// The record a create writes first (container.NewRecord), left without a Deployment.
	_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, container.NewRecord("orphan", container.Request{}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Young: another create may still be in flight.
	expectProblem(t, do(t, http.MethodPost, p.URL+containers+"?id=orphan", spec("web", "nginx")), http.StatusConflict, "already-exists")
	// Old (twice the create timeout, by the apiserver's timestamps): cleaned up by the
	// controller (409 with Retry-After until then), then free.
	testenv.Eventually(t, 30*time.Second, "abandoned reservation cleaned up", func() error {
		r := do(t, http.MethodPost, p.URL+containers+"?id=orphan", spec("web", "nginx"))
		if r.Status != http.StatusCreated {
			return fmt.Errorf("%d %s", r.Status, r.Body)
		}
		return nil
	})
	if d, _, l := objectsOf(t, ns, "orphan"); d != 1 || l != 1 {
		t.Errorf("%d Deployments, %d reservations", d, l)
	}
	// Old, but its container exists: still taken.
	record, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, container.RecordName("orphan"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the new reservation old enough to count as abandoned", func() error {
		if age := time.Since(record.CreationTimestamp.Time); age < 2*time.Second+time.Second {
			return fmt.Errorf("%s old", age)
		}
		return nil
	})
	expectProblem(t, do(t, http.MethodPost, p.URL+containers+"?id=orphan", spec("web", "nginx")), http.StatusConflict, "already-exists")
}

// A ConfigMap that merely has a record's name (not our labels) is never taken over or
// deleted, however old: the id stays taken (409) and the ConfigMap stays as it is.
func TestForeignConfigMapWithARecordNameIsNeverTouched(t *testing.T) {
	ns := testenv.Namespace(t)
	p := startProvider(t, ns, withEnv("SP_K8S_CREATE_TIMEOUT=1s", "SP_SERVER_REQUEST_TIMEOUT=5s", "SP_SERVER_WRITE_TIMEOUT=10s"))
	p.waitSynced(t)
	cs := testenv.Cluster(t).Client
	ctx := context.Background()
	foreign, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: container.RecordName("theirs"), Labels: map[string]string{"app": "someone-else"},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond) // older than an abandoned create (2 × 1 s)
	expectProblem(t, do(t, http.MethodPost, p.URL+containers+"?id=theirs", spec("web", "nginx")), http.StatusConflict, "already-exists")
	if r := do(t, http.MethodDelete, p.URL+containers+"/theirs", nil); r.Status != http.StatusNotFound {
		t.Errorf("delete: %d %s", r.Status, r.Body)
	}
	l, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, foreign.Name, metav1.GetOptions{})
	if err != nil || l.UID != foreign.UID || l.ResourceVersion != foreign.ResourceVersion {
		t.Errorf("the foreign ConfigMap was touched: %v %v", l, err)
	}
	if d, _, _ := objectsOf(t, ns, "theirs"); d != 0 {
		t.Errorf("%d Deployments", d)
	}
}
