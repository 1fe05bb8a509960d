package image

import (
	"fmt"
	"strconv"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Title is the image's org.opencontainers.image.title: the binary's name.
const Title = "k8s-container-sp"

// Port is the service's HTTP port (SP_LISTEN's default), the image's exposed port.
const Port = "8080/tcp"

// defaultPath is the PATH the image's processes get; the image has no shell or tools, but
// an exec'd process expects a PATH, and this one is the usual Linux default.
const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Labels are the image's OCI labels, also its annotations: where it comes from and what
// it is. No created time: it would change the digest on every build.
func Labels(version, revision string) map[string]string {
	return map[string]string{
		"org.opencontainers.image.source":   Source,
		"org.opencontainers.image.revision": revision,
		"org.opencontainers.image.version":  version,
		"org.opencontainers.image.licenses": "Apache-2.0",
		"org.opencontainers.image.title":    Title,
	}
}

// configFile is one platform's image config: the non-root numeric user, the entrypoint,
// the port, PATH only, the labels, and the epoch as every time. history says what each
// layer holds (docker history shows it).
func configFile(p platform, labels map[string]string, diffIDs []v1.Hash) *v1.ConfigFile {
	created := v1.Time{Time: epoch}
	return &v1.ConfigFile{
		Created:      created,
		OS:           p.v1.OS,
		Architecture: p.v1.Architecture,
		Variant:      p.v1.Variant,
		Config: v1.Config{
			User:         strconv.Itoa(nonRootUID) + ":" + strconv.Itoa(nonRootUID),
			Entrypoint:   []string{binaryPath},
			ExposedPorts: map[string]struct{}{Port: {}},
			Env:          []string{defaultPath},
			Labels:       labels,
		},
		RootFS: v1.RootFS{Type: "layers", DiffIDs: diffIDs},
		History: []v1.History{
			{Created: created, CreatedBy: "make image: CA certificates, /etc/passwd, /etc/group, /tmp", Comment: "k8s-container-sp base files"},
			{Created: created, CreatedBy: "make image: go build " + DefaultPackage + " for " + p.String(), Comment: "k8s-container-sp binary"},
		},
	}
}

// platformImage is p's image: the shared base layer, p's binary layer and p's config, as
// an OCI manifest with the labels as annotations.
func platformImage(p platform, base, bin v1.Layer, labels map[string]string) (v1.Image, error) {
	var diffIDs []v1.Hash
	for _, l := range []v1.Layer{base, bin} {
		d, err := l.DiffID()
		if err != nil {
			return nil, err
		}
		diffIDs = append(diffIDs, d)
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.AppendLayers(img, base, bin)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	// The config is replaced whole: AppendLayers' history entries have no time.
	if img, err = mutate.ConfigFile(img, configFile(p, labels, diffIDs)); err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return mutate.Annotations(img, labels).(v1.Image), nil
}

// index is the multi-platform index of imgs (in platforms' order) with the labels as
// annotations.
func index(platforms []platform, imgs []v1.Image, labels map[string]string) v1.ImageIndex {
	var adds []mutate.IndexAddendum
	for i, img := range imgs {
		pl := platforms[i].v1
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &pl}})
	}
	idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...)
	return mutate.Annotations(idx, labels).(v1.ImageIndex)
}
