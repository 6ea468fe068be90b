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
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"
)

// macVerifier checks a signature of the body alone: GitHub, Shopify and the configurable hmac scheme. These use the
// standard library's crypto/hmac directly: the computation is one HMAC over the body, no provider library adds
// anything to it (GitHub publishes none for Go; Shopify's are for other languages).
type macVerifier struct {
	describe
	scheme  string
	headers []string // canonical names, tried in order: the first present one is used
	ids     []string // canonical names of the provider's event id (IDHeaders), tried in order
	prefix  string
	newHash func() hash.Hash
	size    int
	decode  func(string) ([]byte, error)
	format  string // what a well-formed value looks like, for ErrMalformed
	keys    [][]byte
	macs    []*macPool // of keys, built on first use
	once    sync.Once
}

func (v *macVerifier) Verify(h http.Header, body []byte) error {
	_, err := v.verifyDelivery(h, body)
	return err
}

// verifyDelivery is Verify, and the provider's id when the scheme has one: not signed, only the body is.
func (v *macVerifier) verifyDelivery(h http.Header, body []byte) (Delivery, error) {
	if err := v.check(h, body); err != nil {
		return Delivery{}, err
	}
	name, id := firstHeader(h, v.ids)
	return Delivery{ID: id, Header: name}, nil
}

func (v *macVerifier) check(h http.Header, body []byte) error {
	name, raw := v.headers[0], ""
	for _, n := range v.headers {
		if raw = header(h, n); raw != "" {
			name = n
			break
		}
	}
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
	v.once.Do(func() { v.macs = macPools(v.newHash, v.keys) })
	var buf [sha512.Size]byte
	for _, m := range v.macs {
		if hmac.Equal(m.sum(buf[:0], body), sig) {
			return nil
		}
	}
	return fail(v.scheme, name, ErrMismatch, "matches none of "+countSecrets(len(v.keys)))
}

func newGitHub(cfg Config, _ time.Duration, _ func() time.Time) (Verifier, error) {
	keys, err := rawKeys(cfg.Secrets)
	if err != nil {
		return nil, err
	}
	return &macVerifier{
		describe: describe{"github X-Hub-Signature-256 (" + countSecrets(len(keys)) + ")"},
		scheme:   SchemeGitHub, headers: []string{"X-Hub-Signature-256"}, ids: IDHeaders(SchemeGitHub), prefix: "sha256=",
		newHash: sha256.New, size: sha256.Size, decode: hex.DecodeString,
		format: `"sha256=" and 64 hex digits`, keys: keys,
	}, nil
}

func newShopify(cfg Config, _ time.Duration, _ func() time.Time) (Verifier, error) {
	keys, err := rawKeys(cfg.Secrets)
	if err != nil {
		return nil, err
	}
	return &macVerifier{
		describe: describe{"shopify Shopify-Hmac-Sha256 or X-Shopify-Hmac-Sha256 (" + countSecrets(len(keys)) + ")"},
		scheme:   SchemeShopify,
		// Shopify's shopify_app gem reads the un-prefixed name first and falls back to the X- one.
		headers: shopifySigHeaders, ids: IDHeaders(SchemeShopify),
		newHash: sha256.New, size: sha256.Size, decode: decodeBase64(base64.RawStdEncoding),
		format: "base64 of 32 bytes", keys: keys,
	}, nil
}

// shopifySigHeaders are Shopify's signature headers, in the order they are read.
var shopifySigHeaders = []string{"Shopify-Hmac-Sha256", "X-Shopify-Hmac-Sha256"}

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

func newHMAC(cfg Config, _ time.Duration, _ func() time.Time) (Verifier, error) {
	if cfg.Header == "" {
		return nil, &FieldError{"header", "required for scheme hmac"}
	}
	if !httpguts.ValidHeaderFieldName(cfg.Header) {
		return nil, &FieldError{"header", "not a header name (letters, digits and !#$%&'*+-.^_`|~; the value is not shown)"}
	}
	algName := cmp.Or(strings.ToLower(cfg.Algorithm), "sha256")
	alg, ok := algorithms[algName]
	if !ok {
		return nil, &FieldError{"algorithm", fmt.Sprintf("not a known algorithm (%s)", notShown(cfg.Algorithm, "sha1", "sha256", "sha512"))}
	}
	encName := cmp.Or(strings.ToLower(cfg.Encoding), "hex")
	decode, ok := encodings[encName]
	if !ok {
		return nil, &FieldError{"encoding", fmt.Sprintf("not a known encoding (%s)", notShown(cfg.Encoding, "hex", "base64", "base64url"))}
	}
	if trimOWS(cfg.Prefix) != cfg.Prefix {
		// Header values arrive with outer blanks removed, so such a prefix could never match.
		return nil, &FieldError{"prefix", "has leading or trailing blanks"}
	}
	keys, err := rawKeys(cfg.Secrets)
	if err != nil {
		return nil, err
	}
	name := http.CanonicalHeaderKey(cfg.Header)
	format := fmt.Sprintf("%s of %d bytes", encName, alg.size)
	if encName == "hex" {
		format = fmt.Sprintf("%d hex digits", 2*alg.size)
	}
	if cfg.Prefix != "" {
		format = fmt.Sprintf("%q and %s", cfg.Prefix, format)
	}
	return &macVerifier{
		describe: describe{fmt.Sprintf("hmac %s %s %s (%s)", name, algName, format, countSecrets(len(keys)))},
		scheme:   SchemeHMAC, headers: []string{name}, prefix: cfg.Prefix,
		newHash: alg.newHash, size: alg.size, decode: decode, format: format, keys: keys,
	}, nil
}

// decodeBase64 decodes with or without padding: providers differ, and since the decoded bytes must equal the MAC
// exactly, accepting both admits nothing more.
func decodeBase64(enc *base64.Encoding) func(string) ([]byte, error) {
	return func(s string) ([]byte, error) {
		if strings.HasSuffix(s, "==") {
			s = s[:len(s)-2]
		} else if strings.HasSuffix(s, "=") {
			s = s[:len(s)-1]
		}
		return enc.DecodeString(s)
	}
}
