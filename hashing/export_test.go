package hashing

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// CacheState is a working state kept outside the pool, so that a test can follow one sort cache across payloads.
type CacheState struct{ st *state }

func NewCacheState() *CacheState { return &CacheState{st: newState()} }

func (c *CacheState) Digest(h *Hasher, raw []byte) (string, error) { return h.digest(c.st, raw) }

// Stats returns how many objects took a cached order, were fully sorted (within the cacheable sizes), and had a
// cached order fail its check.
func (c *CacheState) Stats() (hits, misses, fails int) {
	return c.st.permHits, c.st.permMisses, c.st.permFails
}

// CacheLimits are the sizes the cache works with.
const (
	MinCachedMembers = minCachedMembers
	MaxCachedMembers = maxCachedMembers
	PermArenaLen     = permArenaLen
)

// DigestValue encodes v with encoding/json and digests the result. encoding/json decides how v looks as JSON: in
// particular a Go float64 with an integral value (1.0) encodes as an integer (1) and so hashes differently from the
// JSON float 1.0, and invalid UTF-8 in Go strings becomes U+FFFD. Use Digest on the raw bytes to avoid both.
func (h *Hasher) DigestValue(v any) (string, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("hashing: encoding value: %w", err)
	}
	return h.Digest(raw)
}

// String returns the path in a normal form that ParsePath parses back to the same steps: bare names where the
// grammar allows, otherwise quoted keys with '"' and '\' escaped.
func (p Path) String() string {
	if len(p.steps) == 0 {
		return "."
	}
	var b strings.Builder
	for i, st := range p.steps {
		switch {
		case st.IsIndex:
			if i == 0 {
				b.WriteByte('.')
			}
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(st.Index))
			b.WriteByte(']')
		case bareName(st.Name):
			b.WriteByte('.')
			b.WriteString(st.Name)
		default:
			if i == 0 {
				b.WriteByte('.')
			}
			b.WriteString(`["`)
			for j := 0; j < len(st.Name); j++ {
				if c := st.Name[j]; c == '"' || c == '\\' {
					b.WriteByte('\\')
				}
				b.WriteByte(st.Name[j])
			}
			b.WriteString(`"]`)
		}
	}
	return b.String()
}

func bareName(s string) bool {
	if s == "" || !nameStart(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !nameChar(s[i]) {
			return false
		}
	}
	return true
}
