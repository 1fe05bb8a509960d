package httpapi

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/internal/kubeerr"
	"github.com/dcm-project/k8s-container-sp/internal/store"
)

// The HTTP error contract, pinned without a cluster: every row is a request and what the
// store answers, and the status, problem type, title, detail, pointers and headers that
// come back (DCM's RFC 9457 shape: one problem -> detail + pointer; several -> the
// fixed detail and an errors array in contract order). A change to any of them should
// be a deliberate change to this table.

// secret is in every cause a row plants (store errors, panics); no answer may carry it.
const secret = "s3cr3t-cause-do-not-leak"

// problemBase is spelled out, not ProblemTypeBase, so that the URI itself is pinned.
const problemBase = "https://dcm-project.github.io/problems/"

// validBody is a create request that passes every check.
const validBody = `{"spec":{"service_type":"container","metadata":{"name":"web"},"image":{"reference":"nginx"},` +
	`"resources":{"cpu":{"min":1,"max":1},"memory":{"min":"1MB","max":"1MB"}}}}`

// answer is what the fake store replies to whichever method the request reaches.
type answer struct {
	obs   []container.Observed // Get returns obs[0], List all of them; Create echoes its objects
	more  bool                 // List: another page follows
	err   error
	panic bool
}

// fakeStore answers every call with a; a nil a means the request must not reach it.
type fakeStore struct {
	t *testing.T
	a *answer
}

func (f fakeStore) reply(op string) (*answer, error) {
	if f.a == nil {
		f.t.Errorf("%s reached the store; the request should have been refused before", op)
		return nil, errors.New("unexpected store call")
	}
	if f.a.panic {
		panic(secret)
	}
	return f.a, f.a.err
}

func (f fakeStore) Create(_ context.Context, _ string, objs container.Objects) (container.Observed, error) {
	if _, err := f.reply("Create"); err != nil {
		return container.Observed{}, err
	}
	return allocated(objs).Observed(), nil
}

// allocated is what the apiserver answers a create with: the Service has its cluster IP
// and, when it is not a ClusterIP Service, its node ports (a load balancer's ingress
// comes later, from the cloud).
func allocated(objs container.Objects) container.Objects {
	if objs.Service == nil {
		return objs
	}
	svc := objs.Service.DeepCopy()
	svc.Spec.ClusterIP = "10.96.0.10"
	for i := range svc.Spec.Ports {
		if svc.Spec.Type != corev1.ServiceTypeClusterIP {
			svc.Spec.Ports[i].NodePort = 30080 + int32(i)
		}
	}
	objs.Service = svc
	return objs
}

func (f fakeStore) Get(context.Context, string) (container.Observed, error) {
	a, err := f.reply("Get")
	if err != nil {
		return container.Observed{}, err
	}
	return a.obs[0], nil
}

func (f fakeStore) List(string, int) ([]container.Observed, bool, error) {
	a, err := f.reply("List")
	if err != nil {
		return nil, false, err
	}
	return a.obs, a.more, nil
}

func (f fakeStore) Delete(context.Context, string) error {
	_, err := f.reply("Delete")
	return err
}

// body is validBody with each (old, new) pair replaced once.
func body(edits ...string) string {
	b := validBody
	for i := 0; i+1 < len(edits); i += 2 {
		if !strings.Contains(b, edits[i]) {
			panic("validBody has no " + edits[i])
		}
		b = strings.Replace(b, edits[i], edits[i+1], 1)
	}
	return b
}

// observed is what the cluster would hold for a valid container with this id.
func observed(t *testing.T, id string) container.Observed {
	t.Helper()
	var c v1alpha1.Container
	if err := json.Unmarshal([]byte(validBody), &c); err != nil {
		t.Fatal(err)
	}
	objs, err := container.Build(id, &c.Spec, container.Options{Namespace: "dcm"})
	if err != nil {
		t.Fatal(err)
	}
	return objs.Observed()
}

// exposed is what the cluster would hold for a valid container with an internal port
// (8080) and a none port (9090): a ClusterIP Service with its cluster IP.
func exposed(t *testing.T, id string) container.Observed {
	t.Helper()
	var c v1alpha1.Container
	if err := json.Unmarshal([]byte(body(`"image":`, exposedPorts+`,"image":`)), &c); err != nil {
		t.Fatal(err)
	}
	objs, err := container.Build(id, &c.Spec, container.Options{Namespace: "dcm"})
	if err != nil {
		t.Fatal(err)
	}
	return allocated(objs).Observed()
}

const exposedPorts = `"network":{"ports":[{"container_port":8080,"visibility":"internal"},{"container_port":9090,"visibility":"none"}]}`

// internalEndpoint is the one endpoint of exposed's container.
const internalEndpoint = `"endpoints":[{"address":"10.96.0.10","port":8080,"protocol":"TCP","scope":"internal"}]`

