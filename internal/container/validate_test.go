package container

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
)

// specJSON decodes a spec from JSON, as the API receives it.
func specJSON(t *testing.T, s string) *v1alpha1.ContainerSpec {
	t.Helper()
	var spec v1alpha1.ContainerSpec
	if err := json.Unmarshal([]byte(s), &spec); err != nil {
		t.Fatalf("bad test spec: %v", err)
	}
	return &spec
}

const validSpec = `{
  "service_type": "container",
  "metadata": {"name": "web-app", "labels": {"team": "payments", "example.com/tier": "web"}},
  "image": {"reference": "quay.io/myapp:v1.2"},
  "resources": {"cpu": {"min": 1, "max": "2"}, "memory": {"min": "512MB", "max": "2GB"}},
  "process": {"command": ["/app/start"], "args": ["--x"], "env": [{"name": "ENV", "value": "prod"}]},
  "network": {"ports": [{"container_port": 8080, "visibility": "external"}, {"container_port": 9090, "visibility": "none"}]}
}`

// mutate returns validSpec with one JSON edit applied via a map round trip.
func mutate(t *testing.T, edit func(m map[string]any)) *v1alpha1.ContainerSpec {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(validSpec), &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	b, _ := json.Marshal(m)
	return specJSON(t, string(b))
}

