package main

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/dcm-project/k8s-container-sp/internal/config"
)

// The command line without a cluster: help, version and bad settings are answered
// before anything is dialled, with no setting at all in the environment.

func TestCommandLine(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		environ []string
		code    int
		stdout  []string // substrings; nil: stdout must be empty
		stderr  []string // substrings; nil: stderr must be empty
	}{
		{name: "--help", args: []string{"--help"}, code: 0,
			stdout: []string{"Usage:", "release [-force]", "--version", "Read on: README.md", "docs/"}},
		{name: "-h", args: []string{"-h"}, code: 0, stdout: []string{"Usage:"}},
		{name: "-help", args: []string{"-help"}, code: 0, stdout: []string{"Usage:"}},
		{name: "--version", args: []string{"--version"}, code: 0, stdout: []string{"k8s-container-sp ", "revision "}},
		{name: "release --help", args: []string{"release", "--help"}, code: 0,
			stdout: []string{"Usage: k8s-container-sp release [-force]", "-force", "left running"}},
		{name: "release -h", args: []string{"release", "-h"}, code: 0, stdout: []string{"Usage: k8s-container-sp release"}},
		{name: "unknown command", args: []string{"serve"}, code: 2, stderr: []string{`unknown command or flag "serve"`, "--help"}},
		{name: "unknown flag", args: []string{"--verbose"}, code: 2, stderr: []string{`"--verbose"`}},
		{name: "release with an unknown flag", args: []string{"release", "-x"}, code: 2,
			stderr: []string{"flag provided but not defined: -x", "Usage: k8s-container-sp release"}},
		{name: "release with an argument", args: []string{"release", "now"}, code: 2, stderr: []string{`unexpected argument "now"`}},
		{name: "no settings", code: 2, stderr: []string{"invalid configuration:\n  DCM_REGISTRATION_URL: required, not set", "\n  SP_NAME: required, not set",
			"--help lists every setting"}},
		{name: "release without settings", args: []string{"release"}, code: 2, stderr: []string{"SP_NAME: required, not set"}},
		{name: "a bad setting", environ: []string{"SP_NAME=sp", "SP_ENDPOINT=http://sp:8080", "SP_NATS_URL=nats://n:4222",
			"DCM_REGISTRATION_URL=http://r:8080/api/v1alpha1", "SP_MONITOR_DEBOUNCE_MS=abc"},
			code: 2, stderr: []string{"invalid configuration:\n  SP_MONITOR_DEBOUNCE_MS=\"abc\": not a whole number of milliseconds\n"}},
		// A bad listen address is a bad setting like the others, listed with them (not
		// found later by the listen), in the variables' order.
		{name: "a bad address and another bad setting", environ: []string{"SP_NAME=sp", "SP_ENDPOINT=http://sp:8080", "SP_NATS_URL=nats://n:4222",
			"DCM_REGISTRATION_URL=http://r:8080/api/v1alpha1", "SP_SERVER_ADDRESS=nonsense", "SP_K8S_NAMESPACE=Bad_NS"},
			code: 2, stderr: []string{"invalid configuration:\n  SP_K8S_NAMESPACE=\"Bad_NS\": not a Kubernetes namespace name",
				"\n  SP_SERVER_ADDRESS=\"nonsense\": must be host:port or :port (e.g. :8080, 127.0.0.1:8080, [::1]:8080)\n"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(tc.args, tc.environ, &stdout, &stderr); code != tc.code {
				t.Errorf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, &stdout, &stderr)
			}
			check := func(stream string, got *bytes.Buffer, want []string) {
				if want == nil && got.Len() > 0 {
					t.Errorf("%s should be empty:\n%s", stream, got)
				}
				for _, w := range want {
					if !strings.Contains(got.String(), w) {
						t.Errorf("%s lacks %q:\n%s", stream, w, got)
					}
				}
			}
			check("stdout", &stdout, tc.stdout)
			check("stderr", &stderr, tc.stderr)
		})
	}
}

