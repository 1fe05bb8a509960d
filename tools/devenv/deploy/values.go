package deploy

import (
	"fmt"
	"maps"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness"
)

// PodEndpoint is SP_ENDPOINT as each pod registers it: its own address, which DCM's
// registry on this machine reaches through the bridge (no kube-proxy makes the Service's
// address work here). POD_IP is set first, so Kubernetes expands $(POD_IP).
const PodEndpoint = "http://$(POD_IP):8080"

// Values are the chart values of an install: the image by its real name, the pods'
// URLs of NATS and DCM's registry, their own endpoint, and the test images' registry
// among those containers may pull from; extra values win. Everything else is the
// chart's default: the containers in a namespace of their own, the NetworkPolicies on.
func Values(imageRef, natsURL, registrationURL string, replicas int, extra map[string]any) (map[string]any, error) {
	ref, err := name.ParseReference(imageRef)
	if err != nil {
		return nil, fmt.Errorf("image %q: %w", imageRef, err)
	}
	tag, ok := ref.(name.Tag)
	if !ok {
		return nil, fmt.Errorf("image %q: the chart takes a repository and a tag, not a digest", imageRef)
	}
	repo := tag.Context().Name()
	if r := tag.Context(); r.RegistryStr() == name.DefaultRegistry && !strings.HasPrefix(imageRef, name.DefaultRegistry) {
		repo = "docker.io/" + r.RepositoryStr() // as written by people, and as containerd resolves it
	}
	v := map[string]any{
		"image":           map[string]any{"repository": repo, "tag": tag.TagStr()},
		"replicas":        replicas,
		"natsURL":         natsURL,
		"registrationURL": registrationURL,
		"extraEnv": []any{
			map[string]any{"name": "POD_IP", "valueFrom": map[string]any{"fieldRef": map[string]any{"fieldPath": "status.podIP"}}},
			map[string]any{"name": "SP_ENDPOINT", "value": PodEndpoint},
			// The service's default registries and the test images' (example.invalid).
			map[string]any{"name": "SP_IMAGE_REGISTRIES", "value": harness.ImageRegistries},
			// The node's registry listens on the host's loopback, which a pod cannot reach.
			map[string]any{"name": "SP_IMAGE_RESOLVE", "value": "false"},
		},
	}
	maps.Copy(v, extra)
	return v, nil
}
