package verify_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/receiver/verify"
)

var testNow = time.Unix(1_700_000_000, 0)

func b64secret(s string) string { return "whsec_" + base64.StdEncoding.EncodeToString([]byte(s)) }

// scheme describes one scheme for the behaviour table: three distinct secrets, how to configure it and how its
// provider signs a delivery.
type scheme struct {
	name               string
	old, new, other    string
	timestamped        bool
	cfg                func(secrets []string, tol time.Duration) verify.Config
	sign               func(secret string, ts int64, body []byte) http.Header
	signatures         func(secret string, ts int64, body []byte) []string // what may never appear in an error
	decodedSecretBytes bool                                                // the secrets are base64 of the key
}

func clockCfg(name string) func([]string, time.Duration) verify.Config {
	return func(s []string, tol time.Duration) verify.Config {
		return verify.Config{Scheme: name, Secrets: s, Tolerance: tol, Now: fixedClock(testNow)}
	}
}

func plainCfg(name string) func([]string, time.Duration) verify.Config {
	return func(s []string, _ time.Duration) verify.Config { return verify.Config{Scheme: name, Secrets: s} }
}

var schemes = []scheme{
	{
		name: "github", old: "gh-old-0f3a9c51", new: "gh-new-7be41d02", other: "gh-other-55aa913",
		cfg: plainCfg(verify.SchemeGitHub),
		sign: func(s string, _ int64, b []byte) http.Header {
			return hdr("X-Hub-Signature-256", githubSig(s, b))
		},
		signatures: func(s string, _ int64, b []byte) []string { return []string{githubSig(s, b)[7:]} },
	},
	{
		name: "stripe", old: "whsec_stripeOld1a2b3c", new: "whsec_stripeNew4d5e6f", other: "whsec_stripeOther7a8b",
		timestamped: true, cfg: clockCfg(verify.SchemeStripe),
		sign: func(s string, ts int64, b []byte) http.Header {
			return hdr("Stripe-Signature", stripeHeader(s, ts, b))
		},
		signatures: func(s string, ts int64, b []byte) []string { return []string{stripeV1(s, ts, b)} },
	},
	{
		name: "standard_webhooks", old: b64secret("standard-old-key-0123456789"), new: b64secret("standard-new-key-9876543210"),
		other: b64secret("standard-other-key-55555555"), timestamped: true, decodedSecretBytes: true,
		cfg: clockCfg(verify.SchemeStandardWebhooks),
		sign: func(s string, ts int64, b []byte) http.Header {
			return hdr("webhook-id", "msg_2b7c9d", "webhook-timestamp", strconv.FormatInt(ts, 10),
				"webhook-signature", standardSig(s, "msg_2b7c9d", ts, b))
		},
		signatures: func(s string, ts int64, b []byte) []string {
			return []string{standardSig(s, "msg_2b7c9d", ts, b)[3:]}
		},
	},
	{
		name: "svix", old: b64secret("svix-old-key-0123456789ab"), new: b64secret("svix-new-key-ba9876543210"),
		other: b64secret("svix-other-key-5555555555"), timestamped: true, decodedSecretBytes: true,
		cfg: clockCfg(verify.SchemeSvix),
		sign: func(s string, ts int64, b []byte) http.Header {
			return hdr("svix-id", "msg_8e1f0a", "svix-timestamp", strconv.FormatInt(ts, 10),
				"svix-signature", standardSig(s, "msg_8e1f0a", ts, b))
		},
		signatures: func(s string, ts int64, b []byte) []string {
			return []string{standardSig(s, "msg_8e1f0a", ts, b)[3:]}
		},
	},
	{
		name: "shopify", old: "shpss_old_1a2b3c4d", new: "shpss_new_5e6f7a8b", other: "shpss_other_9c0d1e",
		cfg: plainCfg(verify.SchemeShopify),
		sign: func(s string, _ int64, b []byte) http.Header {
			return hdr("X-Shopify-Hmac-Sha256", shopifySig(s, b))
		},
		signatures: func(s string, _ int64, b []byte) []string { return []string{shopifySig(s, b)} },
	},
	{
		name: "hmac", old: "hmac-old-3f2e1d0c", new: "hmac-new-7a6b5c4d", other: "hmac-other-9e8f7a",
		cfg: func(s []string, _ time.Duration) verify.Config {
			return verify.Config{Scheme: verify.SchemeHMAC, Secrets: s, Header: "X-Signature", Algorithm: "sha512",
				Encoding: "base64", Prefix: "v0="}
		},
		sign: func(s string, _ int64, b []byte) http.Header {
			return hdr("X-Signature", hmacSig("sha512", "base64", "v0=", s, b))
		},
		signatures: func(s string, _ int64, b []byte) []string {
			return []string{hmacSig("sha512", "base64", "", s, b)}
		},
	},
}

