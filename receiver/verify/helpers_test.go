package verify_test

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"hash"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/receiver/verify"
)

// The signers below are the tests' own, written from the providers' documentation independently of the package;
// the published vectors (vectors_test.go) pin both to the providers' values.

func mac(newHash func() hash.Hash, key []byte, parts ...[]byte) []byte {
	m := hmac.New(newHash, key)
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

func githubSig(secret string, body []byte) string {
	return "sha256=" + hex.EncodeToString(mac(sha256.New, []byte(secret), body))
}

func stripeV1(secret string, ts int64, body []byte) string {
	return hex.EncodeToString(mac(sha256.New, []byte(secret), []byte(strconv.FormatInt(ts, 10)+"."), body))
}

func stripeHeader(secret string, ts int64, body []byte) string {
	return "t=" + strconv.FormatInt(ts, 10) + ",v1=" + stripeV1(secret, ts, body)
}

// standardKey decodes a Standard Webhooks secret (base64, optionally after whsec_).
func standardKey(secret string) []byte {
	k, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		panic(err)
	}
	return k
}

func standardSig(secret, id string, ts int64, body []byte) string {
	return "v1," + base64.StdEncoding.EncodeToString(
		mac(sha256.New, standardKey(secret), []byte(id+"."+strconv.FormatInt(ts, 10)+"."), body))
}

func shopifySig(secret string, body []byte) string {
	return base64.StdEncoding.EncodeToString(mac(sha256.New, []byte(secret), body))
}

var testHashes = map[string]func() hash.Hash{"sha1": sha1.New, "sha256": sha256.New, "sha512": sha512.New}

func hmacSig(alg, enc, prefix, secret string, body []byte) string {
	sum := mac(testHashes[alg], []byte(secret), body)
	switch enc {
	case "base64":
		return prefix + base64.StdEncoding.EncodeToString(sum)
	case "base64url":
		return prefix + base64.RawURLEncoding.EncodeToString(sum)
	default:
		return prefix + hex.EncodeToString(sum)
	}
}

// hdr builds a header map through Set, as net/http would deliver it (canonical names).
func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

func fixedClock(t time.Time) func() time.Time { return func() time.Time { return t } }

func mustNew(t testing.TB, cfg verify.Config) verify.Verifier {
	t.Helper()
	v, err := verify.New(cfg)
	if err != nil {
		t.Fatalf("New(%v): %v", cfg, err)
	}
	return v
}

var reasons = []error{verify.ErrMissing, verify.ErrMalformed, verify.ErrMismatch, verify.ErrTimestamp}

// checkErr fails unless err is what a test expects (nil, or wrapping want) and keeps every promise about error
// texts: the "verify: <scheme>: " prefix, exactly one reason, and none of the secrets nor any of the signatures
// that were computed with them.
func checkErr(t testing.TB, err, want error, scheme string, secrets, signatures []string) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Fatalf("Verify: %v, want nil", err)
		}
		return
	}
	if !errors.Is(err, want) {
		t.Fatalf("Verify: %v, want %v", err, want)
	}
	checkErrText(t, err, scheme, secrets, signatures)
}

func checkErrText(t testing.TB, err error, scheme string, secrets, signatures []string) {
	t.Helper()
	msg := err.Error()
	if !strings.HasPrefix(msg, "verify: "+scheme+": ") {
		t.Fatalf("error %q lacks the prefix %q", msg, "verify: "+scheme+": ")
	}
	n := 0
	for _, r := range reasons {
		if errors.Is(err, r) {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("error %q wraps %d reasons, want 1", msg, n)
	}
	for _, s := range secrets {
		if s != "" && strings.Contains(msg, s) {
			t.Fatalf("error %q contains a secret", msg)
		}
	}
	for _, s := range signatures {
		if s != "" && strings.Contains(strings.ToLower(msg), strings.ToLower(s)) {
			t.Fatalf("error %q contains a computed signature", msg)
		}
	}
}
