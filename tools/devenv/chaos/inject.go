package chaos

import (
	"fmt"
	"sort"
	"strings"
)

// A bug planted on purpose shows that the checker catches what it claims to (issue 16:
// "a deliberately injected bug is caught"). Each bug is a build tag: the service's code
// has a seam for it (for drop-unsent-deleted, internal/app/plantedbug*.go, where the publisher is wired), whose
// default file does nothing and whose tagged file is the bug, so the bug survives any
// reformatting of the code around it and a release build can never contain it. The
// source tree is never touched; the chaos run builds the service with the tag.
type bug struct {
	tag, what string
}

var bugs = map[string]bug{
	"drop-unsent-deleted": {
		tag:  "chaosbug",
		what: "a DELETED that cannot be published (NATS down) is dropped and its record released, as if the deleted-report-owed finalizer were not honoured",
	},
}

// Bugs lists the injectable bugs, for the command's help.
func Bugs() string {
	var out []string
	for name, b := range bugs {
		out = append(out, name+": "+b.what)
	}
	sort.Strings(out)
	return strings.Join(out, "; ")
}

// bugBuildFlags are the `go build` flags that plant the named bug.
func bugBuildFlags(name string) ([]string, error) {
	b, ok := bugs[name]
	if !ok {
		return nil, fmt.Errorf("no bug %q to inject (known: %s)", name, Bugs())
	}
	return []string{"-tags", b.tag}, nil
}