// secretsOf lists what an error may never contain for the scheme: each secret and, for base64 secrets, the key.
func (s scheme) secretsOf() []string {
	out := []string{s.old, s.new, s.other}
	if s.decodedSecretBytes {
		for _, x := range []string{s.old, s.new, s.other} {
			out = append(out, string(standardKey(x)))
		}
	}
	return out
}

func TestVerifyBehaviour(t *testing.T) {
	body := []byte(`{"id":"evt_1","type":"order.paid","amount":1200}`)
	const tol = 5 * 60
	for _, s := range schemes {
		pick := map[string]string{"old": s.old, "new": s.new, "other": s.other}
		for _, c := range []struct {
			name       string
			configured []string // of old, new
			signer     string
			offset     int64 // signed timestamp minus now, in seconds
			tolerance  time.Duration
			tamper     bool
			timeOnly   bool // only for schemes that sign a timestamp
			want       error
		}{
			{name: "valid", configured: []string{"new"}, signer: "new", want: nil},
			{name: "tampered body", configured: []string{"new"}, signer: "new", tamper: true, want: verify.ErrMismatch},
			{name: "wrong secret", configured: []string{"new"}, signer: "other", want: verify.ErrMismatch},
			{name: "rotation: old and new listed, new signs", configured: []string{"old", "new"}, signer: "new"},
			{name: "rotation: old and new listed, old signs", configured: []string{"old", "new"}, signer: "old"},
			{name: "rotation: new listed first, old signs", configured: []string{"new", "old"}, signer: "old"},
			{name: "rotation done: only new listed, old signs", configured: []string{"new"}, signer: "old", want: verify.ErrMismatch},
			{name: "rotation: old and new listed, a third signs", configured: []string{"old", "new"}, signer: "other", want: verify.ErrMismatch},
			{name: "expired", configured: []string{"new"}, signer: "new", offset: -tol - 1, timeOnly: true, want: verify.ErrTimestamp},
			{name: "future", configured: []string{"new"}, signer: "new", offset: tol + 1, timeOnly: true, want: verify.ErrTimestamp},
			{name: "a day old", configured: []string{"new"}, signer: "new", offset: -86400, timeOnly: true, want: verify.ErrTimestamp},
			{name: "at the tolerance, past", configured: []string{"new"}, signer: "new", offset: -tol, timeOnly: true},
			{name: "at the tolerance, future", configured: []string{"new"}, signer: "new", offset: tol, timeOnly: true},
			{name: "expired and wrong secret is a mismatch", configured: []string{"new"}, signer: "other", offset: -3600, timeOnly: true, want: verify.ErrMismatch},
			{name: "expired and tampered is a mismatch", configured: []string{"new"}, signer: "new", offset: -3600, tamper: true, timeOnly: true, want: verify.ErrMismatch},
			{name: "tolerance 30s, 31s old", configured: []string{"new"}, signer: "new", offset: -31, tolerance: 30 * time.Second, timeOnly: true, want: verify.ErrTimestamp},
			{name: "tolerance 30s, 30s ahead", configured: []string{"new"}, signer: "new", offset: 30, tolerance: 30 * time.Second, timeOnly: true},
			{name: "tolerance 2h, an hour old", configured: []string{"new"}, signer: "new", offset: -3600, tolerance: 2 * time.Hour, timeOnly: true},
			// Without a signed timestamp the age cannot be known: the ErrTimestamp below becomes nil for those schemes.
			{name: "a day old, any scheme", configured: []string{"new"}, signer: "new", offset: -86400, want: verify.ErrTimestamp},
		} {
			if c.timeOnly && !s.timestamped {
				continue
			}
			want := c.want
			if !s.timestamped && errors.Is(want, verify.ErrTimestamp) {
				want = nil
			}
			t.Run(s.name+"/"+c.name, func(t *testing.T) {
				var secrets []string
				for _, n := range c.configured {
					secrets = append(secrets, pick[n])
				}
				tol := c.tolerance
				if !s.timestamped {
					tol = 0
				}
				v := mustNew(t, s.cfg(secrets, tol))
				ts := testNow.Unix() + c.offset
				h := s.sign(pick[c.signer], ts, body)
				got := body
				if c.tamper {
					got = bytes.Replace(body, []byte("1200"), []byte("1201"), 1)
				}
				var sigs []string
				for _, x := range []string{s.old, s.new, s.other} {
					sigs = append(sigs, s.signatures(x, ts, got)...)
				}
				checkErr(t, v.Verify(h, got), want, s.name, s.secretsOf(), sigs)
			})
		}
	}
}

