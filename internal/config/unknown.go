package config

import (
	"slices"
	"strings"
)

// notSettings are DEDUPE_* variables that are not settings but are read on purpose, as the receiver's signing
// secrets (DEDUPE_INGEST_SECRET_<SOURCE>) are: the switches of the test suites and benchmarks.
var notSettings = []string{Prefix + "_SEED", Prefix + "_CHAOS", Prefix + "_SOAK", Prefix + "_SOAK_N",
	Prefix + "_CLUSTER_TESTS", Prefix + "_WORKER_RACE", Prefix + "_KV_SIZE"}

// Unknown is a DEDUPE_* variable that no setting reads: most often a typo (DEDUPE_DEFALT_TTL), which would
// otherwise leave the setting at its default without a word.
type Unknown struct {
	Name    string // the variable as set
	Nearest string // the known variable closest to it, "" when none is close
}

// UnknownVariables lists, sorted, the DEDUPE_* variables of environ (os.Environ's form, NAME=value) that are neither
// settings nor read otherwise, each with the nearest setting when one is within a few edits.
func UnknownVariables(environ []string) []Unknown {
	known := Variables()
	var out []Unknown
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, Prefix+"_") || slices.Contains(known, name) || slices.Contains(notSettings, name) ||
			strings.HasPrefix(name, Prefix+"_INGEST_SECRET_") {
			continue
		}
		u := Unknown{Name: name}
		best := -1
		for _, k := range known {
			d := editDistance(name, k)
			if best < 0 || d < best {
				best, u.Nearest = d, k
			}
		}
		if best > max(2, (len(name)-len(Prefix)-1)/3) {
			u.Nearest = ""
		}
		out = append(out, u)
	}
	slices.SortFunc(out, func(a, b Unknown) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// editDistance is the Levenshtein distance of a and b (ASCII names).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
