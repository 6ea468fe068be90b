package receiver

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/nats-io/nats.go"
)

// HeaderVerified is the header the receiver sets on every envelope, "true" or "false" (README, "Unverified
// deliveries"); the one a client sent, under any letter case, is always removed first.
const HeaderVerified = "Ingest-Verified"

// Values of HeaderVerified.
const (
	verifiedTrue  = "true"
	verifiedFalse = "false"
)

// natsHeaderOverhead is what a NATS header block costs besides its fields: "NATS/1.0\r\n" and the final "\r\n".
const natsHeaderOverhead = len("NATS/1.0\r\n") + len("\r\n")

// droppedNames are removed from every envelope, compared ignoring case: hop-by-hop headers (RFC 9110 7.6.1),
// Expect (about this exchange only), and the credentials of the hop to the receiver.
var droppedNames = []string{
	"Connection", "Keep-Alive", "TE", "Trailer", "Transfer-Encoding", "Upgrade", "Host", "Expect",
	"Authorization", "Cookie",
}

// droppedPrefixes are removed too: Proxy-* (hop-by-hop), and the names the worker and the receiver reserve —
// Nats-* (JetStream control: Nats-Msg-Id, Nats-Expected-*), Dedupe-* (the worker's), Ingest-* (the receiver's,
// Ingest-Verified first of all).
var droppedPrefixes = []string{"Proxy-", "Nats-", "Dedupe-", "Ingest-"}

// envelopeHeader returns the headers published with a delivery — h without the dropped ones and the ones its
// Connection header names — and the size of their NATS header block with Ingest-Verified, which the caller sets
// (setVerified) once the signature is checked. The value slices are h's own: the envelope must be published before
// h changes. A name that is not an HTTP token, or a value with a control character, is an error (net/http's server
// never delivers one; a hand-built request could, and it would break the NATS header block).
func envelopeHeader(h http.Header) (nats.Header, int, error) {
	var conn []string
	for name, vals := range h {
		if strings.EqualFold(name, "Connection") {
			conn = append(conn, vals...)
		}
	}
	out := make(nats.Header, len(h)+2)
	size := natsHeaderOverhead
	for name, vals := range h {
		if !validName(name) {
			return nil, 0, fmt.Errorf("header name %q is not an HTTP token", name)
		}
		for _, v := range vals {
			if !validValue(v) {
				return nil, 0, fmt.Errorf("header %s: a value holds a control character", name)
			}
		}
		if dropped(name, conn) {
			continue
		}
		out[name] = vals
		for _, v := range vals {
			size += len(name) + len(": ") + len(v) + len("\r\n")
		}
	}
	// The larger of the two values, so that the size is known before the signature is checked.
	size += len(HeaderVerified) + len(": ") + len(verifiedFalse) + len("\r\n")
	return out, size, nil
}

// validName reports whether name is an HTTP token (RFC 9110 5.6.2).
func validName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// validValue reports whether v is a field value without control characters (HTAB allowed), as net/http checks.
func validValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// setVerified sets the one Ingest-Verified of an envelope.
func setVerified(h nats.Header, verified bool) {
	if verified {
		h[HeaderVerified] = []string{verifiedTrue}
	} else {
		h[HeaderVerified] = []string{verifiedFalse}
	}
}

// dropped reports whether the header name never reaches an envelope; conn are the values of Connection.
func dropped(name string, conn []string) bool {
	for _, d := range droppedNames {
		if strings.EqualFold(name, d) {
			return true
		}
	}
	for _, p := range droppedPrefixes {
		if len(name) >= len(p) && strings.EqualFold(name[:len(p)], p) {
			return true
		}
	}
	for _, v := range conn {
		for tok := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), name) {
				return true
			}
		}
	}
	return false
}
