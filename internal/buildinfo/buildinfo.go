// Package buildinfo says which build of the service is running: the version health
// reports and --version prints, and the source revision it was built from. The
// service's binary passes the version and revision set at build time (-ldflags -X
// main.version, main.revision); make run's sp-local, which runs the service in its own
// process, labels the revision Go stamped into it.
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// Version is the version to show and report in health: version when it is not "dev"
// (set at build time), else the one Go stamped from the checkout's VCS
// (v0.0.0-<time>-<commit>[+dirty] in a plain go build), else "dev". detail is the
// source revision (revision when set, else Go's VCS stamp) and the Go toolchain.
func Version(version, revision string) (ver, detail string) {
	return versionFrom(version, revision, debug.ReadBuildInfo)
}

// Labelled is label with the source revision Go stamped into the running binary, as
// "label (<first 12 hex digits of the commit>[+dirty])": "local (06a30ee84553+dirty)".
// Just label when the binary has no VCS stamp (go test, go run, -buildvcs=false).
func Labelled(label string) string {
	return labelledFrom(label, debug.ReadBuildInfo)
}

type readFunc func() (*debug.BuildInfo, bool)

func versionFrom(version, revision string, read readFunc) (ver, detail string) {
	ver = version
	info, ok := read()
	if !ok {
		return ver, "revision unknown (no build information), " + runtime.Version()
	}
	if ver == "dev" && info.Main.Version != "" && info.Main.Version != "(devel)" {
		ver = info.Main.Version
	}
	settings := vcs(info)
	rev := "revision unknown (built without VCS information)"
	if revision != "" {
		rev = "revision " + revision
	} else if r := settings["vcs.revision"]; r != "" {
		rev = "revision " + r
		if t := settings["vcs.time"]; t != "" {
			rev += " (" + t + ")"
		}
		if settings["vcs.modified"] == "true" {
			rev += ", with uncommitted changes"
		}
	}
	return ver, rev + ", " + info.GoVersion + " " + runtime.GOOS + "/" + runtime.GOARCH
}

func labelledFrom(label string, read readFunc) string {
	info, ok := read()
	if !ok {
		return label
	}
	settings := vcs(info)
	rev := settings["vcs.revision"]
	if rev == "" {
		return label
	}
	if len(rev) > 12 {
		rev = rev[:12] // as in a pseudo-version
	}
	if settings["vcs.modified"] == "true" {
		rev += "+dirty"
	}
	return label + " (" + rev + ")"
}

func vcs(info *debug.BuildInfo) map[string]string {
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	return settings
}
