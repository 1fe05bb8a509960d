package config

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/internal/image"
)

// Images are how the provider resolves and checks the images containers name before
// any pod runs them (internal/image).
type Images struct {
	Resolve     bool          `env:"SP_IMAGE_RESOLVE" envDefault:"true" help:"resolve each image reference to a digest and check its manifests before any pod runs it; the pod names repository@sha256:..., so a restart runs the same bytes (false: the pod names the reference as sent)"`
	Timeout     time.Duration `env:"SP_IMAGE_RESOLVE_TIMEOUT" envDefault:"5s" help:"how long a create waits for the registry; past it the create still answers 201 and the container stays PENDING until the provider resolves the image"`
	Mirrors     string        `env:"SP_IMAGE_MIRRORS" help:"registries to resolve through a mirror, as the nodes pull them, comma-separated HOST=URL: docker.io=https://mirror.example.com, *=http://10.0.0.5:5000 (every registry); the mirror is asked with ns=HOST, as containerd asks"`
	Skip        string        `env:"SP_IMAGE_RESOLVE_SKIP" help:"registry hosts whose references the pod gets as sent, unresolved and unchecked, comma-separated (like Knative's registries-skipping-tag-resolving)"`
	PullSecrets string        `env:"SP_IMAGE_PULL_SECRETS" help:"names of kubernetes.io/dockerconfigjson Secrets in SP_K8S_NAMESPACE, comma-separated: every pod gets them as imagePullSecrets, and the provider resolves images with them (read every minute; the Role must grant get on them). Every tenant's pod can then pull what they grant"`
	MaxBytes    string        `env:"SP_MAX_IMAGE_BYTES" envDefault:"2Gi" help:"largest image a container may run, compressed (config and layers of each platform's manifest), a Kubernetes quantity; 0 = none"`
}

// mirrors parses SP_IMAGE_MIRRORS (validated).
func (i Images) mirrors() map[string]string {
	m := map[string]string{}
	for _, e := range list(i.Mirrors) {
		host, u, _ := strings.Cut(e, "=")
		m[strings.TrimSpace(host)] = strings.TrimSpace(u)
	}
	return m
}

// PullSecretNames are SP_IMAGE_PULL_SECRETS.
func (c *Config) PullSecretNames() []string { return list(c.Images.PullSecrets) }

// ResolverOptions are the image.Options the settings make; trusted are the registry
// hosts the operator listed exactly, which may be private addresses.
func (c *Config) ResolverOptions() image.Options {
	maxBytes, _ := resource.ParseQuantity(c.Images.MaxBytes)
	var trusted []string
	for _, e := range list(c.Tenants.ImageRegistries) {
		if !strings.ContainsAny(e, "*/") {
			trusted = append(trusted, container.RegistryHost(e))
		}
	}
	return image.Options{Mirrors: c.Images.mirrors(), Skip: list(c.Images.Skip), Trusted: trusted, MaxBytes: maxBytes.Value()}
}

func (i Images) validate() []string {
	var p []string
	for _, e := range list(i.Mirrors) {
		host, raw, ok := strings.Cut(e, "=")
		u, err := url.Parse(strings.TrimSpace(raw))
		switch {
		case !ok || strings.TrimSpace(host) == "":
			p = append(p, fmt.Sprintf("SP_IMAGE_MIRRORS: %q is not HOST=URL (e.g. docker.io=https://mirror.example.com)", e))
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/"):
			p = append(p, fmt.Sprintf("SP_IMAGE_MIRRORS: %q: the mirror must be an http:// or https:// URL with a host and no path", e))
		}
	}
	for _, h := range list(i.Skip) {
		if container.RegistryEntryProblem(h) != "" || strings.ContainsAny(h, "*/") {
			p = append(p, fmt.Sprintf("SP_IMAGE_RESOLVE_SKIP: %q is not a registry host", h))
		}
	}
	if q, err := resource.ParseQuantity(i.MaxBytes); err != nil || q.Sign() < 0 {
		p = append(p, fmt.Sprintf("SP_MAX_IMAGE_BYTES=%q: not a Kubernetes quantity of 0 or more (e.g. 2Gi)", i.MaxBytes))
	}
	for _, n := range list(i.PullSecrets) {
		if len(validation.IsDNS1123Subdomain(n)) > 0 {
			p = append(p, fmt.Sprintf("SP_IMAGE_PULL_SECRETS: %q is not a Secret name", n))
		}
	}
	if i.Timeout <= 0 {
		p = append(p, "SP_IMAGE_RESOLVE_TIMEOUT: must be more than 0")
	}
	return p
}
