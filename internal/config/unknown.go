package config

import (
	"slices"
	"strings"
	"sync"
)

// Unknown is an SP_ variable of the environment that no setting reads, and the setting
// it is nearest to ("" when none is near): a name another provider reads (DCM's
// environment agent's SP_CONTAINER_NAMESPACE is this provider's SP_K8S_NAMESPACE) or a
// typing mistake would otherwise be ignored without a word, the default in force.
type Unknown struct {
	Name    string
	Nearest string
}

// UnknownSettings lists, sorted by name, the variables of environ (os.Environ() in
// production) that start with SP_ and are not settings.
func UnknownSettings(environ []string) []Unknown {
	known := knownNames()
	var out []Unknown
	seen := map[string]bool{}
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "SP_") || seen[name] || slices.Contains(known, name) {
			continue
		}
		seen[name] = true
		out = append(out, Unknown{Name: name, Nearest: Nearest(name, known)})
	}
	slices.SortFunc(out, func(a, b Unknown) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// knownNames are the settings' names, from Config's tags, read once.
var knownNames = sync.OnceValue(func() []string {
	var names []string
	for _, s := range Settings() {
		names = append(names, s.Name)
	}
	return names
})

// Nearest is the name of known nearest to name, or "" when none is near: nothing of
// name is in it (a variable of another program, SP_HARNESS_CACHE, is not a setting
// misspelt). The names are compared as words (K8S, NAMESPACE), the prefix (SP_, DCM_)
// left out: a name is mostly a setting's with a word more, less or another
// (SP_NAMESPACE, SP_CONTAINER_NAMESPACE for SP_K8S_NAMESPACE) or a word misspelt
// (SP_K8S_NAMESPCE), which an edit distance over the letters ranks poorly (it finds
// SP_CONTAINER_NAMESPACE nearer to SP_CONTAINER_MAX_BYTES). Ties go to the earlier
// setting, in known's order.
func Nearest(name string, known []string) string {
	words := nameWords(name)
	if len(words) == 0 {
		return ""
	}
	best, bestDist := "", float64(len(words)) // as far as a name with no word of name's
	for _, k := range known {
		if d := nameDistance(words, nameWords(k)); d < bestDist {
			best, bestDist = k, d
		}
	}
	return best
}

// nameWords are the words of a variable's name after its prefix, upper case.
func nameWords(name string) []string {
	words := strings.FieldsFunc(strings.ToUpper(name), func(r rune) bool { return r == '_' })
	if len(words) > 0 && (words[0] == "SP" || words[0] == "DCM") {
		words = words[1:]
	}
	return words
}

// The costs of nameDistance. A word the setting has and the name lacks costs less than
// one the name has and the setting lacks: a name is more often a setting's without its
// qualifier (SP_NAMESPACE, SP_KUBECONFIG) than with a word the setting does not have.
const (
	wordMissing = 0.5 // a word of the setting's the name lacks
	wordExtra   = 1.0 // a word of the name's the setting lacks
	wordSplit   = 0.1 // the same letters in other words
)

// nameDistance is the edit distance between two names' words: inserting or deleting a
// word costs wordMissing or wordExtra, replacing one costs wordCost (under 1 when it is
// the same word misspelt). Names whose letters are the same, split into other words
// (SP_LOGLEVEL, SP_LOG_LEVEL), are apart by wordSplit only.
func nameDistance(a, b []string) float64 {
	switch {
	case slices.Equal(a, b):
		return 0
	case strings.Join(a, "") == strings.Join(b, ""):
		return wordSplit
	}
	// d[i][j]: a[:i] into b[:j].
	d := make([][]float64, len(a)+1)
	for i := range d {
		d[i] = make([]float64, len(b)+1)
		for j := range d[i] {
			switch {
			case i == 0:
				d[i][j] = float64(j) * wordMissing
			case j == 0:
				d[i][j] = float64(i) * wordExtra
			default:
				d[i][j] = min(d[i-1][j]+wordExtra, d[i][j-1]+wordMissing, d[i-1][j-1]+wordCost(a[i-1], b[j-1]))
			}
		}
	}
	return d[len(a)][len(b)]
}

// wordCost is the cost of reading word a as word b: 0 for the same word, the share of
// letters to edit when a is b misspelt (at most a third of them), else 1 (another word).
func wordCost(a, b string) float64 {
	if a == b {
		return 0
	}
	n := max(len(a), len(b))
	if e := editDistance(a, b); 3*e <= n {
		return float64(e) / float64(n)
	}
	return 1
}

// editDistance is the Levenshtein distance between a and b, in bytes (names are ASCII).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			sub := prev[j-1]
			if a[i-1] != b[j-1] {
				sub++
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, sub)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
