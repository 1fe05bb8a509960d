package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/dcm-project/k8s-container-sp/internal/kubeerr"
	"github.com/dcm-project/k8s-container-sp/internal/store"
)

// The error examples of docs/api.md are produced here, so they cannot drift from what
// the service answers. Each example sits in docs/api.md after a line
// "<!-- example: NAME (request) -->" as a ```http block; UPDATE_DOCS=1 go test
// ./internal/httpapi/ -run TestAPIDocExamples rewrites the blocks.

const apiDocPath = "../../docs/api.md"

var apiDocExamples = []struct {
	name string
	row  contractRow
}{
	{"one-problem", contractRow{method: "POST", target: "/api/v1alpha1/containers?id=web-app-1", contentType: "application/json",
		body: body(`"cpu":{"min":1,"max":1}`, `"cpu":{"min":"10","max":"5"}`)}},
	{"several-problems", contractRow{method: "POST", target: "/api/v1alpha1/containers?id=web-app-1", contentType: "application/json",
		body: body(`"name":"web"`, `"name":"web","labels":{"dcm.project/managed-by":"me"}`,
			`"cpu":{"min":1,"max":1}`, `"cpu":{"min":"10","max":"5"}`, `"max":"1MB"`, `"max":"2G"`)}},
	{"read-only", contractRow{method: "POST", target: "/api/v1alpha1/containers?id=web-app-1", contentType: "application/json",
		body: body(`"image":`, `"endpoints":[{"address":"10.96.67.170","port":8080,"protocol":"TCP","scope":"internal"}],"image":`)}},
	{"not-json", contractRow{method: "POST", target: "/api/v1alpha1/containers", contentType: "text/plain", body: "spec: {}"}},
	{"not-found", contractRow{method: "GET", target: "/api/v1alpha1/containers/web-app-2", store: fails(store.ErrNotFound)}},
	{"already-exists", contractRow{method: "POST", target: "/api/v1alpha1/containers?id=web-app-1", contentType: "application/json",
		body: validBody, store: storeErr(kubeerr.KindConflict)}},
	{"internal", contractRow{method: "POST", target: "/api/v1alpha1/containers?id=web-app-1", contentType: "application/json",
		body: validBody, store: fails(errors.New(secret))}},
}

var exampleBlock = regexp.MustCompile("(?s)(<!-- example: ([a-z-]+) [^\n]*-->\n```http\n)(.*?)(```)")

func TestAPIDocExamples(t *testing.T) {
	produced := map[string]string{}
	for _, ex := range apiDocExamples {
		rec := serve(t, ex.row)
		var out bytes.Buffer
		if err := json.Indent(&out, bytes.TrimSpace(rec.Body.Bytes()), "", "  "); err != nil {
			t.Fatalf("%s: %v: %s", ex.name, err, rec.Body)
		}
		produced[ex.name] = fmt.Sprintf("HTTP/1.1 %d %s\nContent-Type: %s\n\n%s\n",
			rec.Code, http.StatusText(rec.Code), rec.Header().Get("Content-Type"), out.String())
	}
	doc, err := os.ReadFile(apiDocPath)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	updated := exampleBlock.ReplaceAllStringFunc(string(doc), func(block string) string {
		m := exampleBlock.FindStringSubmatch(block)
		name, have := m[2], m[3]
		want, ok := produced[name]
		if !ok {
			t.Errorf("docs/api.md example %q is not produced by this test", name)
			return block
		}
		seen[name] = true
		if have != want && os.Getenv("UPDATE_DOCS") == "" {
			t.Errorf("docs/api.md example %q drifted; run UPDATE_DOCS=1 go test ./internal/httpapi/ -run TestAPIDocExamples\ndocs/api.md:\n%s\nservice:\n%s", name, have, want)
		}
		return m[1] + want + m[4]
	})
	for name := range produced {
		if !seen[name] {
			t.Errorf("docs/api.md has no block for example %q", name)
		}
	}
	if os.Getenv("UPDATE_DOCS") != "" && updated != string(doc) {
		if err := os.WriteFile(apiDocPath, []byte(updated), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Log("docs/api.md examples rewritten")
	}
	if strings.Contains(updated, secret) {
		t.Error("an example leaks a cause")
	}
}
