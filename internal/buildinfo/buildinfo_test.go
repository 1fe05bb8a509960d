package buildinfo

import (
	"runtime/debug"
	"strings"
	"testing"
)

func stamped(mainVersion string, settings ...string) readFunc {
	return func() (*debug.BuildInfo, bool) {
		info := &debug.BuildInfo{GoVersion: "go1.99", Main: debug.Module{Version: mainVersion}}
		for i := 0; i+1 < len(settings); i += 2 {
			info.Settings = append(info.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
		}
		return info, true
	}
}

func none() (*debug.BuildInfo, bool) { return nil, false }

const commit = "06a30ee8455399ed9e4b8b3f777b712aae498716"

func TestVersion(t *testing.T) {
	vcs := []string{"vcs.revision", commit, "vcs.time", "2026-12-06T06:15:52Z", "vcs.modified", "true"}
	cases := []struct {
		name, version, revision string
		read                    readFunc
		ver, detail             string // detail: a prefix
	}{
		{"plain go build", "dev", "", stamped("v0.0.0-20261206061552-06a30ee84553+dirty", vcs...),
			"v0.0.0-20261206061552-06a30ee84553+dirty", "revision " + commit + " (2026-12-06T06:15:52Z), with uncommitted changes, go1.99 "},
		{"-ldflags version", "v1.2.3", "", stamped("v0.0.0-20261206061552-06a30ee84553+dirty", vcs...),
			"v1.2.3", "revision " + commit + " (2026-12-06T06:15:52Z)"},
		{"make image", "v1.2.3", "abc", stamped("(devel)"), "v1.2.3", "revision abc, go1.99 "},
		{"no VCS stamp", "dev", "", stamped("(devel)"), "dev", "revision unknown (built without VCS information), go1.99 "},
		{"no build information", "dev", "", none, "dev", "revision unknown (no build information), go1."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ver, detail := versionFrom(tc.version, tc.revision, tc.read)
			if ver != tc.ver || !strings.HasPrefix(detail, tc.detail) {
				t.Errorf("got %q, %q\nwant %q, %q...", ver, detail, tc.ver, tc.detail)
			}
		})
	}
}

// make run's health names the commit the service was built from.
func TestLabelled(t *testing.T) {
	cases := []struct {
		name string
		read readFunc
		want string
	}{
		{"clean checkout", stamped("(devel)", "vcs.revision", commit, "vcs.modified", "false"), "local (06a30ee84553)"},
		{"uncommitted changes", stamped("(devel)", "vcs.revision", commit, "vcs.modified", "true"), "local (06a30ee84553+dirty)"},
		{"no VCS stamp", stamped("(devel)"), "local"},
		{"no build information", none, "local"},
	}
	for _, tc := range cases {
		if got := labelledFrom("local", tc.read); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
