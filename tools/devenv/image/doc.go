// Package image builds the service's OCI image without a container engine (make image):
// the static k8s-container-sp binary on an empty base, for linux/amd64 and linux/arm64 in
// one index, with go-containerregistry.
//
// The image is reproducible: the same commit, VERSION and REVISION (and Go toolchain)
// give the same index digest. Nothing in it depends on when or where it was built: every
// tar entry and the config's Created are at the Unix epoch, entries are sorted with fixed
// modes and owner 0:0, layers are gzipped by compress/gzip with no header time, and the
// binary is built with -trimpath -buildvcs=false and GOWORK=off (the service's go.mod
// alone, as the Containerfile builds it).
//
// Each platform's image has two layers:
//
//  1. the base files, the same bytes for every platform (so a registry stores them once):
//     /etc/ssl/certs/ca-certificates.crt (the NSS roots of the pinned Go module
//     golang.org/x/crypto/x509roots/fallback, as PEM), /etc/passwd and /etc/group with
//     root and nonroot (65532), and /tmp (1777);
//  2. the binary, /k8s-container-sp (0755).
//
// The config runs it as 65532:65532 (numeric, so a runAsNonRoot pod is admitted without
// a runAsUser), with the OCI labels org.opencontainers.image.{source,revision,version,
// licenses,title}; the index and each manifest carry them as annotations too.
//
// Build writes two outputs: an OCI image layout folder whose index.json names the index
// by the image reference, and one tarball that is that layout as a tar plus a
// docker-archive manifest.json for the first platform (what docker save writes since
// Docker 25), so docker load (either image store) and podman load both accept it.
// Push sends the index to a registry. The Containerfile at the repository root builds
// the same image with an engine.
package image
