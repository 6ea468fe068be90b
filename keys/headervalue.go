package keys

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/dedupeworker/dedupeworker/contract"
)

// HeaderValue encodes an event key for a NATS header value so that distinct keys stay distinct and the value
// survives NATS unchanged: nats.go trims spaces, tabs, CRs and LFs from both ends of a value it sends and turns
// every other CR and LF into a space, and a reader skips spaces and tabs after the colon, so the keys "A", "A "
// and " A", or "A\r\nB" and "A  B", would otherwise arrive as one value.
//
// It percent-encodes (%XX, uppercase hex) '%', every ASCII control byte (0x00-0x1F, 0x7F: escaped even where
// nats.go would keep it, so that the value is printable text) and a space that is the first or last byte, and
// nothing else ("  a  " becomes "%20 a %20"; bytes 0x80-0xFF are kept). A key with none of those (the usual
// delivery ids) is returned as it is, without allocating. ParseHeaderValue reverses it.
func HeaderValue(key string) string {
	n := 0 // bytes to escape
	for i := 0; i < len(key); i++ {
		if mustEscape(key, i) {
			n++
		}
	}
	if n == 0 {
		return key
	}
	var b strings.Builder
	b.Grow(len(key) + 2*n)
	for i := 0; i < len(key); i++ {
		c := key[i]
		if mustEscape(key, i) {
			b.WriteByte('%')
			b.WriteByte(upperHex[c>>4])
			b.WriteByte(upperHex[c&0xF])
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

const upperHex = "0123456789ABCDEF"

// mustEscape reports whether HeaderValue escapes key[i].
func mustEscape(key string, i int) bool {
	switch c := key[i]; {
	case c == '%', c < 0x20, c == 0x7F:
		return true
	case c == ' ':
		return i == 0 || i == len(key)-1
	}
	return false
}

// ParseHeaderValue reverses HeaderValue. Errors start with "keys: " and say what is wrong.
//
// It is lenient where leniency cannot mislead, so that values typed or pasted by hand work: any %XX with two hex
// digits (either case) stands for that byte, even one HeaderValue would not have escaped ("%41" is "A", "%2f" is
// "/"), and every other byte, spaces included wherever they are, stands for itself. It rejects only what
// HeaderValue never writes: a '%' not followed by two hex digits ("%", "%4", "%zz"; a literal '%' is written %25)
// and a raw ASCII control byte (a header value never carries CR or LF and HeaderValue escapes the others, so such
// a value is probably the key itself, not its header value). ParseHeaderValue("") is "".
func ParseHeaderValue(v string) (string, error) {
	key, why := decodeHeaderValue(v)
	if why != "" {
		return "", fmt.Errorf("keys: header value %q: %s", v, why)
	}
	return key, nil
}

// decodeHeaderValue is ParseHeaderValue; on error it returns what is wrong, without prefix.
func decodeHeaderValue(v string) (key, why string) {
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '%':
			if i+2 >= len(v) || !isHex(v[i+1]) || !isHex(v[i+2]) {
				return "", fmt.Sprintf("malformed escape %q at byte %d: want %%XX with two hex digits (a literal %% is %%25)",
					v[i:min(i+3, len(v))], i)
			}
			i += 2
		case c < 0x20 || c == 0x7F:
			return "", fmt.Sprintf("raw control byte 0x%02X at byte %d: a header value has it as %%%02X (is this the key "+
				"itself rather than its header value?)", c, i, c)
		}
	}
	key, _ = url.PathUnescape(v) // cannot fail: every escape was checked above; '+' stays '+' in a path
	return key, ""
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// IdempotencyHeader is the Idempotency-Key header value of an event: tenant:source:HeaderValue(key).
func IdempotencyHeader(tenant, source, key string) string {
	return tenant + ":" + source + ":" + HeaderValue(key)
}

// ParseIdempotencyHeader splits an Idempotency-Key header value into tenant, source and the exact key.
//
// Tenant and source are ids (ValidID: no ':'), so the value splits at its first two colons; the rest, colons
// included, is the key as HeaderValue wrote it. Errors start with "keys: ".
func ParseIdempotencyHeader(v string) (tenant, source, key string, err error) {
	tenant, rest, ok1 := strings.Cut(v, ":")
	source, enc, ok2 := strings.Cut(rest, ":")
	switch {
	case !ok1 || !ok2:
		if strings.HasPrefix(v, contract.UnkeyedIDPrefix) {
			return "", "", "", fmt.Errorf("keys: Idempotency-Key %q is the id of an event without a key (msg/<stream>/<sequence>): "+
				"it names no claim; want <tenant>:<source>:<key>", v)
		}
		return "", "", "", fmt.Errorf("keys: Idempotency-Key %q: want <tenant>:<source>:<key> (two colons at least)", v)
	case !ValidID(tenant):
		return "", "", "", fmt.Errorf("keys: Idempotency-Key %q: tenant %q must be 1-64 characters of [A-Za-z0-9_-]", v, tenant)
	case !ValidID(source):
		return "", "", "", fmt.Errorf("keys: Idempotency-Key %q: source %q must be 1-64 characters of [A-Za-z0-9_-]", v, source)
	case enc == "":
		return "", "", "", fmt.Errorf("keys: Idempotency-Key %q: the key after <tenant>:<source>: is empty", v)
	}
	key, why := decodeHeaderValue(enc)
	if why != "" {
		return "", "", "", fmt.Errorf("keys: Idempotency-Key %q: key %q: %s", v, enc, why)
	}
	return tenant, source, key, nil
}