// TestVerifyHeaders covers missing and malformed headers and how headers are read, scheme by scheme.
func TestVerifyHeaders(t *testing.T) {
	body := []byte(`{"ok":true}`)
	ts := testNow.Unix()
	tss := strconv.FormatInt(ts, 10)
	const gh, st, sh, hm = "gh-secret-91ac3e", "whsec_stripeK3y9a8b", "shpss_9f8e7d6c", "hmac-secret-4b3a"
	sw := b64secret("standard-key-abcdefghijkl")
	ghSig := githubSig(gh, body)
	stSig := stripeV1(st, ts, body)
	swSig := standardSig(sw, "msg_1", ts, body)
	shSig := shopifySig(sh, body)
	hmSig := hmacSig("sha1", "hex", "", hm, body)
	cfgs := map[string]verify.Config{
		"github":            {Scheme: verify.SchemeGitHub, Secrets: []string{gh}},
		"stripe":            {Scheme: verify.SchemeStripe, Secrets: []string{st}, Now: fixedClock(testNow)},
		"standard_webhooks": {Scheme: verify.SchemeStandardWebhooks, Secrets: []string{sw}, Now: fixedClock(testNow)},
		"svix":              {Scheme: verify.SchemeSvix, Secrets: []string{sw}, Now: fixedClock(testNow)},
		"shopify":           {Scheme: verify.SchemeShopify, Secrets: []string{sh}},
		"hmac":              {Scheme: verify.SchemeHMAC, Secrets: []string{hm}, Header: "X-Sig", Algorithm: "sha1"},
	}
	secrets := []string{gh, st, sw, string(standardKey(sw)), sh, hm}
	computed := []string{ghSig[7:], stSig, swSig[3:], shSig, hmSig}
	upper := strings.ToUpper(ghSig[7:])

	for _, c := range []struct {
		scheme, name string
		h            http.Header
		want         error
	}{
		// github
		{"github", "no headers", nil, verify.ErrMissing},
		{"github", "empty value", hdr("X-Hub-Signature-256", ""), verify.ErrMissing},
		{"github", "blank value", http.Header{"X-Hub-Signature-256": {"  \t "}}, verify.ErrMissing},
		{"github", "only the SHA-1 header", hdr("X-Hub-Signature", "sha1="+strings.Repeat("a", 40)), verify.ErrMissing},
		{"github", "sha1= prefix", hdr("X-Hub-Signature-256", "sha1="+ghSig[7:]), verify.ErrMalformed},
		{"github", "no prefix", hdr("X-Hub-Signature-256", ghSig[7:]), verify.ErrMalformed},
		{"github", "upper-case prefix", hdr("X-Hub-Signature-256", "SHA256="+ghSig[7:]), verify.ErrMalformed},
		{"github", "prefix only", hdr("X-Hub-Signature-256", "sha256="), verify.ErrMalformed},
		{"github", "not hex", hdr("X-Hub-Signature-256", "sha256="+strings.Repeat("zz", 32)), verify.ErrMalformed},
		{"github", "63 hex digits", hdr("X-Hub-Signature-256", ghSig[:len(ghSig)-1]), verify.ErrMalformed},
		{"github", "66 hex digits", hdr("X-Hub-Signature-256", ghSig+"00"), verify.ErrMalformed},
		{"github", "upper-case hex verifies", hdr("X-Hub-Signature-256", "sha256="+upper), nil},
		{"github", "valid", hdr("X-Hub-Signature-256", ghSig), nil},
		{"github", "lower-case name in a hand-built map", http.Header{"x-hub-signature-256": {ghSig}}, nil},
		{"github", "blanks around the value", http.Header{"X-Hub-Signature-256": {" " + ghSig + "\t"}}, nil},
		{"github", "first value is used", hdr("X-Hub-Signature-256", ghSig, "X-Hub-Signature-256", "junk"), nil},
		{"github", "later values are ignored", hdr("X-Hub-Signature-256", "junk", "X-Hub-Signature-256", ghSig), verify.ErrMalformed},
		{"github", "wrong signature", hdr("X-Hub-Signature-256", "sha256="+strings.Repeat("ab", 32)), verify.ErrMismatch},

		// stripe
		{"stripe", "no headers", http.Header{}, verify.ErrMissing},
		{"stripe", "empty value", hdr("Stripe-Signature", ""), verify.ErrMissing},
		{"stripe", "not key=value", hdr("Stripe-Signature", "garbage"), verify.ErrMalformed},
		{"stripe", "v1 before t, as stripe-go's test", hdr("Stripe-Signature", "v1,t=1"), verify.ErrMalformed},
		{"stripe", "t= empty", hdr("Stripe-Signature", "t="), verify.ErrMalformed},
		{"stripe", "no t", hdr("Stripe-Signature", "v1="+stSig), verify.ErrMalformed},
		{"stripe", "t not a number", hdr("Stripe-Signature", "t=abc,v1="+stSig), verify.ErrMalformed},
		{"stripe", "negative t", hdr("Stripe-Signature", "t=-1,v1="+stSig), verify.ErrMalformed},
		{"stripe", "t with a sign", hdr("Stripe-Signature", "t=+"+tss+",v1="+stSig), verify.ErrMalformed},
		{"stripe", "t overflowing int64", hdr("Stripe-Signature", "t=99999999999999999999,v1="+stSig), verify.ErrMalformed},
		{"stripe", "two t", hdr("Stripe-Signature", "t="+tss+",t="+tss+",v1="+stSig), verify.ErrMalformed},
		{"stripe", "no v1", hdr("Stripe-Signature", "t="+tss), verify.ErrMalformed},
		{"stripe", "only v0", hdr("Stripe-Signature", "t="+tss+",v0="+stSig), verify.ErrMalformed},
		{"stripe", "v1 not hex", hdr("Stripe-Signature", "t="+tss+",v1=bad_signature"), verify.ErrMalformed},
		{"stripe", "trailing comma", hdr("Stripe-Signature", "t="+tss+",v1="+stSig+","), verify.ErrMalformed},
		{"stripe", "valid", hdr("Stripe-Signature", "t="+tss+",v1="+stSig), nil},
		{"stripe", "valid, elements reordered", hdr("Stripe-Signature", "v1="+stSig+",t="+tss), nil},
		{"stripe", "valid, blanks after commas", hdr("Stripe-Signature", "t="+tss+", v1="+stSig), nil},
		{"stripe", "an unreadable v1 beside a valid one is skipped, as stripe-go", hdr("Stripe-Signature", "t="+tss+",v1="+stSig+",v1=bad_signature"), nil},
		{"stripe", "several v1, one valid", hdr("Stripe-Signature", "t="+tss+",v1="+strings.Repeat("0", 64)+",v1="+stSig+",v0=ff"), nil},
		{"stripe", "unknown elements ignored", hdr("Stripe-Signature", "t="+tss+",v1="+stSig+",v9=x,foo=bar"), nil},
		{"stripe", "upper-case hex verifies", hdr("Stripe-Signature", "t="+tss+",v1="+strings.ToUpper(stSig)), nil},
		{"stripe", "signature for another t", hdr("Stripe-Signature", "t="+strconv.FormatInt(ts+1, 10)+",v1="+stSig), verify.ErrMismatch},
		{"stripe", "leading zeros in t sign the same number", hdr("Stripe-Signature", "t=0"+tss+",v1="+stSig), nil},

		// standard_webhooks
		{"standard_webhooks", "no headers", http.Header{}, verify.ErrMissing},
		{"standard_webhooks", "no id", hdr("webhook-timestamp", tss, "webhook-signature", swSig), verify.ErrMissing},
		{"standard_webhooks", "no timestamp", hdr("webhook-id", "msg_1", "webhook-signature", swSig), verify.ErrMissing},
		{"standard_webhooks", "no signature", hdr("webhook-id", "msg_1", "webhook-timestamp", tss), verify.ErrMissing},
		{"standard_webhooks", "svix names are not read", hdr("svix-id", "msg_1", "svix-timestamp", tss, "svix-signature", swSig), verify.ErrMissing},
		{"standard_webhooks", "timestamp not a number", hdr("webhook-id", "msg_1", "webhook-timestamp", "soon", "webhook-signature", swSig), verify.ErrMalformed},
		{"standard_webhooks", "timestamp with a fraction", hdr("webhook-id", "msg_1", "webhook-timestamp", tss+".5", "webhook-signature", swSig), verify.ErrMalformed},
		{"standard_webhooks", "timestamp with a sign", hdr("webhook-id", "msg_1", "webhook-timestamp", "+"+tss, "webhook-signature", swSig), verify.ErrMalformed},
		{"standard_webhooks", "no v1 entry", hdr("webhook-id", "msg_1", "webhook-timestamp", tss, "webhook-signature", "v2,"+swSig[3:]), verify.ErrMalformed},
		{"standard_webhooks", "v1, without a value", hdr("webhook-id", "msg_1", "webhook-timestamp", tss, "webhook-signature", "v1,"), verify.ErrMalformed},
		{"standard_webhooks", "garbage signature", hdr("webhook-id", "msg_1", "webhook-timestamp", tss, "webhook-signature", "garbage"), verify.ErrMalformed},
		{"standard_webhooks", "v1a (asymmetric) is not accepted", hdr("webhook-id", "msg_1", "webhook-timestamp", tss, "webhook-signature", "v1a,"+swSig[3:]), verify.ErrMalformed},
		{"standard_webhooks", "valid", hdr("webhook-id", "msg_1", "webhook-timestamp", tss, "webhook-signature", swSig), nil},
		{"standard_webhooks", "valid among others, as the library's multi-signature test", hdr("webhook-id", "msg_1", "webhook-timestamp", tss,
			"webhook-signature", "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= v2,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= "+swSig), nil},
		{"standard_webhooks", "valid after a malformed entry", hdr("webhook-id", "msg_1", "webhook-timestamp", tss, "webhook-signature", ",,, v1,not,base64  "+swSig), nil},
		{"standard_webhooks", "valid with trailing data", hdr("webhook-id", "msg_1", "webhook-timestamp", tss, "webhook-signature", swSig+",extra"), verify.ErrMismatch},
		{"standard_webhooks", "another id", hdr("webhook-id", "msg_2", "webhook-timestamp", tss, "webhook-signature", swSig), verify.ErrMismatch},
		{"standard_webhooks", "lower-case names in a hand-built map", http.Header{"webhook-id": {"msg_1"}, "webhook-timestamp": {tss}, "webhook-signature": {swSig}}, nil},

		// svix
		{"svix", "no headers", http.Header{}, verify.ErrMissing},
		{"svix", "no svix-id, no webhook-*", hdr("svix-timestamp", tss, "svix-signature", swSig), verify.ErrMissing},
		{"svix", "svix-* incomplete, webhook-* incomplete", hdr("svix-id", "msg_1", "svix-timestamp", tss, "webhook-signature", swSig), verify.ErrMissing},
		{"svix", "svix-* names", hdr("svix-id", "msg_1", "svix-timestamp", tss, "svix-signature", swSig), nil},
		{"svix", "webhook-* names", hdr("webhook-id", "msg_1", "webhook-timestamp", tss, "webhook-signature", swSig), nil},
		{"svix", "svix-* complete wins over webhook-*", hdr("svix-id", "msg_1", "svix-timestamp", tss, "svix-signature", swSig,
			"webhook-id", "msg_1", "webhook-timestamp", tss, "webhook-signature", "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc="), nil},
		{"svix", "svix-* complete but wrong: no fallback", hdr("svix-id", "msg_1", "svix-timestamp", tss, "svix-signature", "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=",
			"webhook-id", "msg_1", "webhook-timestamp", tss, "webhook-signature", swSig), verify.ErrMismatch},
		{"svix", "svix-timestamp malformed", hdr("svix-id", "msg_1", "svix-timestamp", "x", "svix-signature", swSig), verify.ErrMalformed},

		// shopify
		{"shopify", "no headers", http.Header{}, verify.ErrMissing},
		{"shopify", "not base64", hdr("X-Shopify-Hmac-Sha256", "invalid_hmac!"), verify.ErrMalformed},
		{"shopify", "hex instead of base64", hdr("X-Shopify-Hmac-Sha256", githubSig(sh, body)[7:]), verify.ErrMalformed},
		{"shopify", "31 bytes", hdr("X-Shopify-Hmac-Sha256", base64.StdEncoding.EncodeToString(make([]byte, 31))), verify.ErrMalformed},
		{"shopify", "valid", hdr("X-Shopify-Hmac-Sha256", shSig), nil},
		{"shopify", "valid without padding", hdr("X-Shopify-Hmac-Sha256", strings.TrimRight(shSig, "=")), nil},
		{"shopify", "new name", hdr("Shopify-Hmac-Sha256", shSig), nil},
		{"shopify", "new name wins: a wrong one is not rescued by the old", hdr("Shopify-Hmac-Sha256", base64.StdEncoding.EncodeToString(make([]byte, 32)),
			"X-Shopify-Hmac-Sha256", shSig), verify.ErrMismatch},
		{"shopify", "wrong signature", hdr("X-Shopify-Hmac-Sha256", base64.StdEncoding.EncodeToString(make([]byte, 32))), verify.ErrMismatch},

		// hmac
		{"hmac", "no headers", http.Header{}, verify.ErrMissing},
		{"hmac", "valid", hdr("X-Sig", hmSig), nil},
		{"hmac", "sha256 length for sha1", hdr("X-Sig", ghSig[7:]), verify.ErrMalformed},
		{"hmac", "not hex", hdr("X-Sig", strings.Repeat("g", 40)), verify.ErrMalformed},
	} {
		t.Run(c.scheme+"/"+c.name, func(t *testing.T) {
			v := mustNew(t, cfgs[c.scheme])
			checkErr(t, v.Verify(c.h, body), c.want, c.scheme, secrets, computed)
		})
	}
}

