package verify

import (
	"net/http"
	"slices"
)

// Delivery is what a verified request says about the event it carries: the id the provider gives the event, and
// whether the signature covers it.
type Delivery struct {
	// ID is the event's id as the provider documents it, read as Verify reads a header (first value, blanks
	// trimmed); "" when the scheme names no id (stripe, hmac, none) or the request carries none.
	ID string
	// Header is the canonical name ID was read from ("" with no ID).
	Header string
	// Signed says that the signature covers ID (standard_webhooks and svix sign "<id>.<timestamp>.<body>"). When
	// false, ID is the provider's documented id but only the body is signed (github, shopify): anyone holding one
	// delivery can send it again under another id.
	Signed bool
}

// delivered is implemented by the verifiers of schemes that name an event id.
type delivered interface {
	verifyDelivery(h http.Header, body []byte) (Delivery, error)
}

// VerifyDelivery verifies a request as v.Verify does and, when it verifies, says which id the verification found
// (the zero Delivery for a scheme that names none). The error is Verify's, and the Delivery is zero with it.
func VerifyDelivery(v Verifier, h http.Header, body []byte) (Delivery, error) {
	if d, ok := v.(delivered); ok {
		return d.verifyDelivery(h, body)
	}
	return Delivery{}, v.Verify(h, body)
}

// IDHeaders are the canonical names under which a scheme's provider sends the event's id, in the order the
// verifier reads them; nil for a scheme that names no id (stripe keeps its id in the body; hmac and none are not a
// provider's).
func IDHeaders(scheme string) []string { return slices.Clone(schemes[scheme].ids) }

// BodyOnly reports whether a scheme's signature covers the body alone, so that nothing in the headers — an id
// above all — is bound to it: github, shopify and hmac.
func BodyOnly(scheme string) bool { return schemes[scheme].bodyOnly }

// ReadHeaders are the canonical names of every header the verifier of cfg reads: signature, timestamp and id.
func ReadHeaders(cfg Config) []string {
	out := slices.Clone(schemes[cfg.Scheme].reads)
	if cfg.Scheme == SchemeHMAC && cfg.Header != "" {
		out = append(out, http.CanonicalHeaderKey(cfg.Header))
	}
	return append(out, schemes[cfg.Scheme].ids...)
}

// firstHeader is the first of names present in h, and its value (header's reading); "" and "" when none is.
func firstHeader(h http.Header, names []string) (name, value string) {
	for _, n := range names {
		if v := header(h, n); v != "" {
			return n, v
		}
	}
	return "", ""
}
