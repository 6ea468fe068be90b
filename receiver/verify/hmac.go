package verify

import (
	"cmp"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"hash"
	"net/http"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"
)

// macVerifier checks a signature of the body alone: GitHub, Shopify and the configurable hmac scheme, of which the
// first two are presets (scheme's options). It uses crypto/hmac directly: the computation is one HMAC over the
// body, and no provider library adds anything to it (GitHub publishes none for Go; Shopify's are for other
// languages).
type macVerifier struct {
	describe
	scheme  string
	headers []string // canonical names, tried in order: the first present one is used
	ids     []string // canonical names of the provider's event id (IDHeaders), tried in order
	prefix  string
	size    int
	decode  func(string) ([]byte, error)
	format  string // what a well-formed value looks like, for ErrMalformed
	macs    []*macPool
}

// verifyDelivery is Verify, and the provider's id when the scheme has one: not signed, only the body is.
func (v *macVerifier) verifyDelivery(h http.Header, body []byte) (Delivery, error) {
	if err := v.Verify(h, body); err != nil {
		return Delivery{}, err
	}
	name, id := firstHeader(h, v.ids)
	return Delivery{ID: id, Header: name}, nil
}

func (v *macVerifier) Verify(h http.Header, body []byte) error {
	name, raw := firstHeader(h, v.headers)
	if raw == "" {
		return fail(v.scheme, strings.Join(v.headers, " or "), ErrMissing, "")
	}
	enc, ok := strings.CutPrefix(raw, v.prefix)
	if !ok {
		return fail(v.scheme, name, ErrMalformed, "want "+v.format)
	}
	sig, err := v.decode(enc)
	if err != nil || len(sig) != v.size {
		return fail(v.scheme, name, ErrMalformed, "want "+v.format)
	}
	var buf [sha512.Size]byte
	for _, m := range v.macs {
		if hmac.Equal(m.sum(buf[:0], body), sig) {
			return nil
		}
	}
	return fail(v.scheme, name, ErrMismatch, "matches none of "+countSecrets(len(v.macs)))
}

var algorithms = map[string]struct {
	newHash func() hash.Hash
	size    int
}{
	"sha1":   {sha1.New, sha1.Size},
	"sha256": {sha256.New, sha256.Size},
	"sha512": {sha512.New, sha512.Size},
}

var encodings = map[string]func(string) ([]byte, error){
	"hex":       hex.DecodeString,
	"base64":    decodeBase64(base64.RawStdEncoding),
	"base64url": decodeBase64(base64.RawURLEncoding),
}

func newMAC(cfg Config, s *scheme, _ time.Duration, _ func() time.Time) (Verifier, error) {
	headers, prefix, algName, encName := s.reads, s.prefix, s.algorithm, s.encoding
	if cfg.Scheme == SchemeHMAC {
		if cfg.Header == "" {
			return nil, &FieldError{"header", "required for scheme hmac"}
		}
		if !httpguts.ValidHeaderFieldName(cfg.Header) {
			return nil, &FieldError{"header", "not a header name (letters, digits and !#$%&'*+-.^_`|~; the value is not shown)"}
		}
		headers, prefix = []string{http.CanonicalHeaderKey(cfg.Header)}, cfg.Prefix
		if algName = cmp.Or(strings.ToLower(cfg.Algorithm), "sha256"); algorithms[algName].newHash == nil {
			return nil, &FieldError{"algorithm", fmt.Sprintf("not a known algorithm (%s)", notShown(cfg.Algorithm, "sha1", "sha256", "sha512"))}
		}
		if encName = cmp.Or(strings.ToLower(cfg.Encoding), "hex"); encodings[encName] == nil {
			return nil, &FieldError{"encoding", fmt.Sprintf("not a known encoding (%s)", notShown(cfg.Encoding, "hex", "base64", "base64url"))}
		}
		if trimOWS(prefix) != prefix {
			// Header values arrive with outer blanks removed, so such a prefix could never match.
			return nil, &FieldError{"prefix", "has leading or trailing blanks"}
		}
	}
	alg := algorithms[algName]
	macs, err := macPools(alg.newHash, cfg.Secrets)
	if err != nil {
		return nil, err
	}
	format := fmt.Sprintf("%s of %d bytes", encName, alg.size)
	if encName == "hex" {
		format = fmt.Sprintf("%d hex digits", 2*alg.size)
	}
	if prefix != "" {
		format = fmt.Sprintf("%q and %s", prefix, format)
	}
	text := cfg.Scheme + " " + strings.Join(headers, " or ") + " (" + countSecrets(len(macs)) + ")"
	if cfg.Scheme == SchemeHMAC {
		text = fmt.Sprintf("hmac %s %s %s (%s)", headers[0], algName, format, countSecrets(len(macs)))
	}
	return &macVerifier{describe: describe{text}, scheme: cfg.Scheme, headers: headers, ids: s.ids, prefix: prefix,
		size: alg.size, decode: encodings[encName], format: format, macs: macs}, nil
}

// decodeBase64 decodes with or without padding: providers differ, and since the decoded bytes must equal the MAC
// exactly, accepting both admits nothing more.
func decodeBase64(enc *base64.Encoding) func(string) ([]byte, error) {
	return func(s string) ([]byte, error) {
		return enc.DecodeString(strings.TrimSuffix(strings.TrimSuffix(s, "="), "="))
	}
}
