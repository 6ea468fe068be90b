package keys

// Reason says why an envelope has no key. ReasonNone goes with a key.
type Reason string

const (
	ReasonNone     Reason = ""
	ReasonNoDedupe Reason = "no-dedupe" // the source declares no dedupe (zero Spec)
	ReasonMissing  Reason = "missing"   // the header or JSON member is absent, empty, or not a string or integer
	ReasonTooLarge Reason = "too-large" // the body is over Extractor.MaxJSONBytes (json and payload sources)
	ReasonNotJSON  Reason = "not-json"  // the body is not valid JSON (json and payload sources)
)

// ValidID reports whether s is a valid tenant or source id: 1 to 64 characters of A-Z, a-z, 0-9, '_' and '-'
// (so it is a single NATS subject token).
func ValidID(s string) bool {
	if len(s) == 0 || len(s) > 64 {
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

// IdempotencyKey is the window's key for an event: "<tenant>:<source>:<key>".
func IdempotencyKey(tenant, source, key string) string {
	return tenant + ":" + source + ":" + key
}
