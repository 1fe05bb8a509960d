package image

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/distribution/reference"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"k8s.io/utils/lru"
)

// Options configure a Resolver.
type Options struct {
	// Mirrors maps a registry host (docker.io, quay.io, * for any) to the base URL of the
	// mirror the nodes pull it through (http://10.0.0.5:5000). A mirrored host is asked
	// nothing itself.
	Mirrors map[string]string
	// Skip lists registry hosts whose references are used as written, unresolved.
	Skip []string
	// Trusted lists hosts the operator named (exactly listed registries); only these and
	// the mirrors may resolve to a private or loopback address.
	Trusted []string
	// MaxBytes bounds an image's compressed size (0: no bound).
	MaxBytes int64
	// Keychain gives credentials per registry (nil: anonymous).
	Keychain authn.Keychain
}

// Resolved is what a reference resolved to.
type Resolved struct {
	// Pinned is what the pod names: repository@sha256:…, fully qualified, or the
	// reference as written when its registry is skipped.
	Pinned string
	// Digest is the manifest's (or index's) digest; empty when skipped.
	Digest string
}

// Resolver resolves image references to digests and checks what they name.
type Resolver struct {
	opts    Options
	puller  *remote.Puller
	checked *lru.Cache // digest → *Refusal (nil: passed); content-addressed, so never stale
}

// checkedEntries bounds the cache of checked digests.
const checkedEntries = 1024

// New makes a Resolver.
func New(o Options) (*Resolver, error) {
	kc := o.Keychain
	if kc == nil {
		kc = authn.NewMultiKeychain()
	}
	p, err := remote.NewPuller(remote.WithAuthFromKeychain(kc), remote.WithTransport(newTransport(o)),
		remote.WithUserAgent("k8s-container-sp"))
	if err != nil {
		return nil, err
	}
	return &Resolver{opts: o, puller: p, checked: lru.New(checkedEntries)}, nil
}

// Resolve resolves ref (valid per container.Validate) to a digest and checks the
// manifests a node may pull under it. A *Refusal means the image may never run; any
// other error that it cannot be told yet (unknown tag, registry unreachable).
func (r *Resolver) Resolve(ctx context.Context, ref string) (Resolved, error) {
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return Resolved{}, &Refusal{RuleMediaType, err.Error()}
	}
	if slices.Contains(r.opts.Skip, reference.Domain(named)) {
		return Resolved{Pinned: ref}, nil
	}
	full := named.String()
	if _, ok := named.(reference.Tagged); !ok {
		if _, ok := named.(reference.Digested); !ok {
			full = reference.TagNameOnly(named).String()
		}
	}
	nref, err := name.ParseReference(full, name.StrictValidation)
	if err != nil {
		return Resolved{}, &Refusal{RuleMediaType, err.Error()}
	}
	head, err := r.puller.Head(ctx, nref)
	if err != nil {
		return Resolved{}, err
	}
	if d, ok := named.(reference.Digested); ok && d.Digest().String() != head.Digest.String() {
		return Resolved{}, fmt.Errorf("the registry serves %s for %s", head.Digest, ref)
	}
	out := Resolved{Pinned: reference.TrimNamed(named).String() + "@" + head.Digest.String(), Digest: head.Digest.String()}
	if v, ok := r.checked.Get(head.Digest.String()); ok {
		if ref := v.(*Refusal); ref != nil {
			return Resolved{}, ref
		}
		return out, nil
	}
	refusal, err := r.check(ctx, nref.Context().Digest(head.Digest.String()))
	if err != nil {
		return Resolved{}, err
	}
	r.checked.Add(head.Digest.String(), refusal)
	if refusal != nil {
		return Resolved{}, refusal
	}
	return out, nil
}

// check reads the manifest at d and, for an index, each image manifest it lists.
func (r *Resolver) check(ctx context.Context, d name.Digest) (*Refusal, error) {
	desc, err := r.puller.Get(ctx, d)
	if err != nil {
		return nil, err
	}
	switch {
	case desc.MediaType.IsImage():
		return r.checkImage(desc.Manifest, d.String())
	case !desc.MediaType.IsIndex():
		return &Refusal{RuleMediaType, fmt.Sprintf("%s is %s", d, desc.MediaType)}, nil
	}
	var ix v1.IndexManifest
	if err := json.Unmarshal(desc.Manifest, &ix); err != nil {
		return nil, fmt.Errorf("reading the index %s: %w", d, err)
	}
	images, refusal := CheckIndex(&ix)
	if refusal != nil {
		return refusal, nil
	}
	for _, m := range images {
		child := d.Context().Digest(m.Digest.String())
		desc, err := r.puller.Get(ctx, child)
		if err != nil {
			return nil, err
		}
		if refusal, err := r.checkImage(desc.Manifest, child.String()); refusal != nil || err != nil {
			return refusal, err
		}
	}
	return nil, nil
}

func (r *Resolver) checkImage(raw []byte, where string) (*Refusal, error) {
	var m v1.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("reading the manifest %s: %w", where, err)
	}
	return CheckManifest(&m, r.opts.MaxBytes), nil
}

// Refused tells a Refusal from an error that may pass.
func Refused(err error) (*Refusal, bool) {
	var r *Refusal
	ok := errors.As(err, &r)
	return r, ok
}