func sub(m map[string]any, keys ...string) map[string]any {
	for _, k := range keys {
		m = m[k].(map[string]any)
	}
	return m
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name   string
		edit   func(m map[string]any)
		fields []string // pointers expected in the violations, in order; nil = valid
	}{
		{"valid", func(map[string]any) {}, nil},
		{"millicores", func(m map[string]any) { sub(m, "resources", "cpu")["min"] = "500m" }, nil},
		{"digest image", func(m map[string]any) {
			sub(m, "image")["reference"] = "registry.example.com:5000/team/app@sha256:" + strings.Repeat("a", 64)
		}, nil},
		{"docker hub short name", func(m map[string]any) { sub(m, "image")["reference"] = "nginx" }, nil},
		{"no ports exposed, name may start with a digit", func(m map[string]any) {
			sub(m, "metadata")["name"] = "1app"
			delete(m, "network")
		}, nil},
		{"wrong service type", func(m map[string]any) { m["service_type"] = "vm" }, []string{"#/spec/service_type"}},
		{"name uppercase", func(m map[string]any) { sub(m, "metadata")["name"] = "Web" }, []string{"#/spec/metadata/name"}},
		{"name too long", func(m map[string]any) { sub(m, "metadata")["name"] = strings.Repeat("a", 64) }, []string{"#/spec/metadata/name"}},
		{"name digit with exposed port", func(m map[string]any) { sub(m, "metadata")["name"] = "1app" }, []string{"#/spec/metadata/name"}},
		{"reserved label", func(m map[string]any) { sub(m, "metadata", "labels")["dcm.project/owner"] = "x" }, []string{"#/spec/metadata/labels/dcm.project~1owner"}},
		{"bad label key and value", func(m map[string]any) {
			sub(m, "metadata")["labels"] = map[string]any{"bad key": "ok", "ok": "bad value!"}
		}, []string{"#/spec/metadata/labels/bad key", "#/spec/metadata/labels/ok"}},
		{"image with space", func(m map[string]any) { sub(m, "image")["reference"] = "quay.io/my app" }, []string{"#/spec/image/reference"}},
		{"image uppercase repo", func(m map[string]any) { sub(m, "image")["reference"] = "quay.io/MyApp:v1" }, []string{"#/spec/image/reference"}},
		{"image empty", func(m map[string]any) { sub(m, "image")["reference"] = "" }, []string{"#/spec/image/reference"}},
		{"cpu zero", func(m map[string]any) { sub(m, "resources", "cpu")["min"] = 0 }, []string{"#/spec/resources/cpu/min"}},
		{"cpu fraction", func(m map[string]any) { sub(m, "resources", "cpu")["min"] = 0.5 }, []string{"#/spec/resources/cpu/min"}},
		{"cpu string junk", func(m map[string]any) { sub(m, "resources", "cpu")["max"] = "2 cores" }, []string{"#/spec/resources/cpu/max"}},
		{"cpu min above max", func(m map[string]any) { sub(m, "resources", "cpu")["min"] = "2500m" }, []string{"#/spec/resources/cpu/min"}},
		{"cpu huge", func(m map[string]any) { sub(m, "resources", "cpu")["max"] = "99999999999999999999" }, []string{"#/spec/resources/cpu/max"}},
		{"memory unit", func(m map[string]any) { sub(m, "resources", "memory")["min"] = "512M" }, []string{"#/spec/resources/memory/min"}},
		{"memory zero", func(m map[string]any) { sub(m, "resources", "memory")["min"] = "0MB" }, []string{"#/spec/resources/memory/min"}},
		{"memory min above max", func(m map[string]any) { sub(m, "resources", "memory")["min"] = "3GB" }, []string{"#/spec/resources/memory/min"}},
		{"memory overflow", func(m map[string]any) { sub(m, "resources", "memory")["max"] = "99999999999TB" }, []string{"#/spec/resources/memory/max"}},
		{"env bad and duplicate", func(m map[string]any) {
			sub(m, "process")["env"] = []any{
				map[string]any{"name": "A", "value": "1"},
				map[string]any{"name": "1BAD=", "value": "2"},
				map[string]any{"name": "A", "value": "3"},
				map[string]any{"name": "", "value": "4"},
			}
		}, []string{"#/spec/process/env/1/name", "#/spec/process/env/2/name", "#/spec/process/env/3/name"}},
		{"ports out of range, duplicate, bad visibility", func(m map[string]any) {
			sub(m, "network")["ports"] = []any{
				map[string]any{"container_port": 0, "visibility": "internal"},
				map[string]any{"container_port": 80, "visibility": "internal"},
				map[string]any{"container_port": 80, "visibility": "internal"},
				map[string]any{"container_port": 81, "visibility": "public"},
				map[string]any{"container_port": 70000, "visibility": "none"},
			}
		}, []string{"#/spec/network/ports/0/container_port", "#/spec/network/ports/2/container_port", "#/spec/network/ports/3/visibility", "#/spec/network/ports/4/container_port"}},
		{"everything at once", func(m map[string]any) {
			m["service_type"] = "vm"
			sub(m, "metadata")["name"] = "-x"
			sub(m, "image")["reference"] = ""
			sub(m, "resources", "memory")["max"] = "lots"
		}, []string{"#/spec/resources/memory/max", "#/spec/service_type", "#/spec/metadata/name", "#/spec/image/reference"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			vs := Validate(mutate(t, tc.edit), testPolicy)
			var got []string
			for _, v := range vs {
				got = append(got, v.Pointer)
				if v.Detail == "" {
					t.Errorf("violation at %s has no detail", v.Pointer)
				}
			}
			if !slices.Equal(got, tc.fields) {
				t.Errorf("pointers = %q, want %q (%+v)", got, tc.fields, vs)
			}
		})
	}
}