func TestHMACVariants(t *testing.T) {
	body := []byte("payload=1&x=2")
	const secret = "generic-secret-8c7b6a"
	for _, alg := range []string{"sha1", "sha256", "sha512", "SHA256"} {
		for _, enc := range []string{"hex", "base64", "base64url", ""} {
			for _, prefix := range []string{"", "sha256=", "v1:"} {
				name := fmt.Sprintf("%s/%s/%q", alg, enc, prefix)
				t.Run(name, func(t *testing.T) {
					v := mustNew(t, verify.Config{Scheme: verify.SchemeHMAC, Secrets: []string{secret},
						Header: "x-webhook-signature", Algorithm: alg, Encoding: enc, Prefix: prefix})
					sig := hmacSig(strings.ToLower(alg), enc, prefix, secret, body)
					checkErr(t, v.Verify(hdr("X-Webhook-Signature", sig), body), nil, "hmac", nil, nil)
					checkErr(t, v.Verify(hdr("X-Webhook-Signature", sig), append(body, '!')), verify.ErrMismatch, "hmac",
						[]string{secret}, []string{strings.TrimPrefix(sig, prefix)})
					if prefix != "" {
						checkErr(t, v.Verify(hdr("X-Webhook-Signature", strings.TrimPrefix(sig, prefix)), body),
							verify.ErrMalformed, "hmac", []string{secret}, nil)
					}
				})
			}
		}
	}
}

