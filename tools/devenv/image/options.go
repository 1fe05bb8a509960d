package image

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// DefaultRepository is where DCM's provider chart looks for this provider's image (its
// default image name; the tag is the version).
const DefaultRepository = "quay.io/dcm-project/k8s-container-service-provider"

// DefaultPackage is the service's main package, built from the repository root.
const DefaultPackage = "./cmd/k8s-container-sp"

// Source is the image's org.opencontainers.image.source.
const Source = "https://github.com/dcm-project/k8s-container-sp"

// Options is what one build needs. Version and Revision are required: they go into the
// binary and the labels, so leaving them to a default would make two different builds
// look alike.
type Options struct {
	Root      string   // the repository root (the service's module)
	Package   string   // the main package, relative to Root; DefaultPackage when empty
	Version   string   // e.g. v1.2.3 or git describe's output
	Revision  string   // the source commit
	Ref       string   // the image reference; DefaultRepository:Version when empty
	Platforms []string // os/arch, e.g. linux/amd64; both supported ones when empty
	OutDir    string   // where the layout folder and the tarball go
}

// platform is one supported target: what go build needs and what the image says.
type platform struct {
	goos, goarch string
	v1           v1.Platform
}

func (p platform) String() string { return p.goos + "/" + p.goarch }

// supported are the platforms the image is built for: the service's deployment targets.
// arm64 says its variant (v8) as registries and engines expect for arm64 images.
var supported = []platform{
	{goos: "linux", goarch: "amd64", v1: v1.Platform{OS: "linux", Architecture: "amd64"}},
	{goos: "linux", goarch: "arm64", v1: v1.Platform{OS: "linux", Architecture: "arm64", Variant: "v8"}},
}

// DefaultPlatforms are all supported platforms, amd64 first (the tarball's docker
// manifest.json describes the first).
func DefaultPlatforms() []string {
	var out []string
	for _, p := range supported {
		out = append(out, p.String())
	}
	return out
}

// parsePlatforms resolves os/arch names (an arm64 "/v8" suffix is accepted), in the
// given order, refusing unknown and repeated ones.
func parsePlatforms(names []string) ([]platform, error) {
	if len(names) == 0 {
		names = DefaultPlatforms()
	}
	var out []platform
	for _, n := range names {
		n = strings.TrimSpace(n)
		i := slices.IndexFunc(supported, func(p platform) bool {
			return n == p.String() || (p.v1.Variant != "" && n == p.String()+"/"+p.v1.Variant)
		})
		if i < 0 {
			return nil, fmt.Errorf("unknown platform %q (supported: %s)", n, strings.Join(DefaultPlatforms(), ", "))
		}
		if slices.ContainsFunc(out, func(p platform) bool { return p.String() == supported[i].String() }) {
			return nil, fmt.Errorf("platform %q given twice", n)
		}
		out = append(out, supported[i])
	}
	return out, nil
}

// resolved is Options checked and completed.
type resolved struct {
	Options
	tag       name.Tag
	platforms []platform
}

func (o Options) resolve() (resolved, error) {
	r := resolved{Options: o}
	switch {
	case o.Root == "":
		return r, errors.New("no repository root given")
	case o.OutDir == "":
		return r, errors.New("no output folder given")
	case o.Version == "":
		return r, errors.New("no version given (VERSION)")
	case o.Revision == "":
		return r, errors.New("no revision given (REVISION)")
	case strings.ContainsAny(o.Version+o.Revision, " \t\n'\""):
		// They are passed to the linker as -X values: a space would split them.
		return r, fmt.Errorf("version %q and revision %q must not contain spaces or quotes", o.Version, o.Revision)
	}
	if r.Package == "" {
		r.Package = DefaultPackage
	}
	if r.Ref == "" {
		r.Ref = DefaultRepository + ":" + o.Version
	}
	// A tag, not a digest: the tarball's manifest.json and the layout name the image by it.
	tag, err := parseTag(r.Ref)
	if err != nil {
		return r, err
	}
	r.tag = tag
	if r.platforms, err = parsePlatforms(o.Platforms); err != nil {
		return r, err
	}
	abs, err := filepath.Abs(o.Root)
	if err != nil {
		return r, err
	}
	r.Root = abs
	return r, nil
}

// parseTag reads ref as registry/repository:tag, all explicit: the name the image is
// written and pushed under should not depend on a default registry.
func parseTag(ref string) (name.Tag, error) {
	tag, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		return tag, fmt.Errorf("image reference %q is not registry/repository:tag (%s)", ref, strings.TrimRight(err.Error(), ": "))
	}
	return tag, nil
}
