package container

import (
	"fmt"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
)

// openapi.yaml is the contract: its limits and ours must be the same numbers.
func TestLimitsMatchTheContract(t *testing.T) {
	doc, err := v1alpha1.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	schemas := doc.Components.Schemas
	prop := func(schema, name string) *openapiSchema {
		return (*openapiSchema)(schemas[schema].Value.Properties[name].Value)
	}
	for _, c := range []struct {
		what      string
		got, want uint64
	}{
		{"labels maxProperties", ptrOr(prop("ContainerMetadata", "labels").MaxProps), MaxLabels},
		{"env maxItems", ptrOr(prop("ContainerProcess", "env").MaxItems), MaxEnv},
		{"command maxItems", ptrOr(prop("ContainerProcess", "command").MaxItems), MaxArgs},
		{"args maxItems", ptrOr(prop("ContainerProcess", "args").MaxItems), MaxArgs},
		{"command item maxLength", ptrOr(prop("ContainerProcess", "command").Items.Value.MaxLength), MaxArg},
		{"env name maxLength", ptrOr(prop("EnvVar", "name").MaxLength), MaxEnvName},
		{"env value maxLength", ptrOr(prop("EnvVar", "value").MaxLength), MaxEnvValue},
		{"ports maxItems", ptrOr(prop("ContainerNetwork", "ports").MaxItems), MaxPorts},
		{"provider_hints maxProperties", ptrOr(prop("ContainerSpec", "provider_hints").MaxProps), MaxHintKeys},
	} {
		if c.got != c.want {
			t.Errorf("%s: openapi.yaml says %d, the code %d", c.what, c.got, c.want)
		}
	}
	// The memory units the schema lets through are the ones the code reads.
	if got, want := schemas["MemoryQuantity"].Value.Pattern, memString.String(); got != want {
		t.Errorf("MemoryQuantity pattern: openapi.yaml says %s, the code %s", got, want)
	}
	desc := schemas["ContainerSpec"].Value.Description + schemas["ContainerSpec"].Value.Properties["provider_hints"].Value.Description
	for _, n := range []int{DefaultMaxObjectBytes, MaxHintBytes, MaxHintDepth} {
		if !strings.Contains(desc, fmt.Sprint(n)) {
			t.Errorf("openapi.yaml does not state the limit %d", n)
		}
	}
}

func TestLongListsCostOneViolation(t *testing.T) {
	many := func(n int) *[]v1alpha1.EnvVar {
		env := make([]v1alpha1.EnvVar, n)
		for i := range env {
			env[i] = v1alpha1.EnvVar{Name: "1bad", Value: "x"} // each one invalid, and all duplicates
		}
		return &env
	}
	hints := func(depth int) *map[string]any {
		var v any = "leaf"
		for range depth {
			v = map[string]any{"k": v}
		}
		m := v.(map[string]any)
		return &m
	}
	for _, tc := range []struct {
		name string
		edit func(*v1alpha1.ContainerSpec)
		want []string
	}{
		{"40,000 env entries: one violation", func(s *v1alpha1.ContainerSpec) { s.Process = &v1alpha1.ContainerProcess{Env: many(40000)} },
			[]string{"process.env has 40000 entries; at most 128 are allowed"}},
		{"at the limit each entry is checked", func(s *v1alpha1.ContainerSpec) { s.Process = &v1alpha1.ContainerProcess{Env: many(2)} },
			[]string{`process.env[0].name "1bad"`, `process.env[1].name "1bad"`, `process.env[1].name "1bad" is already set`}},
		{"too many args", func(s *v1alpha1.ContainerSpec) {
			args := make([]string, MaxArgs+1)
			s.Process = &v1alpha1.ContainerProcess{Args: &args}
		}, []string{"process.args has 257 entries"}},
		{"provider_hints at the depth limit", func(s *v1alpha1.ContainerSpec) { s.ProviderHints = hints(MaxHintDepth) }, nil},
		{"provider_hints too deep", func(s *v1alpha1.ContainerSpec) { s.ProviderHints = hints(MaxHintDepth + 1) },
			[]string{"provider_hints is nested 9 levels deep; at most 8"}},
		{"provider_hints too big", func(s *v1alpha1.ContainerSpec) {
			s.ProviderHints = &map[string]any{"blob": strings.Repeat("x", MaxHintBytes)}
		}, []string{"provider_hints is 16395 bytes as JSON; at most 16384"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := specJSON(t, validSpec)
			spec.Process = nil
			tc.edit(spec)
			vs := Validate(spec, testPolicy)
			if len(vs) != len(tc.want) {
				t.Fatalf("violations %v, want %d", vs, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(vs[i].Detail, w) {
					t.Errorf("violation %d: %q, want %q", i, vs[i].Detail, w)
				}
			}
		})
	}
}

func TestCheckSize(t *testing.T) {
	spec := specJSON(t, validSpec)
	env := []v1alpha1.EnvVar{}
	for i := range 40 {
		env = append(env, v1alpha1.EnvVar{Name: fmt.Sprintf("V%d", i), Value: strings.Repeat("x", 8000)})
	}
	spec.Process = &v1alpha1.ContainerProcess{Env: &env}
	if vs := Validate(spec, testPolicy); len(vs) > 0 {
		t.Fatalf("every field is within its own limit: %v", vs)
	}
	objs, err := Build("web", spec, Options{Namespace: "ns"})
	if err != nil {
		t.Fatal(err)
	}
	vs := CheckSize(objs, DefaultMaxObjectBytes)
	if len(vs) != 1 || vs[0].Pointer != "#/spec" || !strings.Contains(vs[0].Detail, "at most 8192") {
		t.Errorf("CheckSize = %v", vs)
	}
	small, _ := Build("web", specJSON(t, validSpec), Options{Namespace: "ns"})
	if vs := CheckSize(small, DefaultMaxObjectBytes); vs != nil {
		t.Errorf("an ordinary container: %v", vs)
	}
}

func TestCapped(t *testing.T) {
	vs := make([]Violation, 80)
	got, more := Capped(vs)
	if len(got) != MaxViolations || more != 30 {
		t.Errorf("Capped: %d and %d more", len(got), more)
	}
	if got, more := Capped(vs[:3]); len(got) != 3 || more != 0 {
		t.Errorf("Capped(3): %d and %d more", len(got), more)
	}
}

type openapiSchema = openapi3.Schema

func ptrOr(p *uint64) uint64 {
	if p == nil {
		return 0
	}
	return *p
}