func TestNone(t *testing.T) {
	v := mustNew(t, verify.Config{Scheme: verify.SchemeNone})
	for _, h := range []http.Header{nil, {}, hdr("X-Hub-Signature-256", "sha256=junk")} {
		if err := v.Verify(h, []byte("anything")); err != nil {
			t.Fatalf("none: %v", err)
		}
	}
}

func TestNewErrors(t *testing.T) {
	const leaked = "s3cr3t-that-must-not-leak"
	for _, c := range []struct {
		name  string
		cfg   verify.Config
		field string
	}{
		{"no scheme", verify.Config{Secrets: []string{leaked}}, "scheme"},
		{"unknown scheme", verify.Config{Scheme: "gitlab", Secrets: []string{leaked}}, "scheme"},
		{"scheme in capitals", verify.Config{Scheme: "GitHub", Secrets: []string{leaked}}, "scheme"},
		{"no secrets", verify.Config{Scheme: verify.SchemeGitHub}, "secrets"},
		{"empty secret", verify.Config{Scheme: verify.SchemeStripe, Secrets: []string{leaked, ""}}, "secrets[1]"},
		{"trailing newline", verify.Config{Scheme: verify.SchemeShopify, Secrets: []string{leaked + "\n"}}, "secrets[0]"},
		{"leading blank", verify.Config{Scheme: verify.SchemeGitHub, Secrets: []string{" " + leaked}}, "secrets[0]"},
		{"duplicate", verify.Config{Scheme: verify.SchemeGitHub, Secrets: []string{leaked, "other-1", leaked}}, "secrets[2]"},
		{"header on github", verify.Config{Scheme: verify.SchemeGitHub, Secrets: []string{leaked}, Header: "X-Sig"}, "header"},
		{"algorithm on stripe", verify.Config{Scheme: verify.SchemeStripe, Secrets: []string{leaked}, Algorithm: "sha1"}, "algorithm"},
		{"encoding on shopify", verify.Config{Scheme: verify.SchemeShopify, Secrets: []string{leaked}, Encoding: "hex"}, "encoding"},
		{"prefix on svix", verify.Config{Scheme: verify.SchemeSvix, Secrets: []string{b64secret(leaked)}, Prefix: "v1,"}, "prefix"},
		{"tolerance on github", verify.Config{Scheme: verify.SchemeGitHub, Secrets: []string{leaked}, Tolerance: time.Minute}, "tolerance"},
		{"tolerance on hmac", verify.Config{Scheme: verify.SchemeHMAC, Secrets: []string{leaked}, Header: "X-Sig", Tolerance: time.Minute}, "tolerance"},
		{"negative tolerance", verify.Config{Scheme: verify.SchemeStripe, Secrets: []string{leaked}, Tolerance: -time.Second}, "tolerance"},
		{"secrets on none", verify.Config{Scheme: verify.SchemeNone, Secrets: []string{leaked}}, "secrets"},
		{"standard secret not base64", verify.Config{Scheme: verify.SchemeStandardWebhooks, Secrets: []string{"whsec_" + leaked + "!"}}, "secrets[0]"},
		{"standard secret empty after whsec_", verify.Config{Scheme: verify.SchemeStandardWebhooks, Secrets: []string{"whsec_"}}, "secrets[0]"},
		{"standard duplicate spelled two ways", verify.Config{Scheme: verify.SchemeSvix,
			Secrets: []string{b64secret(leaked), strings.TrimPrefix(b64secret(leaked), "whsec_")}}, "secrets[1]"},
		{"hmac without header", verify.Config{Scheme: verify.SchemeHMAC, Secrets: []string{leaked}}, "header"},
		{"hmac header with a blank", verify.Config{Scheme: verify.SchemeHMAC, Secrets: []string{leaked}, Header: "X Sig"}, "header"},
		{"hmac header with a colon", verify.Config{Scheme: verify.SchemeHMAC, Secrets: []string{leaked}, Header: "X-Sig:"}, "header"},
		{"hmac md5", verify.Config{Scheme: verify.SchemeHMAC, Secrets: []string{leaked}, Header: "X-Sig", Algorithm: "md5"}, "algorithm"},
		{"hmac base32", verify.Config{Scheme: verify.SchemeHMAC, Secrets: []string{leaked}, Header: "X-Sig", Encoding: "base32"}, "encoding"},
		{"hmac prefix with a blank", verify.Config{Scheme: verify.SchemeHMAC, Secrets: []string{leaked}, Header: "X-Sig", Prefix: "sha256= "}, "prefix"},
	} {
		t.Run(c.name, func(t *testing.T) {
			v, err := verify.New(c.cfg)
			if err == nil {
				t.Fatalf("New accepted %v: %v", c.cfg, v)
			}
			var fe *verify.FieldError
			if !errors.As(err, &fe) || fe.Field != c.field {
				t.Fatalf("New: %v, want a *FieldError for %q", err, c.field)
			}
			if !strings.HasPrefix(err.Error(), "verify: "+c.field+": ") {
				t.Fatalf("error %q does not start with %q", err, "verify: "+c.field+": ")
			}
			if strings.Contains(err.Error(), leaked) || strings.Contains(err.Error(), base64.StdEncoding.EncodeToString([]byte(leaked))) {
				t.Fatalf("error %q contains the secret", err)
			}
		})
	}
}