// --help lists every setting Load reads, with its default and meaning: it is generated
// from the same struct tags, so a new setting shows up without editing the help.
func TestHelpListsEverySetting(t *testing.T) {
	var out bytes.Buffer
	usage(&out)
	help := out.String()
	for _, s := range config.Settings() {
		i := strings.Index(help, "\n    "+s.Name+" ")
		if i < 0 {
			i = strings.Index(help, "\n    "+s.Name+"\n")
		}
		if i < 0 {
			t.Errorf("%s is not listed", s.Name)
			continue
		}
		entry, _, _ := strings.Cut(help[i+1:], "\n    S") // up to the next setting
		if s.Default != "" && !strings.Contains(entry, `default "`+s.Default+`"`) {
			t.Errorf("%s: default %q not shown: %s", s.Name, s.Default, entry)
		}
		if s.Required && !strings.Contains(entry, "required") {
			t.Errorf("%s: not shown as required: %s", s.Name, entry)
		}
		if first := strings.Fields(s.Help)[0]; !strings.Contains(entry, first) {
			t.Errorf("%s: meaning not shown: %s", s.Name, entry)
		}
	}
	for _, line := range strings.Split(help, "\n") {
		if len(line) > 92 {
			t.Errorf("line longer than 92 columns: %q", line)
		}
	}
}

// release --help reads as sentences: each paragraph is filled to releaseWidth columns,
// broken only between words (the next word would not have fitted), never inside one,
// and no line ends in an article.
func TestReleaseHelpWrapsAtWords(t *testing.T) {
	var out bytes.Buffer
	if code := run([]string{"release", "--help"}, nil, &out, &out); code != 0 {
		t.Fatalf("exit %d: %s", code, &out)
	}
	about, _, ok := strings.Cut(out.String(), "\nFlags:\n")
	usage, about, ok2 := strings.Cut(about, "\n\n")
	if !ok || !ok2 || usage != "Usage: k8s-container-sp release [-force]" {
		t.Fatalf("release --help is not a usage line, paragraphs and flags:\n%s", &out)
	}
	paragraphs := strings.Split(strings.TrimSuffix(about, "\n"), "\n\n")
	if len(paragraphs) != len(releaseAbout) {
		t.Fatalf("%d paragraphs, want %d:\n%s", len(paragraphs), len(releaseAbout), about)
	}
	for i, p := range paragraphs {
		// A word broken across lines would be two words here.
		if got, want := strings.Fields(p), strings.Fields(releaseAbout[i]); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("paragraph %d is not the text broken between words:\n%s", i+1, p)
		}
		lines := strings.Split(p, "\n")
		for j, line := range lines {
			words := strings.Fields(line)
			switch {
			case len(words) == 0 || line != strings.Join(words, " "):
				t.Errorf("line %q: empty, or spaced other than one space between words", line)
			case len(line) > releaseWidth:
				t.Errorf("line longer than %d columns: %q", releaseWidth, line)
			case strings.HasSuffix(line, "-"):
				t.Errorf("line ends in a hyphen: %q", line)
			case j < len(lines)-1 && len(line)+1+len(strings.Fields(lines[j+1])[0]) <= releaseWidth:
				t.Errorf("line broken early (the next word fits): %q", line)
			}
			switch last := strings.ToLower(words[len(words)-1]); last {
			case "a", "an", "the":
				t.Errorf("line ends in %q: %q", last, line)
			}
		}
	}
}

func TestVersionComesFromLdflags(t *testing.T) {
	cases := []struct {
		name, version, revision string
		first                   string // the first line, exactly
		second                  string // a prefix of the second line
	}{
		{name: "version only", version: "v1.2.3", first: "k8s-container-sp v1.2.3", second: "revision "},
		{name: "version and revision (make image)", version: "v1.2.3", revision: "0123456789abcdef0123456789abcdef01234567",
			first: "k8s-container-sp v1.2.3", second: "revision 0123456789abcdef0123456789abcdef01234567, go1."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			defer func(v, r string) { version, revision = v, r }(version, revision)
			version, revision = tc.version, tc.revision
			var out bytes.Buffer
			if code := run([]string{"--version"}, nil, &out, &out); code != 0 {
				t.Fatalf("exit %d: %s", code, &out)
			}
			first, second, _ := strings.Cut(out.String(), "\n")
			if first != tc.first || !strings.HasPrefix(second, tc.second) {
				t.Errorf("--version printed %q, want first line %q and a second starting %q", out.String(), tc.first, tc.second)
			}
		})
	}
}

