// Command sp-image builds the service's OCI image without a container engine (make
// image): an OCI layout folder and a tarball for docker load / podman load, both for
// linux/amd64 and linux/arm64, reproducible (see package image). -push also sends it to
// the reference's registry.
//
//	go run ./tools/devenv/cmd/sp-image -version v1.2.3 -revision $(git rev-parse HEAD)
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/image"
)

func main() {
	version := flag.String("version", "", "the version stamped into the binary and the labels; the tag of the default -ref (required)")
	revision := flag.String("revision", "", "the source commit stamped into the binary and the labels (required)")
	ref := flag.String("ref", "", "the image reference, registry/repository:tag (default "+image.DefaultRepository+":<version>)")
	platforms := flag.String("platforms", strings.Join(image.DefaultPlatforms(), ","), "os/arch list; the tarball's docker manifest.json describes the first")
	out := flag.String("out", "bin/image", "folder for the OCI layout ("+image.LayoutDirName+"/) and the tarball ("+image.TarballName+")")
	push := flag.Bool("push", false, "also push the index to the reference's registry (docker/podman login credentials; plain HTTP for localhost/127.0.0.1)")
	flag.Parse()
	if flag.NArg() > 0 {
		fail(fmt.Errorf("unexpected argument %q", flag.Arg(0)))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root, err := harness.RepoRoot()
	if err != nil {
		fail(err)
	}
	res, err := image.Build(ctx, image.Options{
		Root: root, Version: *version, Revision: *revision, Ref: *ref,
		Platforms: strings.Split(*platforms, ","), OutDir: *out,
	})
	if err != nil {
		fail(err)
	}
	res.Print(os.Stdout)
	if *push {
		if err := image.Push(ctx, res.Index, res.Ref); err != nil {
			fail(err)
		}
		fmt.Printf("pushed: %s@%s\n", res.Ref, res.IndexDigest)
	}
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "sp-image: %v\n", err)
	os.Exit(1)
}