// TestNoSecretWhenPrinted formats Configs and Verifiers every way a log line might.
func TestNoSecretWhenPrinted(t *testing.T) {
	const raw = "printed-secret-7d6c5b4a"
	key := "key-bytes-never-printed-1234"
	for _, cfg := range []verify.Config{
		{Scheme: verify.SchemeGitHub, Secrets: []string{raw, raw + "-2"}},
		{Scheme: verify.SchemeStripe, Secrets: []string{raw}, Tolerance: time.Minute, Now: time.Now},
		{Scheme: verify.SchemeStandardWebhooks, Secrets: []string{b64secret(key)}},
		{Scheme: verify.SchemeSvix, Secrets: []string{b64secret(key)}},
		{Scheme: verify.SchemeShopify, Secrets: []string{raw}},
		{Scheme: verify.SchemeHMAC, Secrets: []string{raw}, Header: "X-Sig", Algorithm: "sha512", Encoding: "base64url", Prefix: "v1="},
	} {
		v := mustNew(t, cfg)
		var out strings.Builder
		for _, x := range []any{cfg, &cfg, v} {
			fmt.Fprintf(&out, "%v|%+v|%#v|%s\n", x, x, x, x)
		}
		var logged bytes.Buffer
		slog.New(slog.NewJSONHandler(&logged, nil)).Info("config", "cfg", cfg, "verifier", v)
		slog.New(slog.NewTextHandler(&logged, nil)).Info("config", "cfg", cfg, "verifier", v)
		all := out.String() + logged.String()
		for _, s := range []string{raw, b64secret(key), strings.TrimPrefix(b64secret(key), "whsec_"), key} {
			if strings.Contains(all, s) {
				t.Fatalf("%s: printing shows a secret:\n%s", cfg.Scheme, all)
			}
		}
		if !strings.Contains(all, cfg.Scheme) {
			t.Fatalf("printing does not even name the scheme:\n%s", all)
		}
	}
}

