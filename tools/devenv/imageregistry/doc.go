// Package imageregistry is the real node's OCI registry: go-containerregistry's registry
// (blobs on disk, manifests in memory) on 127.0.0.1, and the only registry the node's
// containerd may pull from.
//
// containerd sends a pull of any name to it (its hosts.toml `_default` names this
// registry as the server of every registry host) as a mirror request: a pull of
// docker.io/library/nginx:alpine arrives as /v2/library/nginx/manifests/alpine?ns=docker.io.
// Such a request is served from the repository docker.io/library/nginx, which is where
// LocalName puts an image pushed under that name. So a pod names an image by its real
// name, and the pull never leaves the machine.
package imageregistry
