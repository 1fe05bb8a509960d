package image

import (
	"fmt"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Rules an image can break; a refusal names its rule.
const (
	// RuleForeignURLs: a descriptor names URLs of its own, which containerd fetches from
	// the node's network before it asks the registry.
	RuleForeignURLs = "foreign-urls"
	// RuleNonDistributable: a layer the node must fetch from somewhere other than the
	// registry.
	RuleNonDistributable = "non-distributable-layer"
	// RuleTooLarge: the compressed image is above SP_MAX_IMAGE_BYTES.
	RuleTooLarge = "image-too-large"
	// RuleTooManyManifests: an index lists more manifests than one create may check.
	RuleTooManyManifests = "too-many-manifests"
	// RuleMediaType: neither an OCI or Docker image nor an index of them.
	RuleMediaType = "unsupported-media-type"
)

// MaxManifests is how many image manifests of one index are checked; an index with
// more is refused, so one reference costs a bounded number of registry requests.
const MaxManifests = 32

// Refusal is why an image may not run: the rule it breaks and where.
type Refusal struct {
	Rule   string
	Detail string
}

func (r *Refusal) Error() string { return fmt.Sprintf("image refused (%s): %s", r.Rule, r.Detail) }

// CheckManifest checks one image manifest: no descriptor names URLs, every layer is
// distributable, and config and layers together are at most maxBytes (0: no limit).
func CheckManifest(m *v1.Manifest, maxBytes int64) *Refusal {
	if len(m.Config.URLs) > 0 {
		return &Refusal{RuleForeignURLs, "the config names " + m.Config.URLs[0]}
	}
	total := max(m.Config.Size, 0)
	for i, l := range m.Layers {
		if len(l.URLs) > 0 {
			return &Refusal{RuleForeignURLs, fmt.Sprintf("layer %d names %s", i, l.URLs[0])}
		}
		if !l.MediaType.IsDistributable() {
			return &Refusal{RuleNonDistributable, fmt.Sprintf("layer %d is %s", i, l.MediaType)}
		}
		total += max(l.Size, 0)
	}
	if maxBytes > 0 && total > maxBytes {
		return &Refusal{RuleTooLarge, fmt.Sprintf("%d bytes compressed, above %d (SP_MAX_IMAGE_BYTES)", total, maxBytes)}
	}
	return nil
}

// CheckIndex checks an index's own descriptors and returns the image manifests a node
// may pull from it: every entry but attestations, which no runtime pulls.
func CheckIndex(ix *v1.IndexManifest) ([]v1.Descriptor, *Refusal) {
	var images []v1.Descriptor
	for i, d := range ix.Manifests {
		if len(d.URLs) > 0 {
			return nil, &Refusal{RuleForeignURLs, fmt.Sprintf("manifest %d names %s", i, d.URLs[0])}
		}
		if attestation(d) {
			continue
		}
		if !d.MediaType.IsImage() {
			return nil, &Refusal{RuleMediaType, fmt.Sprintf("manifest %d is %s", i, d.MediaType)}
		}
		images = append(images, d)
	}
	if len(images) > MaxManifests {
		return nil, &Refusal{RuleTooManyManifests, fmt.Sprintf("%d image manifests, above %d", len(images), MaxManifests)}
	}
	return images, nil
}

// attestation tells BuildKit's provenance and SBOM manifests, listed beside the
// platforms with platform unknown/unknown.
func attestation(d v1.Descriptor) bool {
	if d.Annotations["vnd.docker.reference.type"] == "attestation-manifest" {
		return true
	}
	return d.Platform != nil && d.Platform.OS == "unknown" && d.Platform.Architecture == "unknown"
}