func TestSchemes(t *testing.T) {
	want := []string{"github", "hmac", "none", "shopify", "standard_webhooks", "stripe", "svix"}
	if got := verify.Schemes(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Schemes() = %v, want %v", got, want)
	}
	for _, s := range verify.Schemes() {
		cfg := verify.Config{Scheme: s, Secrets: []string{b64secret("k")}}
		if s == verify.SchemeNone {
			cfg.Secrets = nil
		}
		if s == verify.SchemeHMAC {
			cfg.Header = "X-Sig"
		}
		if _, err := verify.New(cfg); err != nil {
			t.Errorf("New(%s): %v", s, err)
		}
	}
}

func TestReason(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{verify.ErrMissing, "missing"},
		{fmt.Errorf("wrapped: %w", verify.ErrMalformed), "malformed"},
		{verify.ErrMismatch, "mismatch"},
		{verify.ErrTimestamp, "timestamp"},
		{errors.New("something else"), "other"},
	} {
		if got := verify.Reason(c.err); got != c.want {
			t.Errorf("Reason(%v) = %q, want %q", c.err, got, c.want)
		}
	}
	// And on a real rejection.
	v := mustNew(t, verify.Config{Scheme: verify.SchemeGitHub, Secrets: []string{"x-secret"}})
	if got := verify.Reason(v.Verify(http.Header{}, nil)); got != "missing" {
		t.Errorf("Reason of a missing header = %q", got)
	}
}