// The built binary answers --help, --version and release --help with an empty
// environment and exit code 0; -ldflags -X main.version sets the version it prints.
func TestBinaryAnswersWithoutSettings(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "k8s-container-sp")
	build := exec.Command("go", "build", "-ldflags", "-X main.version=v0.0.0-test", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	revision := regexp.MustCompile(`^revision ([0-9a-f]{40}( \(.*\))?(, with uncommitted changes)?|unknown \(.*\)), go1\.\S+ \S+/\S+$`)
	for _, args := range [][]string{{"--help"}, {"--version"}, {"release", "--help"}} {
		cmd := exec.Command(bin, args...)
		cmd.Env = []string{} // nothing set, not even PATH
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Errorf("%v: %v\n%s", args, err, &stderr)
			continue
		}
		if stdout.Len() == 0 || stderr.Len() > 0 {
			t.Errorf("%v: stdout %q, stderr %q", args, &stdout, &stderr)
		}
		if args[0] == "--version" {
			lines := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
			if len(lines) != 2 || lines[0] != "k8s-container-sp v0.0.0-test" || !revision.MatchString(lines[1]) {
				t.Errorf("--version printed %q", lines)
			}
		}
	}
	// Exit code 2 and the settings problem, nothing else, when a setting is missing.
	cmd := exec.Command(bin)
	cmd.Env = []string{}
	out, err := cmd.CombinedOutput()
	if exit, ok := err.(*exec.ExitError); !ok || exit.ExitCode() != 2 || !bytes.HasPrefix(out, []byte("k8s-container-sp: invalid configuration:\n")) {
		t.Errorf("no settings: %v\n%s", err, out)
	}
}

// SP_ variables no setting reads are named at start in one WARN line, each with the
// setting it is nearest to; SP_LOG_LEVEL sets the least level written. The kubeconfig
// does not exist, so run stops (exit 2) before it dials anything.
func TestUnknownSettingsAreOneWarning(t *testing.T) {
	t.Setenv("AUTOMEMLIMIT", "off") // run would set this test process's memory limit
	base := []string{"SP_NAME=sp", "SP_ENDPOINT=http://sp:8080", "SP_NATS_URL=nats://n:4222",
		"DCM_REGISTRATION_URL=http://r:8080/api/v1alpha1", "SP_K8S_KUBECONFIG=" + filepath.Join(t.TempDir(), "none")}
	warnings := func(environ []string) []map[string]any {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if code := run(nil, environ, &stdout, &stderr); code != 2 {
			t.Fatalf("exit code %d, want 2 (no kubeconfig)\n%s", code, &stderr)
		}
		var out []map[string]any
		for _, line := range strings.Split(stderr.String(), "\n") {
			var entry map[string]any
			if json.Unmarshal([]byte(line), &entry) == nil && entry["level"] == "WARN" {
				out = append(out, entry)
			}
		}
		return out
	}
	got := warnings(append(base, "SP_CONTAINER_NAMESPACE=dcm", "SP_HARNESS_CACHE=/tmp", "SP_LOGLEVEL=debug"))
	if len(got) != 1 {
		t.Fatalf("%d warnings, want 1: %v", len(got), got)
	}
	want := "unknown settings, ignored: SP_CONTAINER_NAMESPACE (did you mean SP_K8S_NAMESPACE?), SP_HARNESS_CACHE, " +
		"SP_LOGLEVEL (did you mean SP_LOG_LEVEL?); k8s-container-sp --help lists every setting"
	if got[0]["msg"] != want {
		t.Errorf("warning %q\nwant    %q", got[0]["msg"], want)
	}
	if names, _ := json.Marshal(got[0]["unknown"]); string(names) != `["SP_CONTAINER_NAMESPACE","SP_HARNESS_CACHE","SP_LOGLEVEL"]` {
		t.Errorf("unknown = %s", names)
	}
	if got := warnings(base); len(got) != 0 {
		t.Errorf("warnings with known settings only: %v", got)
	}
	if got := warnings(append(base, "SP_CONTAINER_NAMESPACE=dcm", "SP_LOG_LEVEL=error")); len(got) != 0 {
		t.Errorf("SP_LOG_LEVEL=error still writes warnings: %v", got)
	}
}