func fails(err error) *answer { return &answer{err: err} }

// storeErr is a classified store failure whose cause must stay in the log.
func storeErr(k kubeerr.Kind, fields ...container.Violation) *answer {
	return fails(&kubeerr.Error{Kind: k, Message: "classified by the store", Fields: fields, Err: errors.New(secret)})
}

// wireProblem is the problem+json body as a client reads it.
type wireProblem struct {
	Type     string  `json:"type"`
	Title    string  `json:"title"`
	Status   int     `json:"status"`
	Detail   *string `json:"detail"`
	Instance string  `json:"instance"`
	Pointer  *string `json:"pointer"`
	Errors   []struct {
		Detail  string  `json:"detail"`
		Pointer *string `json:"pointer"`
	} `json:"errors"`
}

// wantTitles is DCM's title of each problem type, spelled out.
var wantTitles = map[string]string{
	"invalid-argument": "Invalid argument", "not-found": "Not found", "already-exists": "Already exists",
	"permission-denied": "Permission denied", "unavailable": "Service Unavailable", "internal": "Internal Server Error",
	"unauthenticated": "Unauthenticated", "method-not-allowed": "Method Not Allowed", "content-too-large": "Content Too Large",
	"being-deleted": "Being deleted",
}

// noPointer stands for an errors[] entry without a pointer.
const noPointer = "-"

type contractRow struct {
	name           string
	method, target string
	contentType    string // "" sends none
	body           string
	chunked        bool    // send the body without a Content-Length
	store          *answer // nil: the store must not be reached
	status         int
	code           string   // problem type's last element; "" for a success
	detail         string   // the exact top-level detail; "" = not checked
	pointer        string   // the top-level pointer; "" = must be absent
	errors         []string // errors[].pointer in order (noPointer: absent); nil: no errors array
	headers        map[string]string
	has, hasNot    []string // substrings of the response body
}

const multiple = "multiple validation errors, see the errors array for details"

