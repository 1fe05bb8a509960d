package app_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"k8s.io/client-go/util/retry"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness/testenv"
)

// DCM's current wire contract, end to end on the real control plane: the RFC 9457 error
// shape, 400 for a body that is not JSON, memory units read as binary, and a Deployment
// scaled to zero reported FAILED. (Every row of the error contract is in
// internal/httpapi/contract_test.go, without a cluster.)

func TestContractErrorShape(t *testing.T) {
	ns := testenv.Namespace(t)
	p := startProvider(t, ns)
	p.waitSynced(t)

	// One problem: detail and pointer at the top, no errors array.
	r := do(t, http.MethodPost, p.URL+containers+"?id=one", spec("web", "nginx", func(s map[string]any) {
		s["resources"].(map[string]any)["cpu"] = map[string]any{"min": "10", "max": "5"}
	}))
	expectProblem(t, r, http.StatusBadRequest, "invalid-argument")
	if r.JSON["title"] != "Invalid argument" || r.JSON["detail"] != "cpu.min (10) must not exceed cpu.max (5)" ||
		r.JSON["pointer"] != "#/spec/resources/cpu/min" || r.JSON["errors"] != nil {
		t.Errorf("one problem: %s", r.Body)
	}

	// Two: the fixed detail, cpu first, the reserved label (key escaped) second.
	r = do(t, http.MethodPost, p.URL+containers+"?id=two", spec("web", "nginx", func(s map[string]any) {
		s["resources"].(map[string]any)["cpu"] = map[string]any{"min": "10", "max": "5"}
		s["metadata"].(map[string]any)["labels"] = map[string]any{"dcm.project/managed-by": "me"}
	}))
	expectProblem(t, r, http.StatusBadRequest, "invalid-argument")
	errs, _ := r.JSON["errors"].([]any)
	if r.JSON["detail"] != "multiple validation errors, see the errors array for details" || r.JSON["pointer"] != nil || len(errs) != 2 {
		t.Fatalf("two problems: %s", r.Body)
	}
	first, second := errs[0].(map[string]any), errs[1].(map[string]any)
	if first["pointer"] != "#/spec/resources/cpu/min" || first["detail"] != "cpu.min (10) must not exceed cpu.max (5)" ||
		second["pointer"] != "#/spec/metadata/labels/dcm.project~1managed-by" ||
		second["detail"] != `label "dcm.project/managed-by" is reserved by DCM` {
		t.Errorf("errors: %s", r.Body)
	}

	// Not found and already exists.
	expectProblem(t, do(t, http.MethodGet, p.URL+containers+"/missing", nil), http.StatusNotFound, "not-found")
	create(t, p, "dup", spec("web", "nginx"))
	r = do(t, http.MethodPost, p.URL+containers+"?id=dup", spec("web", "nginx"))
	expectProblem(t, r, http.StatusConflict, "already-exists")
	if r.JSON["title"] != "Already exists" {
		t.Errorf("409: %s", r.Body)
	}
	if d, _, _ := objectsOf(t, ns, "one", "two"); d != 0 {
		t.Errorf("a refused create left %d Deployments", d)
	}
}

func TestContractNonJSONBodyIs400(t *testing.T) {
	ns := testenv.Namespace(t)
	p := startProvider(t, ns)
	p.waitSynced(t)
	valid := `{"spec":{"service_type":"container","metadata":{"name":"web"},"image":{"reference":"nginx"},` +
		`"resources":{"cpu":{"min":1,"max":1},"memory":{"min":"1MB","max":"1MB"}}}}`
	for _, tc := range []struct{ name, contentType, body string }{
		{"yaml", "application/yaml", "spec: {}"},
		{"JSON sent as text/plain", "text/plain", valid},
		{"form", "application/x-www-form-urlencoded", "spec=1"},
		{"JSON followed by garbage", "application/json", valid + "garbage"},
		{"truncated JSON", "application/json", valid[:20]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, p.URL+containers+"?id=nj", bytes.NewBufferString(tc.body))
			req.Header.Set("Content-Type", tc.contentType)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Content-Type") != "application/problem+json" ||
				!bytes.Contains(b, []byte(`"title":"Invalid argument"`)) {
				t.Errorf("%d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
			}
		})
	}
	expectNothing(t, ns)
}

// MB, GB and TB are binary (Mi, Gi, Ti) in the cluster, as every DCM provider reads
// them; the API echoes what was sent.
func TestContractMemoryUnitsAreBinary(t *testing.T) {
	ns := testenv.Namespace(t)
	p := startProvider(t, ns)
	p.waitSynced(t)
	create(t, p, "mem", spec("web", "nginx", func(s map[string]any) {
		s["resources"].(map[string]any)["memory"] = map[string]any{"min": "512MB", "max": "2GB"}
	}))
	ctr := deploymentOf(t, ns, "mem").Spec.Template.Spec.Containers[0]
	if req, lim := ctr.Resources.Requests[corev1.ResourceMemory], ctr.Resources.Limits[corev1.ResourceMemory]; req.String() != "512Mi" ||
		lim.String() != "2Gi" || req.Value() != 512<<20 || lim.Value() != 2<<30 {
		t.Errorf("requests %s limits %s, want 512Mi and 2Gi", req.String(), lim.String())
	}
	r := do(t, http.MethodGet, p.URL+containers+"/mem", nil)
	mem := r.JSON["spec"].(map[string]any)["resources"].(map[string]any)["memory"].(map[string]any)
	if mem["min"] != "512MB" || mem["max"] != "2GB" {
		t.Errorf("GET memory %v, want it as sent", mem)
	}
}

// A Deployment scaled to zero by hand is FAILED, saying so; scaled back up it runs again.
func TestContractScaleToZeroIsFailed(t *testing.T) {
	ns := testenv.Namespace(t)
	srv := testenv.NATS(t)
	events := newSink(t, srv.URL)
	p := startProvider(t, ns, withNATS(srv.URL), withEnv(append(newLocalRegistry(t).holding(t, "nginx"), "SP_MONITOR_DEBOUNCE_MS=100")...))
	p.waitReporting(t)
	create(t, p, "scaled", spec("scaled", "nginx"))
	events.waitStatus("scaled", "RUNNING", "", 30*time.Second)

	scale := func(n int32) {
		t.Helper()
		deps := testenv.Cluster(t).Client.AppsV1().Deployments(ns)
		name := deploymentOf(t, ns, "scaled").Name
		// The Deployment controller writes the object too: a conflict is retried.
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			s, err := deps.GetScale(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			s.Spec.Replicas = n
			_, err = deps.UpdateScale(context.Background(), name, s, metav1.UpdateOptions{})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	scale(0)
	events.waitStatus("scaled", "FAILED", "scaled to zero", 30*time.Second)
	testenv.Eventually(t, 30*time.Second, "GET agrees", func() error {
		return expectStatus(do(t, http.MethodGet, p.URL+containers+"/scaled", nil), "FAILED")
	})
	scale(1)
	events.waitStatus("scaled", "RUNNING", "", 30*time.Second)
	events.noRepeats("scaled")
}

// expectStatus checks a container resource's status.
func expectStatus(r response, status string) error {
	if r.Status != http.StatusOK || r.JSON["status"] != status {
		return fmt.Errorf("%d %s", r.Status, r.Body)
	}
	return nil
}
