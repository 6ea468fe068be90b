// Package ident holds the one rule for tenant and source ids, shared by the packages that scope keys with them.
package ident

// MaxLen is the longest tenant or source id.
const MaxLen = 64

// Valid reports whether s is a valid tenant or source id: 1 to 64 characters of A-Z, a-z, 0-9, '_' and '-'. Such
// an id is always a single NATS subject token and never contains ':' or '.', which keeps the idempotency key
// "<tenant>:<source>:<key>" and the window's KV key "<tenant>.<source>.<enc>" unambiguous.
func Valid(s string) bool {
	if len(s) == 0 || len(s) > MaxLen {
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