func TestErrorContract(t *testing.T) {
	const base = "/api/v1alpha1/containers"
	const jsonCT, yamlCT = "application/json", "application/yaml"
	const invalidArg = "invalid-argument"
	ok := &answer{}
	tooBig := body(`"name":"web"`, `"name":"web","labels":{"k":"`+strings.Repeat("a", MaxBodyBytes)+`"}`)
	ports := func(p string) string {
		return body(`"image":`, `"network":{"ports":[{"container_port":`+p+`,"visibility":"none"}]},"image":`)
	}
	retry := map[string]string{"Retry-After": "5"}
	const internalDetail = "an unexpected error occurred"

	rows := []contractRow{
		// POST create: success.
		{name: "create/201 echoes the spec as JSON", method: "POST", target: base + "?id=web-1", contentType: jsonCT, body: validBody,
			store: ok, status: 201, headers: map[string]string{"Content-Type": jsonCT},
			has: []string{`"id":"web-1"`, `"namespace":"dcm"`, `"status":"PENDING"`}},
		{name: "create/201 with a charset parameter on the content type", method: "POST", target: base, contentType: jsonCT + "; charset=utf-8",
			body: validBody, store: ok, status: 201, headers: map[string]string{"Content-Type": jsonCT}},
		{name: "create/400 without a content type", method: "POST", target: base, body: validBody, status: 400, code: "invalid-argument",
			has: []string{"Content-Type"}},

		// POST create: the body is not JSON, or cannot be read as a container.
		{name: "create/400 data after the JSON object: what and where", method: "POST", target: base + "?id=web-1", contentType: jsonCT,
			body: validBody + "garbage", status: 400, code: invalidArg,
			detail: fmt.Sprintf("the request body is not valid JSON: invalid character 'g' after top-level value, at line 1, column %d (byte %d)",
				len(validBody)+1, len(validBody)+1)},
		{name: "create/400 bad JSON syntax: where the body ends", method: "POST", target: base, contentType: jsonCT, body: `{"spec":`,
			status: 400, code: invalidArg, detail: "the request body is not valid JSON: it ends at line 1, column 8 (byte 8), before the value is complete"},
		{name: "create/400 bad JSON syntax: line and column in characters, byte in bytes", method: "POST", target: base, contentType: jsonCT,
			body: "{\"spec\":\n {\"é\": 1,}}", status: 400, code: invalidArg,
			detail: "the request body is not valid JSON: invalid character '}' looking for beginning of object key string, at line 2, column 10 (byte 20)"},
		{name: "create/400 non-JSON content type", method: "POST", target: base, contentType: yamlCT, body: "spec: {}",
			status: 400, code: invalidArg, detail: "the request body must be JSON (Content-Type: application/json), not application/yaml"},
		{name: "create/400 JSON body sent as text/plain", method: "POST", target: base, contentType: "text/plain", body: validBody,
			status: 400, code: invalidArg, detail: "the request body must be JSON (Content-Type: application/json), not text/plain"},
		{name: "create/400 wrong type for a field", method: "POST", target: base, contentType: jsonCT, body: body(`"name":"web"`, `"name":5`),
			status: 400, code: invalidArg, pointer: "#/spec/metadata/name"},
		{name: "create/400 exponent integer passes the schema but not the decoder", method: "POST", target: base, contentType: jsonCT,
			body: ports("1e3"), status: 400, code: invalidArg, detail: "spec.network.ports.container_port must be int32, not number 1e3"},
		{name: "create/400 missing body", method: "POST", target: base, contentType: jsonCT,
			status: 400, code: invalidArg},
		{name: "create/400 missing body and content type", method: "POST", target: base,
			status: 400, code: invalidArg},
		{name: "create/400 body is not an object", method: "POST", target: base, contentType: jsonCT, body: `[]`,
			status: 400, code: invalidArg},
		{name: "create/413 body over the limit by Content-Length", method: "POST", target: base, contentType: jsonCT, body: tooBig,
			status: 413, code: "content-too-large", detail: fmt.Sprintf("the request body is larger than %d bytes", MaxBodyBytes)},
		{name: "create/413 body over the limit chunked", method: "POST", target: base, contentType: jsonCT, body: tooBig, chunked: true,
			status: 413, code: "content-too-large", detail: fmt.Sprintf("the request body is larger than %d bytes", MaxBodyBytes)},

		// POST create: schema and domain violations, all reported at once.
		{name: "create/400 unknown service_type", method: "POST", target: base, contentType: jsonCT,
			body:   body(`"service_type":"container"`, `"service_type":"vm"`),
			status: 400, code: invalidArg, pointer: "#/spec/service_type"},
		{name: "create/400 missing spec", method: "POST", target: base, contentType: jsonCT, body: `{}`,
			status: 400, code: invalidArg, pointer: "#/spec", detail: `spec is required (an object with service_type, metadata, image and resources), or the body is the container spec itself`},
		// One mistake, one problem: not also "image.reference is required" (the domain's).
		{name: "create/400 missing image: one problem", method: "POST", target: base, contentType: jsonCT,
			body: body(`"image":{"reference":"nginx"},`, ``), status: 400, code: invalidArg,
			pointer: "#/spec/image", detail: "image is required (an object with reference)"},
		{name: "create/400 missing resources: one problem, not one per min and max", method: "POST", target: base, contentType: jsonCT,
			body: body(`,"resources":{"cpu":{"min":1,"max":1},"memory":{"min":"1MB","max":"1MB"}}`, ``), status: 400, code: invalidArg,
			pointer: "#/spec/resources", detail: "resources is required (an object with cpu and memory)"},
		{name: "create/400 missing service_type: required, not \"\" must be \"container\"", method: "POST", target: base, contentType: jsonCT,
			body: body(`"service_type":"container",`, ``), status: 400, code: invalidArg,
			pointer: "#/spec/service_type", detail: "service_type is required"},
		{name: "create/400 an empty spec: one problem per missing member", method: "POST", target: base, contentType: jsonCT,
			body: `{"spec":{}}`, status: 400, code: invalidArg, detail: multiple,
			errors: []string{"#/spec/resources", "#/spec/service_type", "#/spec/metadata", "#/spec/image"}},
		{name: "create/400 a missing member does not hide another member's problem", method: "POST", target: base, contentType: jsonCT,
			body: body(`"image":{"reference":"nginx"},`, ``, `"name":"web"`, `"name":"Web"`), status: 400, code: invalidArg, detail: multiple,
			errors: []string{"#/spec/metadata/name", "#/spec/image"}},
		// DCM's contract has no fractional number of cores: the answer says what to write.
		{name: "create/400 fractional cpu: the millicores to write", method: "POST", target: base, contentType: jsonCT,
			body: body(`"cpu":{"min":1,"max":1}`, `"cpu":{"min":0.5,"max":1}`), status: 400, code: invalidArg,
			pointer: "#/spec/resources/cpu/min", detail: `cpu.min: 0.5 is not a whole number of cores; use a string of millicores such as "500m"`},
		{name: "create/400 zero cpu", method: "POST", target: base, contentType: jsonCT,
			body: body(`"cpu":{"min":1,"max":1}`, `"cpu":{"min":0,"max":1}`), status: 400, code: invalidArg,
			pointer: "#/spec/resources/cpu/min", detail: `cpu.min: 0 is less than 1 core: use 1 or more, or a string of millicores such as "500m"`},
		// problem+json is not HTML-escaped: '<', '>' and '&' are themselves.
		{name: "create/400 the detail quotes < > & as they are", method: "POST", target: base, contentType: jsonCT,
			body: body(`"reference":"nginx"`, `"reference":"<a>&b"`), status: 400, code: invalidArg, pointer: "#/spec/image/reference",
			has: []string{`"image.reference \"<a>&b\"`}, hasNot: []string{`\u003c`, `\u003e`, `\u0026`}},
		// The rule in full (it was clipped mid-word), and what Kubernetes accepts is accepted.
		{name: "create/400 env name: the rule, whole", method: "POST", target: base, contentType: jsonCT,
			body: body(`"image":`, `"process":{"env":[{"name":"1bad","value":""}]},"image":`), status: 400, code: invalidArg,
			pointer: "#/spec/process/env/0/name",
			detail:  `process.env[0].name "1bad" must be letters, digits, '_', '-' or '.', and not start with a digit (e.g. MY_VAR, my.var-1)`},
		{name: "create/201 env names with '.' and '-', as Kubernetes accepts", method: "POST", target: base, contentType: jsonCT,
			body:  body(`"image":`, `"process":{"env":[{"name":"my.var-1","value":""},{"name":"_X","value":""},{"name":"-a.","value":""}]},"image":`),
			store: ok, status: 201},
		{name: "create/400 unknown field: named, pointed at, and where it belongs", method: "POST", target: base, contentType: jsonCT,
			body:   body(`"image":`, `"env":[{"name":"A","value":"1"}],"image":`),
			status: 400, code: invalidArg, pointer: "#/spec/env",
			detail: "env: unknown field, not in the container schema (did you mean process.env?)"},
		{name: "create/400 a misspelt member: did you mean", method: "POST", target: base, contentType: jsonCT,
			body:   body(`"image":`, `"imagee":`),
			status: 400, code: invalidArg, detail: multiple, errors: []string{"#/spec/image", "#/spec/imagee"},
			has: []string{`"detail":"imagee: unknown field, not in the container schema (did you mean image?)"`}},
		{name: "create/400 unknown top-level member", method: "POST", target: base, contentType: jsonCT,
			body:   body(`{"spec"`, `{"extra":true,"spec"`),
			status: 400, code: invalidArg, pointer: "#/extra", detail: "extra: unknown field, not in the container schema"},
		{name: "create/400 member names are exact: Spec is not spec", method: "POST", target: base, contentType: jsonCT,
			body:   body(`{"spec"`, `{"Spec"`),
			status: 400, code: invalidArg, detail: multiple, errors: []string{"#/spec", "#/Spec"},
			has: []string{`"detail":"Spec: unknown field, not in the container schema (did you mean spec?)"`}},
		{name: "create/400 what is under Spec is not checked as the spec (encoding/json would match it)", method: "POST", target: base,
			contentType: jsonCT, body: body(`{"spec"`, `{"Spec"`, `"cpu":{"min":1,"max":1}`, `"cpu":{"min":"10","max":"5"}`),
			status: 400, code: invalidArg, detail: multiple, errors: []string{"#/spec", "#/Spec"}, hasNot: []string{"cpu.min"}},
		{name: "create/400 a case variant beside the member is not read for it", method: "POST", target: base, contentType: jsonCT,
			body:   body(`"name":"web"`, `"name":"web","Name":"Bad_Name"`),
			status: 400, code: invalidArg, pointer: "#/spec/metadata/Name",
			detail: "metadata.Name: unknown field, not in the container schema (did you mean metadata.name?)"},
		{name: "create/400 unknown field deep in the spec", method: "POST", target: base, contentType: jsonCT,
			body:   ports(`80,"protocol":"UDP"`),
			status: 400, code: invalidArg, pointer: "#/spec/network/ports/0/protocol",
			detail: "network.ports[0].protocol: unknown field, not in the container schema"},
		{name: "create/201 provider_hints stays open", method: "POST", target: base, contentType: jsonCT,
			body:  body(`"image":`, `"provider_hints":{"kubevirt":{"anything":[1,{"Goes":true}]}},"image":`),
			store: ok, status: 201},
		{name: "create/400 read-only id in the body", method: "POST", target: base, contentType: jsonCT, body: body(`{"spec"`, `{"id":"x","spec"`),
			status: 400, code: invalidArg, pointer: "#/id"},
		{name: "create/201 answers the endpoints of the Service just made, as GET will", method: "POST", target: base, contentType: jsonCT,
			body: body(`"image":`, exposedPorts+`,"image":`), store: ok, status: 201, has: []string{internalEndpoint}},
		{name: "create/201 no endpoints when nothing is exposed", method: "POST", target: base, contentType: jsonCT,
			body: ports("80"), store: ok, status: 201, hasNot: []string{"endpoints"}},
		{name: "create/400 read-only spec.endpoints in the body", method: "POST", target: base, contentType: jsonCT,
			body:   body(`"image":`, `"endpoints":[{"address":"10.0.0.1","port":80,"scope":"internal"}],"image":`),
			status: 400, code: invalidArg, pointer: "#/spec/endpoints",
			detail: "endpoints is read-only: the provider fills it in its answers; leave it out of a create"},
		{name: "create/400 read-only spec.endpoints: one problem whatever it holds", method: "POST", target: base, contentType: jsonCT,
			body:   body(`"image":`, `"endpoints":[{"port":"x","Scope":1}],"image":`),
			status: 400, code: invalidArg, pointer: "#/spec/endpoints",
			detail: "endpoints is read-only: the provider fills it in its answers; leave it out of a create"},
		{name: "create/400 read-only spec.endpoints beside a cpu problem: cpu first", method: "POST", target: base, contentType: jsonCT,
			body:   body(`"image":`, `"endpoints":[],"image":`, `"cpu":{"min":1,"max":1}`, `"cpu":{"min":"10","max":"5"}`),
			status: 400, code: invalidArg, detail: multiple, errors: []string{"#/spec/resources/cpu/min", "#/spec/endpoints"}},
		{name: "create/400 read-only namespace, named as read-only", method: "POST", target: base, contentType: jsonCT,
			body:   body(`"name":"web"`, `"name":"web","namespace":"other"`),
			status: 400, code: invalidArg, pointer: "#/spec/metadata/namespace",
			detail: "metadata.namespace is read-only: the provider fills it in its answers; leave it out of a create"},
		{name: "create/400 port out of range", method: "POST", target: base, contentType: jsonCT, body: ports("70000"),
			status: 400, code: invalidArg, pointer: "#/spec/network/ports/0/container_port",
			detail: "network.ports[0].container_port 70000 is not a port (1-65535)"},
		{name: "create/400 cpu min above max", method: "POST", target: base, contentType: jsonCT,
			body:   body(`"cpu":{"min":1,"max":1}`, `"cpu":{"min":"10","max":"5"}`),
			status: 400, code: invalidArg, pointer: "#/spec/resources/cpu/min", detail: "cpu.min (10) must not exceed cpu.max (5)"},
		// Memory in the exact binary units passes the schema and the domain, and is echoed as sent.
		{name: "create/201 memory in Mi and GiB, echoed as sent", method: "POST", target: base, contentType: jsonCT,
			body:  body(`"memory":{"min":"1MB","max":"1MB"}`, `"memory":{"min":"512Mi","max":"2GiB"}`),
			store: ok, status: 201, has: []string{`"memory":{"max":"2GiB","min":"512Mi"}`}},
		{name: "create/201 memory in Ti and TiB", method: "POST", target: base, contentType: jsonCT,
			body:  body(`"memory":{"min":"1MB","max":"1MB"}`, `"memory":{"min":"1Ti","max":"1TiB"}`),
			store: ok, status: 201, has: []string{`"memory":{"max":"1TiB","min":"1Ti"}`}},
		{name: "create/400 memory in decimal G: the units, MB read as MiB", method: "POST", target: base, contentType: jsonCT,
			body:   body(`"max":"1MB"`, `"max":"2G"`),
			status: 400, code: invalidArg, pointer: "#/spec/resources/memory/max",
			detail: `memory.max: "2G" is not a memory quantity: use a whole number with MB, GB or TB (read as MiB, GiB and TiB), or with Mi, Gi, Ti, MiB, GiB or TiB, e.g. "512MB" or "2Gi"`},
		{name: "create/400 reserved label, key escaped in the pointer", method: "POST", target: base, contentType: jsonCT,
			body:   body(`"name":"web"`, `"name":"web","labels":{"dcm.project/managed-by":"y"}`),
			status: 400, code: invalidArg, pointer: "#/spec/metadata/labels/dcm.project~1managed-by",
			detail: `label "dcm.project/managed-by" is reserved by DCM`},
		{name: "create/400 cpu and label: cpu first, label second", method: "POST", target: base, contentType: jsonCT,
			body: body(`"name":"web"`, `"name":"web","labels":{"dcm.project/managed-by":"y"}`,
				`"cpu":{"min":1,"max":1}`, `"cpu":{"min":"10","max":"5"}`),
			status: 400, code: invalidArg, detail: multiple,
			errors: []string{"#/spec/resources/cpu/min", "#/spec/metadata/labels/dcm.project~1managed-by"},
			has:    []string{`"detail":"cpu.min (10) must not exceed cpu.max (5)"`, `"detail":"label \"dcm.project/managed-by\" is reserved by DCM"`}},
		{name: "create/400 schema and domain problems together, in contract order", method: "POST", target: base, contentType: jsonCT,
			body:   body(`"name":"web"`, `"name":"Web"`, `"cpu":{"min":1,"max":1}`, `"cpu":{"min":4,"max":2}`, `"max":"1MB"`, `"max":"2G"`),
			status: 400, code: invalidArg, detail: multiple,
			errors: []string{"#/spec/resources/cpu/min", "#/spec/resources/memory/max", "#/spec/metadata/name"}},
		{name: "create/400 bad id query parameter: one problem, no pointer", method: "POST", target: base + "?id=Bad_ID", contentType: jsonCT, body: validBody,
			status: 400, code: invalidArg,
			detail: `id "Bad_ID" must be 1-63 lowercase letters, digits or '-', starting and ending with a letter or digit`},
		{name: "create/400 reserved id health", method: "POST", target: base + "?id=health", contentType: jsonCT, body: validBody,
			status: 400, code: invalidArg, detail: `id "health" is reserved (it is the health endpoint)`},
		{name: "create/400 bad id and a body problem: the id last, without a pointer", method: "POST", target: base + "?id=health",
			contentType: jsonCT, body: ports("70000"), status: 400, code: invalidArg, detail: multiple,
			errors: []string{"#/spec/network/ports/0/container_port", noPointer}},
		{name: "create/400 repeated id parameter", method: "POST", target: base + "?id=a&id=b", contentType: jsonCT,
			body: validBody, status: 400, code: invalidArg},

		// POST create: the store's answers.
		{name: "create/409 store conflict", method: "POST", target: base + "?id=web-1", contentType: jsonCT, body: validBody,
			store: storeErr(kubeerr.KindConflict), status: 409, code: "already-exists",
			detail: `a container with id "web-1" already exists; it was not changed`},
		{name: "create/409 the previous container is being deleted", method: "POST", target: base + "?id=web-1", contentType: jsonCT, body: validBody,
			store:  fails(&kubeerr.Error{Kind: kubeerr.KindDeleting, RetryAfter: 5, Message: "the previous container with this id is being deleted; nothing was created; retry after 5 s"}),
			status: 409, code: "being-deleted", detail: "the previous container with this id is being deleted; nothing was created; retry after 5 s"},
		{name: "create/400 store invalid with one field", method: "POST", target: base, contentType: jsonCT, body: validBody,
			store:  storeErr(kubeerr.KindInvalid, container.Violation{Pointer: "#/spec/image/reference", Detail: "image.reference: refused"}),
			status: 400, code: invalidArg, pointer: "#/spec/image/reference", detail: "image.reference: refused"},
		{name: "create/400 store invalid with two fields", method: "POST", target: base, contentType: jsonCT, body: validBody,
			store: storeErr(kubeerr.KindInvalid, container.Violation{Pointer: "#/spec/image/reference", Detail: "a"},
				container.Violation{Pointer: "#/spec/resources", Detail: "b"}),
			status: 400, code: invalidArg, detail: multiple, errors: []string{"#/spec/resources", "#/spec/image/reference"}},
		{name: "create/400 store invalid without fields", method: "POST", target: base, contentType: jsonCT, body: validBody,
			store: storeErr(kubeerr.KindInvalid), status: 400, code: invalidArg, detail: "the cluster refused the container; nothing was created"},
		{name: "create/403 store quota", method: "POST", target: base, contentType: jsonCT, body: validBody,
			store:  storeErr(kubeerr.KindQuota, container.Violation{Pointer: "#/spec/resources", Detail: "resources: exceeded quota"}),
			status: 403, code: "permission-denied", pointer: "#/spec/resources", detail: "resources: exceeded quota"},
		{name: "create/503 store unavailable", method: "POST", target: base, contentType: jsonCT, body: validBody,
			store: storeErr(kubeerr.KindUnavailable), status: 503, code: "unavailable", headers: retry},
		{name: "create/503 store permission: the detail names what the Role lacks", method: "POST", target: base, contentType: jsonCT,
			body: validBody, store: storeErr(kubeerr.KindPermission), status: 503, code: "unavailable",
			detail: "classified by the store", headers: map[string]string{"Retry-After": "30"}},
		{name: "create/500 store internal", method: "POST", target: base, contentType: jsonCT, body: validBody,
			store: storeErr(kubeerr.KindInternal), status: 500, code: "internal", detail: internalDetail},
		{name: "create/500 store kind unknown", method: "POST", target: base, contentType: jsonCT, body: validBody,
			store: storeErr(kubeerr.Kind(99)), status: 500, code: "internal", detail: internalDetail},
		{name: "create/500 plain error", method: "POST", target: base, contentType: jsonCT, body: validBody,
			store: fails(errors.New(secret)), status: 500, code: "internal", detail: internalDetail},
		{name: "create/500 panic in the store", method: "POST", target: base, contentType: jsonCT, body: validBody,
			store: &answer{panic: true}, status: 500, code: "internal", detail: internalDetail},

		// GET one.
		{name: "get/200 found", method: "GET", target: base + "/a", store: &answer{obs: []container.Observed{observed(t, "a")}},
			status: 200, headers: map[string]string{"Content-Type": jsonCT}, has: []string{`"id":"a"`, `"path":"containers/a"`}},
		{name: "get/200 endpoints", method: "GET", target: base + "/a", store: &answer{obs: []container.Observed{exposed(t, "a")}},
			status: 200, has: []string{internalEndpoint}},
		{name: "get/200 no endpoints when nothing is exposed", method: "GET", target: base + "/a",
			store: &answer{obs: []container.Observed{observed(t, "a")}}, status: 200, hasNot: []string{"endpoints"}},
		{name: "get/404 not found", method: "GET", target: base + "/a", store: fails(store.ErrNotFound),
			status: 404, code: "not-found", detail: `no container has id "a"`},
		{name: "get/503 store unavailable", method: "GET", target: base + "/a", store: storeErr(kubeerr.KindUnavailable),
			status: 503, code: "unavailable", headers: retry},
		{name: "get/500 store internal", method: "GET", target: base + "/a", store: storeErr(kubeerr.KindInternal),
			status: 500, code: "internal", detail: internalDetail},
		{name: "get/400 malformed id", method: "GET", target: base + "/Bad_ID", status: 400, code: invalidArg},

		// LIST.
		// AEP-158: 0 is the default and a size above 1000 is read as 1000
		// (TestListPageSize); only a negative size is refused.
		{name: "list/400 max_page_size -1", method: "GET", target: base + "?max_page_size=-1",
			status: 400, code: invalidArg, has: []string{"max_page_size"}},
		{name: "list/200 max_page_size 0", method: "GET", target: base + "?max_page_size=0",
			store: &answer{obs: []container.Observed{observed(t, "a")}}, status: 200, has: []string{`"id":"a"`}},
		{name: "list/200 max_page_size 5000", method: "GET", target: base + "?max_page_size=5000",
			store: &answer{obs: []container.Observed{observed(t, "a")}}, status: 200, has: []string{`"id":"a"`}},
		{name: "list/400 max_page_size beyond int32", method: "GET", target: base + "?max_page_size=2147483648",
			status: 400, code: invalidArg, has: []string{"max_page_size"}},
		{name: "list/400 max_page_size not a number", method: "GET", target: base + "?max_page_size=abc",
			status: 400, code: invalidArg, has: []string{"max_page_size"}},
		{name: "list/400 repeated max_page_size", method: "GET", target: base + "?max_page_size=5&max_page_size=6",
			status: 400, code: invalidArg},
		{name: "list/400 bad page_token", method: "GET", target: base + "?page_token=zzz",
			status: 400, code: invalidArg, detail: "page_token is not a page token from this API"},
		{name: "list/400 page_token with an invalid id", method: "GET", target: base + "?page_token=" + encodePageToken("Bad_ID"),
			status: 400, code: invalidArg, detail: "page_token is not a page token from this API"},
		{name: "list/200 with next_page_token", method: "GET", target: base + "?max_page_size=2&page_token=" + encodePageToken("a"),
			store:  &answer{obs: []container.Observed{observed(t, "b"), observed(t, "c")}, more: true},
			status: 200, headers: map[string]string{"Content-Type": jsonCT},
			has: []string{`"id":"b"`, `"id":"c"`, `"next_page_token":"` + encodePageToken("c") + `"`}},
		{name: "list/200 last page has no next_page_token", method: "GET", target: base,
			store: &answer{obs: []container.Observed{observed(t, "a")}}, status: 200, hasNot: []string{"next_page_token"}},
		{name: "list/200 endpoints", method: "GET", target: base, store: &answer{obs: []container.Observed{exposed(t, "a"), observed(t, "b")}},
			status: 200, has: []string{`"id":"a"`, internalEndpoint}},
		{name: "list/200 empty", method: "GET", target: base + "?page_token=", store: ok, status: 200, has: []string{`"containers":[]`}},
		{name: "list/503 store unavailable", method: "GET", target: base, store: storeErr(kubeerr.KindUnavailable),
			status: 503, code: "unavailable", headers: retry},

		// DELETE.
		{name: "delete/204", method: "DELETE", target: base + "/a", store: ok, status: 204},
		{name: "delete/404 not found", method: "DELETE", target: base + "/a", store: fails(store.ErrNotFound),
			status: 404, code: "not-found", detail: `no container has id "a"`},
		{name: "delete/503 store unavailable", method: "DELETE", target: base + "/a", store: storeErr(kubeerr.KindUnavailable),
			status: 503, code: "unavailable", headers: retry},
		{name: "delete/400 malformed id", method: "DELETE", target: base + "/Bad_ID", status: 400, code: invalidArg},

		// Routing.
		{name: "route/404 unknown path", method: "GET", target: "/nope", status: 404, code: "not-found"},
		{name: "route/404 path below a container", method: "GET", target: base + "/a/b", status: 404, code: "not-found"},
		{name: "route/404 trailing slash", method: "GET", target: base + "/", status: 404, code: "not-found"},
		{name: "route/405 PUT on the collection", method: "PUT", target: base, status: 405, code: "method-not-allowed",
			headers: map[string]string{"Allow": "GET, HEAD, POST"}},
		{name: "route/200 HEAD on the collection", method: "HEAD", target: base, store: ok, status: 200,
			headers: map[string]string{"Content-Type": jsonCT}},
		{name: "route/405 POST on a container", method: "POST", target: base + "/a", contentType: jsonCT, body: validBody,
			status: 405, code: "method-not-allowed", headers: map[string]string{"Allow": "GET, HEAD, DELETE"}},
		{name: "route/404 POST of a non-JSON body to an unknown path", method: "POST", target: "/nope", contentType: "text/plain",
			body: "x", status: 404, code: "not-found"},
		{name: "route/405 DELETE on health", method: "DELETE", target: base + "/health", status: 405, code: "method-not-allowed",
			headers: map[string]string{"Allow": "GET, HEAD"}},
		{name: "route/200 health", method: "GET", target: "/health", status: 200, headers: map[string]string{"Content-Type": jsonCT}},
	}

	for _, tc := range rows {
		t.Run(tc.name, func(t *testing.T) {
			rec := serve(t, tc)
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.status, rec.Body)
			}
			if rec.Header().Get("X-Request-Id") == "" {
				t.Error("no X-Request-Id")
			}
			for k, v := range tc.headers {
				if got := rec.Header().Get(k); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
			for _, s := range tc.has {
				if !strings.Contains(rec.Body.String(), s) {
					t.Errorf("body lacks %s: %s", s, rec.Body)
				}
			}
			for _, s := range append(tc.hasNot, secret) {
				if strings.Contains(rec.Body.String(), s) {
					t.Errorf("body has %s: %s", s, rec.Body)
				}
			}
			if rec.Code >= 400 {
				checkProblem(t, rec, tc)
			}
		})
	}
}

