package container

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Violation is one problem with a request: what is wrong, in words that name the field
// the way DCM does ("cpu.min (10) must not exceed cpu.max (5)"), and where, as an RFC
// 6901 JSON Pointer fragment into the request body.
type Violation struct {
	// Pointer locates the field ("#/spec/resources/cpu/min"); empty when the problem is
	// not about one body field (a query parameter, the body as a whole).
	Pointer string
	Detail  string
	// Param names the query parameter a problem is about; never sent (a pointer is into
	// the body), it lets two checks of one parameter be told apart from two problems.
	Param string
}

// Pointer builds a JSON Pointer fragment from path segments, escaping each per RFC
// 6901 ("~" -> "~0", "/" -> "~1"): Pointer("spec", "metadata", "labels",
// "dcm.project/x") is "#/spec/metadata/labels/dcm.project~1x".
func Pointer(segments ...string) string {
	var b strings.Builder
	b.WriteString("#")
	for _, s := range segments {
		b.WriteString("/")
		b.WriteString(pointerEscape.Replace(s))
	}
	return b.String()
}

var pointerEscape = strings.NewReplacer("~", "~0", "/", "~1")

// violation formats a problem. A value the client sent is quoted in it at most
// MaxQuoted bytes long: a problem's size must not grow with the request (a 1 MiB name
// used to give a 6 MB answer). A rule's text (a rule argument) is the provider's or
// Kubernetes', bounded, and kept whole: clipped, it was cut mid-word.
func violation(pointer, format string, args ...any) Violation {
	for i, a := range args {
		switch v := a.(type) {
		case string:
			args[i] = Clip(v, MaxQuoted)
		case error:
			args[i] = Clip(v.Error(), MaxQuoted)
		case rule:
			args[i] = string(v)
		}
	}
	return Violation{Pointer: pointer, Detail: fmt.Sprintf(format, args...)}
}

// rule is text that says what a value must be, not the value: bounded whatever the
// request, so violation does not clip it. Text that quotes a client's value must have
// clipped it already.
type rule string

// MaxQuoted bounds how much of a client's value one problem quotes.
const MaxQuoted = 128

// bodyOrder ranks where a problem is reported. DCM's contract tests read problems by
// index: resource bounds (cpu, then memory) first, then labels, then the rest in the
// order the fields come in the body, then problems about no one body field.
var bodyOrder = []string{
	"#/spec/resources/cpu", "#/spec/resources/memory", "#/spec/resources", "#/spec/metadata/labels",
	"#/spec/service_type", "#/spec/metadata", "#/spec/image", "#/spec/process", "#/spec/network",
	"#/spec/endpoints", "#/spec/provider_hints", "#/spec", "#",
}

func rank(v Violation) int {
	if v.Pointer == "" {
		return len(bodyOrder)
	}
	for i, prefix := range bodyOrder {
		if v.Pointer == prefix || strings.HasPrefix(v.Pointer, prefix+"/") {
			return i
		}
	}
	return len(bodyOrder) - 1
}

// SortViolations puts problems in the contract's order; problems of equal rank keep
// the order they were found in.
func SortViolations(vs []Violation) {
	slices.SortStableFunc(vs, func(a, b Violation) int { return cmp.Compare(rank(a), rank(b)) })
}
