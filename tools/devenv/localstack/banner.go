package localstack

import (
	"fmt"
	"strings"

	"github.com/dcm-project/k8s-container-sp/internal/redact"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness"
)

// ExampleSpec is the container the banner's commands create.
const ExampleSpec = `{"spec":{"service_type":"container","metadata":{"name":"hello"},` +
	`"image":{"reference":"quay.io/example/hello:v1"},` +
	`"resources":{"cpu":{"min":1,"max":2},"memory":{"min":"128MB","max":"256MB"}},` +
	`"network":{"ports":[{"container_port":8080,"visibility":"internal"}]}}}`

// exampleSpec is ExampleSpec, with the real node's web test image when there is one:
// the real node pulls only from its own registry, where that image is.
func (s *Stack) exampleSpec() string {
	if s.RealNode == nil {
		return ExampleSpec
	}
	return strings.Replace(ExampleSpec, "quay.io/example/hello:v1", harness.TestImage("web"), 1)
}

// Commands are the copy-paste commands the banner shows, in order. With TLS on, the
// service's are HTTPS and trust the service's certificate file (enough for a
// self-signed one).
func (s *Stack) Commands() []string {
	api := s.ServiceURL + "/api/v1alpha1/containers"
	curl := "curl -s"
	if s.CACert != "" {
		curl += " --cacert " + s.CACert
	}
	spec := s.exampleSpec()
	regSpec := strings.Replace(spec, `{"spec":`, `{"provider_name":"k8s-container-sp","spec":`, 1)
	regSpec = strings.Replace(regSpec, `"name":"hello"`, `"name":"hello-dcm"`, 1)
	return []string{
		fmt.Sprintf(`%s -X POST '%s?id=hello' -H 'Content-Type: application/json' -d '%s'`, curl, api, spec),
		fmt.Sprintf(`%s %s/hello`, curl, api),
		fmt.Sprintf(`%s '%s?max_page_size=10'`, curl, api),
		fmt.Sprintf(`curl -s -X POST '%s/service-type-instances?id=hello-dcm' -H 'Content-Type: application/json' -d '%s'`, s.RegistryURL, regSpec),
		fmt.Sprintf(`curl -s %s/service-type-instances/hello-dcm`, s.RegistryURL),
		fmt.Sprintf(`%s -X DELETE %s/hello -o /dev/null -w '%%{http_code}\n'`, curl, api),
	}
}

// Banner tells a newcomer where everything is and what to try.
func Banner(s *Stack) string {
	var b strings.Builder
	line := strings.Repeat("─", 78)
	fmt.Fprintf(&b, "\n%s\n k8s-container-sp is running, registered with DCM (provider id %s)\n%s\n", line, s.ProviderID, line)
	fmt.Fprintf(&b, " API         %s/api/v1alpha1/containers\n", s.ServiceURL)
	fmt.Fprintf(&b, " Health      %s/health\n", s.ServiceURL)
	fmt.Fprintf(&b, " Metrics     %s/metrics\n", s.ServiceURL)
	// Shown without credentials (a SP_NATS_URL or DCM_REGISTRATION_URL given to make
	// run may carry some); the copy-paste commands keep the URL as given.
	fmt.Fprintf(&b, " Registry    %s   (GET /providers, /service-type-instances)\n", redact.URL(s.RegistryURL))
	fmt.Fprintf(&b, " NATS        %s   (status events on dcm.container)\n", redact.URLs(s.NATSURL))
	fmt.Fprintf(&b, " Kubernetes  KUBECONFIG=%s   (namespace %s)\n", s.Kubeconfig, s.Namespace)
	fmt.Fprintf(&b, " Logs        %s\n", s.LogFile)
	if s.ImageRegistry != "" {
		fmt.Fprintf(&b, " Images      resolved to digests through %s, which holds %s;\n", s.ImageRegistry, exampleImage)
		fmt.Fprintf(&b, "             other names stay PENDING (not resolved): make run SP_IMAGE_RESOLVE=false runs any name on kwok\n")
	}
	runs := "kwok plays the kubelet"
	if n := s.RealNode; n != nil {
		runs = "a real kubelet runs it on " + n.Name
		fmt.Fprintf(&b, " Real node   %s: a real kubelet + containerd; every pod of namespace %s runs there\n", n.Name, s.Namespace)
		fmt.Fprintf(&b, "             image registry REGISTRY=%s: the node pulls every name from there and nowhere else\n", n.Registry)
		fmt.Fprintf(&b, "             test images there: %s (roles: %s)\n", harness.TestImage("<role>"), strings.Join(harness.TestImageRoles, ", "))
		fmt.Fprintf(&b, "             your own (make image, docker save or podman save), then create with image NAME:\n")
		fmt.Fprintf(&b, "               bin/sp-harness push-image IMAGE.tar NAME   (e.g. NAME docker.io/library/nginx:alpine)\n")
		fmt.Fprintf(&b, "             logs: %s, %s; containers' logs under /var/lib/sp-harness-realnode/pods\n", n.KubeletLog(), n.ContainerdLog())
	}
	fmt.Fprintln(&b)
	titles := []string{
		"Create a container (201, status PENDING):",
		"Read it (RUNNING once its pod runs; " + runs + "):",
		"List containers:",
		"Create one through DCM's registry (it calls this service):",
		"The registry's view (status from our events):",
		"Delete ours (204):",
	}
	for i, c := range s.Commands() {
		fmt.Fprintf(&b, " # %s\n  %s\n", titles[i], c)
	}
	fmt.Fprintf(&b, "\n Status events are printed below as they are published. Ctrl-C stops everything.\n%s\n", line)
	return b.String()
}