// serve sends the row's request through the whole stack over a fake store.
func serve(t *testing.T, tc contractRow) *httptest.ResponseRecorder {
	t.Helper()
	h, err := NewHandler(Options{
		Store:   fakeStore{t: t, a: tc.store},
		Objects: container.Options{Namespace: "dcm"},
		Health:  func(context.Context) error { return nil },
		Log:     slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(tc.method, tc.target, strings.NewReader(tc.body))
	if tc.chunked {
		req.ContentLength = -1
	}
	if tc.contentType != "" {
		req.Header.Set("Content-Type", tc.contentType)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// checkProblem checks an error answer against the row: an RFC 9457 problem with DCM's
// type URI, the HTTP status, the request path as instance and the expected fields.
func checkProblem(t *testing.T, rec *httptest.ResponseRecorder, tc contractRow) {
	t.Helper()
	if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type %q, want application/problem+json", ct)
	}
	if cc := rec.Header().Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control %q, want no-store", cc)
	}
	var p wireProblem
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
		t.Fatalf("not a problem: %v: %s", err, rec.Body)
	}
	path, _, _ := strings.Cut(tc.target, "?")
	if p.Type != problemBase+tc.code || p.Title != wantTitles[tc.code] || p.Status != rec.Code || p.Instance != path {
		t.Errorf("got type %q title %q status %d instance %q, want %q %q %d %q",
			p.Type, p.Title, p.Status, p.Instance, problemBase+tc.code, wantTitles[tc.code], rec.Code, path)
	}
	if p.Detail == nil || *p.Detail == "" {
		t.Errorf("no detail: %s", rec.Body)
	} else if tc.detail != "" && *p.Detail != tc.detail {
		t.Errorf("detail %q, want %q", *p.Detail, tc.detail)
	}
	if got := deref(p.Pointer); got != tc.pointer {
		t.Errorf("pointer %q, want %q: %s", got, tc.pointer, rec.Body)
	}
	var pointers []string
	for _, e := range p.Errors {
		pointers = append(pointers, cmp.Or(deref(e.Pointer), noPointer))
		if e.Detail == "" {
			t.Errorf("errors entry without detail: %s", rec.Body)
		}
	}
	if !slices.Equal(pointers, tc.errors) || (p.Errors == nil) != (tc.errors == nil) {
		t.Errorf("errors pointers %q, want %q: %s", pointers, tc.errors, rec.Body)
	}
	if len(p.Errors) > 0 && (p.Pointer != nil || deref(p.Detail) != multiple) {
		t.Errorf("several problems need the fixed detail and no top-level pointer: %s", rec.Body)
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
