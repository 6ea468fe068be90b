package keys

import (
	"github.com/dedupeworker/dedupeworker/contract"
	"github.com/dedupeworker/dedupeworker/internal/ident"
)

// Reason says why an envelope has no key. ReasonNone goes with a key.
type Reason string

const (
	ReasonNone     Reason = ""
	ReasonNoDedupe Reason = contract.ReasonNoDedupe // the source declares no dedupe (zero Spec)
	ReasonMissing  Reason = contract.ReasonMissing  // the header or JSON member is absent, empty, or not a string or integer
	ReasonTooLarge Reason = contract.ReasonTooLarge // the body is over Extractor.MaxJSONBytes (json and payload sources)
	ReasonNotJSON  Reason = contract.ReasonNotJSON  // the body is not valid JSON (json and payload sources)
)

// ValidID reports whether s is a valid tenant or source id: 1 to 64 characters of A-Z, a-z, 0-9, '_' and '-'
// (so it is a single NATS subject token).
func ValidID(s string) bool { return ident.Valid(s) }
