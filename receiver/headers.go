package receiver

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/nats-io/nats.go"
	"golang.org/x/net/http/httpguts"

	"github.com/dedupeworker/dedupeworker/contract"
)

// natsHeaderOverhead is what a NATS header block costs besides its fields: "NATS/1.0\r\n" and the final "\r\n".
const natsHeaderOverhead = len("NATS/1.0\r\n") + len("\r\n")

// droppedNames and droppedPrefixes are removed from every envelope, compared by sameName; docs/receiver.md says
// why each is. '_' counts as '-' because proxies and CGI-style gateways (nginx's underscores_in_headers, WSGI,
// Lambda) turn one into the other: a client's Ingest_Verified could reach a reader as Ingest-Verified.
var droppedNames = []string{
	"Connection", "Keep-Alive", "TE", "Trailer", "Transfer-Encoding", "Upgrade", "Host", "Expect",
	"Authorization", "Cookie",
	contract.NATSStatus, contract.NATSDescription, "KV-Operation",
}

var droppedPrefixes = []string{"Proxy-", contract.PrefixNats, contract.PrefixDedupe, contract.PrefixIngest}

// headerBlockSize is what one field costs in a NATS header block: name, ": ", value, CRLF.
func headerBlockSize(name, value string) int { return len(name) + len(": ") + len(value) + len("\r\n") }

// checkHeader returns the size of the NATS header block of what stripHeader publishes of h, without the receiver's
// own headers. A name that is not an HTTP token, or a value with a control character, is an error: net/http's
// server never delivers one, but a hand-built request could, and it would break the NATS header block.
func checkHeader(h http.Header, conn []string) (int, error) {
	size := natsHeaderOverhead
	for name, vals := range h {
		if !httpguts.ValidHeaderFieldName(name) {
			return 0, fmt.Errorf("header name %q is not an HTTP token", name)
		}
		published := !dropped(name, conn)
		for _, v := range vals {
			if !httpguts.ValidHeaderFieldValue(v) {
				return 0, fmt.Errorf("header %s: a value holds a control character", name)
			}
			if published {
				size += headerBlockSize(name, v)
			}
		}
	}
	return size, nil
}

// stripHeader removes from h, in place, every header that is not published, and returns the rest as the
// envelope's headers: no copy, for the envelope is published before the request ends. It runs after the signature
// check, which may read any header.
func stripHeader(h http.Header, conn []string) nats.Header {
	maps.DeleteFunc(h, func(name string, _ []string) bool { return dropped(name, conn) })
	return nats.Header(h)
}

// connectionTokens are the names the Connection headers list as hop-by-hop, except those in protected: a
// client's Connection list never removes a header the source's verifier or key reads.
func connectionTokens(h http.Header, protected []string) []string {
	var conn []string
	for name, vals := range h {
		if !sameName(name, "Connection") {
			continue
		}
		for _, v := range vals {
			for tok := range strings.SplitSeq(v, ",") {
				tok = strings.TrimSpace(tok)
				if tok != "" && !hasName(protected, tok) {
					conn = append(conn, tok)
				}
			}
		}
	}
	return conn
}

// The values of Ingest-Verified, shared by every envelope: nats.go only reads a message's headers.
var (
	verifiedTrueValues  = []string{contract.VerifiedTrue}
	verifiedFalseValues = []string{contract.VerifiedFalse}
)

// setVerified sets the one Ingest-Verified of an envelope; any a client sent was removed first (dropped).
func setVerified(h nats.Header, verified bool) {
	if verified {
		h[contract.HeaderVerified] = verifiedTrueValues
	} else {
		h[contract.HeaderVerified] = verifiedFalseValues
	}
}

// dropped reports whether the header name never reaches an envelope; conn are the names Connection lists.
func dropped(name string, conn []string) bool {
	for _, p := range droppedPrefixes {
		if len(name) >= len(p) && sameName(name[:len(p)], p) {
			return true
		}
	}
	return hasName(droppedNames, name) || hasName(conn, name)
}

// hasName reports whether names holds name, compared by sameName.
func hasName(names []string, name string) bool {
	return slices.ContainsFunc(names, func(n string) bool { return sameName(n, name) })
}

// sameName compares header names as the receiver does: ASCII letters in any case, '_' equal to '-'.
func sameName(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		if foldByte(a[i]) != foldByte(b[i]) {
			return false
		}
	}
	return true
}

func foldByte(c byte) byte {
	switch {
	case 'a' <= c && c <= 'z':
		return c - ('a' - 'A')
	case c == '_':
		return '-'
	}
	return c
}