// The details DCM's contract tests read, word for word, and the order they read them in.
func TestValidateDetailsAndOrder(t *testing.T) {
	spec := mutate(t, func(m map[string]any) {
		sub(m, "metadata", "labels")["dcm.project/managed-by"] = "me"
		sub(m, "resources")["cpu"] = map[string]any{"min": "10", "max": "5"}
		sub(m, "resources")["memory"] = map[string]any{"min": "4GB", "max": "2GB"}
		sub(m, "image")["reference"] = ""
	})
	got := Validate(spec, testPolicy)
	want := []Violation{
		{Pointer: "#/spec/resources/cpu/min", Detail: "cpu.min (10) must not exceed cpu.max (5)"},
		{Pointer: "#/spec/resources/memory/min", Detail: "memory.min (4GB) must not exceed memory.max (2GB)"},
		{Pointer: "#/spec/metadata/labels/dcm.project~1managed-by", Detail: `label "dcm.project/managed-by" is reserved by DCM`},
		{Pointer: "#/spec/image/reference", Detail: "image.reference is required"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

func TestPointerAndOrder(t *testing.T) {
	if got := Pointer("spec", "metadata", "labels", "a~b/c"); got != "#/spec/metadata/labels/a~0b~1c" {
		t.Errorf("Pointer = %s", got)
	}
	vs := []Violation{{Detail: "id"}, {Pointer: "#/spec/network/ports/0/visibility", Detail: "v"}, {Pointer: "#/spec/metadata/labels/x", Detail: "l"},
		{Pointer: "#/spec/service_type", Detail: "s"}, {Pointer: "#/spec/resources/memory/max", Detail: "m"}, {Pointer: "#/spec/metadata/name", Detail: "n"},
		{Pointer: "#/spec/resources/cpu/max", Detail: "c"}, {Pointer: "#/spec", Detail: "spec"}, {Pointer: "#/other", Detail: "o"}}
	SortViolations(vs)
	var got []string
	for _, v := range vs {
		got = append(got, v.Detail)
	}
	if want := []string{"c", "m", "l", "s", "n", "v", "spec", "o", "id"}; !slices.Equal(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
}

func TestValidateID(t *testing.T) {
	for id, ok := range map[string]bool{
		"a": true, "web-1": true, "123e4567-e89b-12d3-a456-426614174000": true, strings.Repeat("a", 63): true,
		"health": false, "": false, "-a": false, "a-": false, "A": false, "a_b": false, strings.Repeat("a", 64): false,
	} {
		if got := len(ValidateID("id", id)) == 0; got != ok {
			t.Errorf("ValidateID(%q) ok = %v, want %v", id, got, ok)
		}
	}
}

func TestParseQuantities(t *testing.T) {
	cpu := func(raw string) v1alpha1.CpuQuantity {
		var q v1alpha1.CpuQuantity
		if err := q.UnmarshalJSON([]byte(raw)); err != nil {
			t.Fatal(err)
		}
		return q
	}
	for raw, want := range map[string]string{`1`: "1", `"2"`: "2", `"500m"`: "500m", `"1500m"`: "1500m", `16`: "16"} {
		q, err := parseCPU(cpu(raw))
		if err != nil || q.String() != want {
			t.Errorf("parseCPU(%s) = %s, %v; want %s", raw, q.String(), err, want)
		}
	}
	for _, raw := range []string{`0`, `-1`, `1.5`, `"0"`, `"0m"`, `"1.5"`, `"1Gi"`, `true`, `null`, `"2000000"`} {
		if q, err := parseCPU(cpu(raw)); err == nil {
			t.Errorf("parseCPU(%s) = %s, want an error", raw, q.String())
		}
	}
}

// Memory: binary, as every DCM provider reads them: MB is Mi, GB is Gi, TB is Ti; the
// exact binary units (Mi, Gi, Ti, MiB, GiB, TiB) are the same values.
func TestParseMemory(t *testing.T) {
	for _, tc := range []struct {
		in    string
		bytes int64
		k8s   string
	}{
		{"1MB", 1 << 20, "1Mi"}, {"512MB", 512 << 20, "512Mi"}, {"2GB", 2 << 30, "2Gi"}, {"1TB", 1 << 40, "1Ti"}, {"1024MB", 1 << 30, "1Gi"},
		{"512Mi", 512 << 20, "512Mi"}, {"2Gi", 2 << 30, "2Gi"}, {"1Ti", 1 << 40, "1Ti"},
		{"512MiB", 512 << 20, "512Mi"}, {"2GiB", 2 << 30, "2Gi"}, {"1TiB", 1 << 40, "1Ti"}, {"1536MiB", 1536 << 20, "1536Mi"},
	} {
		q, err := parseMemory(tc.in)
		if err != nil || q.Value() != tc.bytes || q.String() != tc.k8s {
			t.Errorf("parseMemory(%s) = %d (%s), %v; want %d (%s)", tc.in, q.Value(), q.String(), err, tc.bytes, tc.k8s)
		}
	}
	for _, tc := range []struct {
		in, want string // want: in the error
	}{
		{"", "is not a memory quantity"}, {"1", "is not a memory quantity"}, {"1mb", "is not a memory quantity"},
		{"1gi", "is not a memory quantity"}, {"1GIB", "is not a memory quantity"}, {"1G", "is not a memory quantity"},
		{"1KB", "is not a memory quantity"}, {"1Ki", "is not a memory quantity"}, {"1M", "is not a memory quantity"},
		{"1.5GB", "is not a memory quantity"}, {"1.5Gi", "is not a memory quantity"}, {"-1GB", "is not a memory quantity"},
		{" 1GB", "is not a memory quantity"}, {"1 GiB", "is not a memory quantity"}, {"1Gib", "is not a memory quantity"},
		{"0GB", "memory must be more than 0"}, {"0Gi", "memory must be more than 0"}, {"0MiB", "memory must be more than 0"},
		{"4194305TB", "is too large"}, {"4194305Ti", "is too large"}, {"4194305TiB", "is too large"},
	} {
		_, err := parseMemory(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseMemory(%q) = %v; want an error with %q", tc.in, err, tc.want)
		}
	}
	// The refusal names every unit and says MB, GB and TB are binary.
	_, err := parseMemory("2G")
	for _, w := range []string{"MB, GB or TB (read as MiB, GiB and TiB)", "Mi, Gi, Ti, MiB, GiB or TiB"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("parseMemory(\"2G\") = %v; want it to say %q", err, w)
		}
	}
}

// testPolicy is the policy of the tests that are not about it: the fixtures' labels
// carry example.com/, which a provider allows only when its operator says so.
var testPolicy = Policy{LabelPrefixes: []string{"example.com/"}}

// A cpu number that is not a whole number of cores says what to write instead: DCM's
// contract has cores as an integer and fractions as a string of millicores.
func TestCPUNumberSaysWhatToWrite(t *testing.T) {
	for raw, want := range map[string]string{
		`0.5`:                           `0.5 is not a whole number of cores; use a string of millicores such as "500m"`,
		`1.25`:                          `1.25 is not a whole number of cores; use a string of millicores such as "1250m"`,
		`0.0005`:                        `0.0005 is not a whole number of cores, nor of millicores; use a string of millicores such as "500m"`,
		`1.0`:                           `1.0 is not written as a whole number of cores: write 1`,
		`2e0`:                           `2e0 is not written as a whole number of cores: write 2`,
		`0`:                             `0 is less than 1 core: use 1 or more, or a string of millicores such as "500m"`,
		`-2`:                            `-2 is less than 1 core: use 1 or more, or a string of millicores such as "500m"`,
		`-0.5`:                          `-0.5 is less than 1 core: use 1 or more, or a string of millicores such as "500m"`,
		`1e7`:                           `1e7 is more than 1000000 cores`,
		`0.` + strings.Repeat("5", 100): `0.` + strings.Repeat("5", 100) + ` is not a whole number of cores; use an integer, or a string of millicores such as "500m"`,
	} {
		var q v1alpha1.CpuQuantity
		if err := q.UnmarshalJSON([]byte(raw)); err != nil {
			t.Fatal(err)
		}
		_, err := parseCPU(q)
		if err == nil || err.Error() != want {
			t.Errorf("parseCPU(%s): %v\nwant %s", raw, err, want)
		}
	}
}

// The rules' texts are whole: clipped to MaxQuoted like a client's value, they were cut
// mid-word ("..., and mus… (247 bytes in all)"). The client's value is still clipped.
func TestRuleTextsAreWhole(t *testing.T) {
	long := strings.Repeat("x", 300) + "!"
	spec := mutate(t, func(m map[string]any) {
		sub(m, "process")["env"] = []any{map[string]any{"name": "1bad", "value": ""}, map[string]any{"name": long, "value": ""}}
		sub(m, "metadata", "labels")["bad key"] = "v"
	})
	got := Validate(spec, testPolicy)
	if len(got) != 3 {
		t.Fatalf("violations %q, want 3", got)
	}
	if want := `process.env[0].name "1bad" must be letters, digits, '_', '-' or '.', and not start with a digit (e.g. MY_VAR, my.var-1)`; got[1].Detail != want {
		t.Errorf("env name: %q\nwant %q", got[1].Detail, want)
	}
	if d := got[2].Detail; !strings.HasSuffix(d, string(envNameRule)) || !strings.Contains(d, "bytes in all") {
		t.Errorf("a long env name: the name clipped, the rule whole: %q", d)
	}
	if d := got[0].Detail; !strings.HasPrefix(d, `label "bad key": key: name part must consist of`) || !strings.HasSuffix(d, "')") || strings.Contains(d, "…") {
		t.Errorf("label key: the rule whole: %q", d)
	}
	// What Kubernetes accepts is accepted: '.' and '-' anywhere, '_' or a letter first.
	for _, name := range []string{"my.var-1", "MY_VAR", "_x", "-x", ".x", "a..b"} {
		if vs := validateEnv([]v1alpha1.EnvVar{{Name: name}}); len(vs) > 0 {
			t.Errorf("env name %q refused: %v", name, vs)
		}
	}
	for _, name := range []string{"1x", "a b", "a=b", ".", "..", "..x", "é"} {
		if vs := validateEnv([]v1alpha1.EnvVar{{Name: name}}); len(vs) == 0 {
			t.Errorf("env name %q accepted", name)
		}
	}
}

// A spec in any accepted memory unit is valid, runs with the binary value, and reads
// back (GET) as sent, not as the provider would write it.
func TestMemoryUnitsEchoedAsSent(t *testing.T) {
	for _, tc := range []struct {
		min, max           string
		minBytes, maxBytes int64
	}{
		{"512MB", "2GB", 512 << 20, 2 << 30},
		{"512Mi", "2Gi", 512 << 20, 2 << 30},
		{"512MiB", "2GiB", 512 << 20, 2 << 30},
		{"512Mi", "2GB", 512 << 20, 2 << 30},
		{"1024MiB", "1Ti", 1 << 30, 1 << 40},
		{"1GB", "1TiB", 1 << 30, 1 << 40},
	} {
		t.Run(tc.min+"-"+tc.max, func(t *testing.T) {
			spec := specJSON(t, validSpec)
			spec.Resources.Memory.Min, spec.Resources.Memory.Max = tc.min, tc.max
			if vs := Validate(spec, testPolicy); len(vs) > 0 {
				t.Fatalf("violations %v", vs)
			}
			objs, err := Build("web", spec, Options{Namespace: "ns"})
			if err != nil {
				t.Fatal(err)
			}
			res := objs.Deployment.Spec.Template.Spec.Containers[0].Resources
			if r, l := res.Requests.Memory().Value(), res.Limits.Memory().Value(); r != tc.minBytes || l != tc.maxBytes {
				t.Errorf("memory request %d, limit %d; want %d and %d", r, l, tc.minBytes, tc.maxBytes)
			}
			got := ToAPI(objs.Observed()).Spec.Resources.Memory
			if got.Min != tc.min || got.Max != tc.max {
				t.Errorf("read back memory %q..%q, want %q..%q as sent", got.Min, got.Max, tc.min, tc.max)
			}
		})
	}
}
