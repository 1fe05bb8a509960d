package image

import (
	"strings"
	"testing"
)

func TestParsePlatforms(t *testing.T) {
	cases := []struct {
		in      []string
		want    []string // platforms' String(), in order
		wantErr string
	}{
		{in: nil, want: []string{"linux/amd64", "linux/arm64"}},
		{in: []string{"linux/arm64", "linux/amd64"}, want: []string{"linux/arm64", "linux/amd64"}},
		{in: []string{" linux/arm64/v8"}, want: []string{"linux/arm64"}},
		{in: []string{"linux/amd64"}, want: []string{"linux/amd64"}},
		{in: []string{"linux/s390x"}, wantErr: `unknown platform "linux/s390x" (supported: linux/amd64, linux/arm64)`},
		{in: []string{"windows/amd64"}, wantErr: `unknown platform "windows/amd64"`},
		{in: []string{"linux/amd64/v2"}, wantErr: `unknown platform "linux/amd64/v2"`},
		{in: []string{""}, wantErr: `unknown platform ""`},
		{in: []string{"linux/amd64", "linux/amd64"}, wantErr: `platform "linux/amd64" given twice`},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.in, ","), func(t *testing.T) {
			got, err := parsePlatforms(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, p := range got {
				names = append(names, p.String())
			}
			if strings.Join(names, ",") != strings.Join(tc.want, ",") {
				t.Errorf("got %v, want %v", names, tc.want)
			}
		})
	}
}

func TestResolve(t *testing.T) {
	ok := Options{Root: ".", OutDir: "out", Version: "v1.2.3", Revision: "abc"}
	with := func(f func(*Options)) Options { o := ok; f(&o); return o }
	cases := []struct {
		name    string
		opts    Options
		wantRef string
		wantErr string
	}{
		{name: "defaults", opts: ok, wantRef: "quay.io/dcm-project/k8s-container-service-provider:v1.2.3"},
		{name: "git describe version", opts: with(func(o *Options) { o.Version = "v1.2.3-4-gabcdef0-dirty" }),
			wantRef: "quay.io/dcm-project/k8s-container-service-provider:v1.2.3-4-gabcdef0-dirty"},
		{name: "local registry ref", opts: with(func(o *Options) { o.Ref = "127.0.0.1:5000/dcm/sp:dev" }), wantRef: "127.0.0.1:5000/dcm/sp:dev"},
		{name: "no version", opts: with(func(o *Options) { o.Version = "" }), wantErr: "no version given"},
		{name: "no revision", opts: with(func(o *Options) { o.Revision = "" }), wantErr: "no revision given"},
		{name: "no root", opts: with(func(o *Options) { o.Root = "" }), wantErr: "no repository root"},
		{name: "no out", opts: with(func(o *Options) { o.OutDir = "" }), wantErr: "no output folder"},
		{name: "space in version", opts: with(func(o *Options) { o.Version = "v1 -X x" }), wantErr: "must not contain spaces"},
		{name: "version not a tag", opts: with(func(o *Options) { o.Version = "v1+meta" }), wantErr: "is not registry/repository:tag"},
		{name: "ref without tag", opts: with(func(o *Options) { o.Ref = "quay.io/dcm/sp" }), wantErr: "is not registry/repository:tag"},
		{name: "ref with digest", opts: with(func(o *Options) { o.Ref = "quay.io/dcm/sp@sha256:" + strings.Repeat("0", 64) }), wantErr: "is not registry/repository:tag"},
		{name: "ref without registry", opts: with(func(o *Options) { o.Ref = "sp:v1" }), wantErr: "is not registry/repository:tag"},
		{name: "upper case repository", opts: with(func(o *Options) { o.Ref = "quay.io/DCM/sp:v1" }), wantErr: "is not registry/repository:tag"},
		{name: "unknown platform", opts: with(func(o *Options) { o.Platforms = []string{"linux/riscv64"} }), wantErr: `unknown platform "linux/riscv64"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := tc.opts.resolve()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || strings.Contains(err.Error(), "\n") {
					t.Fatalf("error %v, want one line containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.tag.String() != tc.wantRef || r.Package != DefaultPackage || len(r.platforms) != 2 {
				t.Errorf("ref %q package %q platforms %v, want ref %q", r.tag, r.Package, r.platforms, tc.wantRef)
			}
		})
	}
}
