package container

import (
	"slices"
	"strings"

	"github.com/distribution/reference"
)

// A status message is read by the tenant (GET's status_message, DCM's copy of the
// events), so it must not carry what the tenant's own container cannot see. Two
// Kubernetes texts do: a failed pull quotes the node's network (addresses, ports,
// dial and TLS errors, a certificate's names: an image reference aimed at
// 10.0.0.1:22 made the node a port scanner whose answers came back in the status),
// and a pod the apiserver refused quotes the namespace's ResourceQuota (every
// tenant's usage). For those the message keeps Kubernetes' reason and the image
// reference and says the rest is in the provider's log (Withheld); every other text is
// passed on as it is.

// pullReasons are the kubelet's waiting reasons of an image that cannot be pulled
// (pkg/kubelet/images; RegistryUnavailable and SignatureValidationFailed from older
// kubelets).
var pullReasons = []string{
	"ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName",
	"ImageInspectError", "RegistryUnavailable", "SignatureValidationFailed",
}

// shown is "reason: message" as the tenant may read it; raw: as Kubernetes said it.
func shown(reason, message string, raw bool) string {
	switch {
	case raw:
	case slices.Contains(pullReasons, strings.TrimSpace(reason)):
		return joinReason(reason, pullMessage(strings.TrimSpace(reason), message))
	case strings.Contains(message, "exceeded quota"):
		return joinReason(reason, "the namespace's resource quota does not admit the container's pod (the provider's log has the detail)")
	}
	return joinReason(reason, message)
}

// pullWhy is what a failed pull may mean, without the kubelet's words.
const pullWhy = " (it does not exist, needs credentials the provider does not have, or its registry did not answer; the provider's log has the detail)"

func pullMessage(reason, message string) string {
	what := "the node could not pull the image"
	if ref := quotedReference(message); ref != "" {
		what = `the node could not pull image "` + ref + `"`
	}
	switch reason {
	case "ImagePullBackOff":
		return what + " and tries again with a back-off" + pullWhy
	case "InvalidImageName":
		return what + ": the node does not accept the reference"
	case "ErrImageNeverPull":
		return what + ": the node is set never to pull it"
	}
	return what + pullWhy
}

// quotedReference is the first double-quoted image reference in a kubelet message
// (`Back-off pulling image "quay.io/x:v1"`, `failed to pull and unpack image
// "docker.io/library/x:v1": ...`), or "": the reference is the tenant's own, the rest
// is the node's.
func quotedReference(s string) string {
	for {
		i := strings.IndexByte(s, '"')
		if i < 0 {
			return ""
		}
		s = s[i+1:]
		j := strings.IndexByte(s, '"')
		if j < 0 {
			return ""
		}
		if _, err := reference.ParseAnyReference(s[:j]); err == nil && j <= 255 {
			return s[:j]
		}
		s = s[j+1:]
	}
}
