package model

import (
	"bytes"
	"slices"
	"testing"

	"github.com/dcm-project/k8s-container-sp/tools/devenv/bench"
)

// Each target is met or missed by its own figure, and the report says it is a model.
func TestChecks(t *testing.T) {
	small := SizeResult{Containers: 1000, ReadLoad: bench.ReadLoad{ListPage: Dist{P50: 1}, ListGet: Dist{P50: 0.2}}}
	good := SizeResult{Containers: 25000, SyncedS: 12, ReadLoad: bench.ReadLoad{ListPage: Dist{P50: 1.4}, ListGet: Dist{P50: 0.2}},
		Idle: Memory{RSSBytes: 150 << 20}, AfterReads: Memory{RSSBytes: 180 << 20}}
	for _, tc := range []struct {
		name   string
		sizes  []SizeResult
		missed []string // the checks missed, by What
		checks int
	}{
		{"all met", []SizeResult{small, good}, nil, 4},
		{"no 25,000: no checks", []SizeResult{small}, nil, 0},
		{"no 1,000: no ratio", []SizeResult{good}, nil, 3},
		{"RSS after reads and sync missed", []SizeResult{small, func() SizeResult {
			b := good
			b.AfterReads.RSSBytes, b.SyncedS = 205<<20, 20.5
			return b
		}()}, []string{"RSS at 25000, after the reads", "start to synced at 25000"}, 4},
		{"ratio missed", []SizeResult{small, func() SizeResult {
			b := good
			b.ListPage.P50 = 1.6
			return b
		}()}, []string{"LIST page p50 at 25000 / at 1000, each in GETs of one container timed between its pages"}, 4},
		{"a machine slower at 25,000 is taken out", []SizeResult{small, func() SizeResult {
			b := good
			b.ListPage.P50, b.ListGet.P50 = 2, 0.3
			return b
		}()}, nil, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Report{Sizes: tc.sizes}
			checks := r.Checks()
			if len(checks) != tc.checks {
				t.Fatalf("%d checks, want %d: %+v", len(checks), tc.checks, checks)
			}
			var missed []string
			for _, c := range checks {
				if !c.OK {
					missed = append(missed, c.What)
				}
			}
			if len(missed) != len(tc.missed) {
				t.Fatalf("missed %q, want %q", missed, tc.missed)
			}
			for i := range missed {
				if missed[i] != tc.missed[i] {
					t.Errorf("missed %q, want %q", missed, tc.missed)
				}
			}
			md := r.Markdown()
			for _, want := range []string{"This is a model", "What the model leaves out"} {
				if !bytes.Contains(md, []byte(want)) {
					t.Errorf("the report does not say %q", want)
				}
			}
		})
	}
}

// The service's process runs with the binary's collector and no memory limit: the RSS
// target is measured without one.
func TestDefaultGC(t *testing.T) {
	env := []string{"PATH=/bin", "GOMEMLIMIT=120MiB", "GOGC=200", "GOGCX=1", "HOME=/root"}
	got := defaultGC(env)
	if want := []string{"PATH=/bin", "GOGCX=1", "HOME=/root", "GOGC=50"}; !slices.Equal(got, want) {
		t.Errorf("defaultGC = %q, want %q", got, want)
	}
	if env[1] != "GOMEMLIMIT=120MiB" {
		t.Errorf("defaultGC changed its input: %q", env)
	}
	r := &Report{Sizes: []SizeResult{{Containers: 25000}}}
	if c := r.Checks()[0]; c.Target != "≤ 204 MB (the chart's limit, 256 MiB, with room), measured without a limit" {
		t.Errorf("RSS target %q", c.Target)
	}
}