// TestConfigCopied checks that a Verifier does not see later changes to the Config it was built from.
func TestConfigCopied(t *testing.T) {
	secrets := []string{"copied-secret-1"}
	v := mustNew(t, verify.Config{Scheme: verify.SchemeGitHub, Secrets: secrets})
	body := []byte("b")
	h := hdr("X-Hub-Signature-256", githubSig("copied-secret-1", body))
	secrets[0] = "changed"
	if err := v.Verify(h, body); err != nil {
		t.Fatalf("Verify after the caller changed its slice: %v", err)
	}
}

// TestConcurrentVerify runs one Verifier from many goroutines (meaningful under -race).
func TestConcurrentVerify(t *testing.T) {
	for _, s := range schemes {
		v := mustNew(t, s.cfg([]string{s.old, s.new}, 0))
		body := []byte(`{"n":1}`)
		good, bad := s.sign(s.new, testNow.Unix(), body), s.sign(s.other, testNow.Unix(), body)
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 50 {
					if err := v.Verify(good, body); err != nil {
						t.Errorf("%s: %v", s.name, err)
						return
					}
					if err := v.Verify(bad, body); !errors.Is(err, verify.ErrMismatch) {
						t.Errorf("%s #%d: %v", s.name, i, err)
						return
					}
				}
			}()
		}
		wg.Wait()
	}
}
