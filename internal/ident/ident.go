// Package ident holds the one rule for the names dedupeworker accepts: tenant and source ids, which scope keys, and
// the stream and consumer names and subject prefixes of its settings. Each is made of tokens of [A-Za-z0-9_-], the
// same characters in a subject token, a file name and a shell word.
package ident

import "strings"

// MaxLen is the longest tenant or source id.
const MaxLen = 64

// Valid reports whether s is a valid tenant or source id: 1 to 64 characters of A-Z, a-z, 0-9, '_' and '-'. Such
// an id is always a single NATS subject token and never contains ':' or '.', which keeps the idempotency key
// "<tenant>:<source>:<key>" and the window's KV key "<tenant>.<source>.<enc>" unambiguous.
func Valid(s string) bool { return len(s) <= MaxLen && token(s) }

// ValidName reports whether name is a stream or consumer name dedupeworker accepts: 1 to 255 characters of
// [A-Za-z0-9_-] (JetStream allows more).
func ValidName(name string) bool { return len(name) <= 255 && token(name) }

// ValidPrefix reports whether prefix is a subject prefix dedupeworker accepts: dot-separated tokens of
// [A-Za-z0-9_-], so no wildcards, whitespace or empty tokens.
func ValidPrefix(prefix string) bool {
	for t := range strings.SplitSeq(prefix, ".") {
		if !token(t) {
			return false
		}
	}
	return true
}

// Overlaps reports whether the subjects under prefixes a and b meet: equal, or one inside the other.
func Overlaps(a, b string) bool {
	return a == b || strings.HasPrefix(a, b+".") || strings.HasPrefix(b, a+".")
}

// token reports whether s is one or more characters of [A-Za-z0-9_-].
func token(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
