package verify_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/dedupeworker/dedupeworker/receiver/verify"
)

// The fuzz targets feed arbitrary header values and bodies to each scheme's header parser (through Verify, the
// only way in) and check that it never panics, that every error keeps the promises about its text, and that
// nothing verifies unless it carries the true signature: the oracle in each target is computed by the tests' own
// signers, not by the package.

const (
	fuzzGitHubSecret  = "fuzz-github-secret-1"
	fuzzStripeSecret  = "whsec_fuzzStripeSecret2"
	fuzzShopifySecret = "fuzz-shopify-secret-3"
	fuzzHMACSecret    = "fuzz-hmac-secret-4"
)

var fuzzStandardSecret = b64secret("fuzz-standard-key-5-abcdef")

func trimBlank(s string) string { return strings.Trim(s, " \t") }

func FuzzGitHub(f *testing.F) {
	body := []byte(`{"zen":"Design for failure."}`)
	f.Add(githubSig(fuzzGitHubSecret, body), body)
	f.Add("sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17", []byte("Hello, World!"))
	for _, s := range []string{"", "sha256=", "sha1=abc", "sha256=zz", " sha256=" + strings.Repeat("A", 64) + " ", "\x00\xff"} {
		f.Add(s, body)
	}
	v := mustNew(f, verify.Config{Scheme: verify.SchemeGitHub, Secrets: []string{fuzzGitHubSecret, "fuzz-github-old"}})
	f.Fuzz(func(t *testing.T, sig string, body []byte) {
		want := hex.EncodeToString(mac(sha256.New, []byte(fuzzGitHubSecret), body))
		old := hex.EncodeToString(mac(sha256.New, []byte("fuzz-github-old"), body))
		err := v.Verify(http.Header{"X-Hub-Signature-256": {sig}}, body)
		val := trimBlank(sig)
		genuine := strings.HasPrefix(val, "sha256=") && (strings.EqualFold(val[7:], want) || strings.EqualFold(val[7:], old))
		if (err == nil) != genuine {
			t.Fatalf("Verify(%q) = %v, but the signature is genuine: %v", sig, err, genuine)
		}
		if err != nil {
			checkErrText(t, err, "github", []string{fuzzGitHubSecret, "fuzz-github-old"}, []string{want, old})
		}
	})
}

var stripeT = regexp.MustCompile(`(?:^|,)[ \t]*t=([0-9]+)`)

func FuzzStripe(f *testing.F) {
	body := []byte(`{"id":"evt_1","object":"event"}`)
	now := testNow.Unix()
	f.Add(stripeHeader(fuzzStripeSecret, now, body), body)
	f.Add(stripeHeader(fuzzStripeSecret, now-301, body), body)
	f.Add(stripeHeader(fuzzStripeSecret, now, body)+",v1="+strings.Repeat("0", 64)+",v0=abc", body)
	f.Add("t=1533204620,v1=2220f87ef101a04665f11cdf770523143f875572008577fa0f20882ddb9cc3c7,v0=63f3", []byte(stripeEvent))
	for _, s := range []string{"", "t=", "t=1", "v1=", "t=1,t=2,v1=00", ",,,", "t=99999999999999999999", "=", "t==1"} {
		f.Add(s, body)
	}
	v := mustNew(f, verify.Config{Scheme: verify.SchemeStripe, Secrets: []string{fuzzStripeSecret},
		Now: fixedClock(testNow)})
	f.Fuzz(func(t *testing.T, sig string, body []byte) {
		err := v.Verify(http.Header{"Stripe-Signature": {sig}}, body)
		if err != nil {
			checkErrText(t, err, "stripe", []string{fuzzStripeSecret}, []string{stripeV1(fuzzStripeSecret, now, body)})
			return
		}
		// Verified: some t= in the header must be within the tolerance and signed, as a v1, with the secret.
		lower := strings.ToLower(sig)
		for _, m := range stripeT.FindAllStringSubmatch(trimBlank(sig), -1) {
			ts, perr := strconv.ParseInt(m[1], 10, 64)
			if perr != nil || ts < now-300 || ts > now+300 {
				continue
			}
			if strings.Contains(lower, "v1="+stripeV1(fuzzStripeSecret, ts, body)) {
				return
			}
		}
		t.Fatalf("Verify(%q) = nil without a genuine v1 signature within the tolerance", sig)
	})
}

func FuzzStandardWebhooks(f *testing.F) {
	body := []byte(`{"test": 2432232314}`)
	now := testNow.Unix()
	tss := strconv.FormatInt(now, 10)
	f.Add("msg_1", tss, standardSig(fuzzStandardSecret, "msg_1", now, body), body, false)
	f.Add("msg_1", tss, "v2,x "+standardSig(fuzzStandardSecret, "msg_1", now, body)+" v1,", body, true)
	f.Add("msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", body, false)
	for _, c := range [][2]string{{"", ""}, {tss, ""}, {"+1", "v1,"}, {"1.5", "v1,a"}, {tss, "v1"}, {tss, ",,,"}, {"99999999999999999999", "v1,x"}} {
		f.Add("id", c[0], c[1], body, false)
	}
	secrets := []string{fuzzStandardSecret, string(standardKey(fuzzStandardSecret))}
	standard := mustNew(f, verify.Config{Scheme: verify.SchemeStandardWebhooks, Secrets: []string{fuzzStandardSecret},
		Now: fixedClock(testNow)})
	svix := mustNew(f, verify.Config{Scheme: verify.SchemeSvix, Secrets: []string{fuzzStandardSecret},
		Now: fixedClock(testNow)})
	f.Fuzz(func(t *testing.T, id, ts, sig string, body []byte, useSvix bool) {
		v, scheme, h := standard, "standard_webhooks", http.Header{"Webhook-Id": {id}, "Webhook-Timestamp": {ts}, "Webhook-Signature": {sig}}
		if useSvix {
			v, scheme, h = svix, "svix", http.Header{"Svix-Id": {id}, "Svix-Timestamp": {ts}, "Svix-Signature": {sig}}
		}
		err := v.Verify(h, body)
		n, perr := strconv.ParseInt(trimBlank(ts), 10, 64)
		var want string
		if perr == nil {
			want = standardSig(fuzzStandardSecret, trimBlank(id), n, body)
		}
		if err != nil {
			checkErrText(t, err, scheme, secrets, []string{strings.TrimPrefix(want, "v1,")})
			return
		}
		if perr != nil || n < now-300 || n > now+300 || trimBlank(id) == "" {
			t.Fatalf("Verify(%q, %q, %q) = nil with a timestamp outside the tolerance or no id", id, ts, sig)
		}
		for _, entry := range strings.Split(trimBlank(sig), " ") {
			if entry == want {
				return
			}
		}
		t.Fatalf("Verify(%q, %q, %q) = nil without the genuine signature %q", id, ts, sig, want)
	})
}

func FuzzShopify(f *testing.F) {
	body := []byte(`{"id":820982911946154508}`)
	good := shopifySig(fuzzShopifySecret, body)
	f.Add("", good, body)
	f.Add(good, "junk", body)
	f.Add(strings.TrimRight(good, "="), "", body)
	f.Add("", "yCGX/RrK4fcuNtr3ztk5tQGsOBjcAzHpGLdMUrbV8yI=", []byte("foo=anything"))
	for _, s := range []string{"", "=", "====", "invalid_hmac", "\r\n" + good, strings.Repeat("A", 43)} {
		f.Add("", s, body)
	}
	v := mustNew(f, verify.Config{Scheme: verify.SchemeShopify, Secrets: []string{fuzzShopifySecret}})
	f.Fuzz(func(t *testing.T, current, legacy string, body []byte) {
		h := http.Header{"Shopify-Hmac-Sha256": {current}, "X-Shopify-Hmac-Sha256": {legacy}}
		err := v.Verify(h, body)
		want := mac(sha256.New, []byte(fuzzShopifySecret), body)
		if err != nil {
			checkErrText(t, err, "shopify", []string{fuzzShopifySecret}, []string{base64.StdEncoding.EncodeToString(want)})
			return
		}
		used := trimBlank(current)
		if used == "" {
			used = trimBlank(legacy)
		}
		got, derr := base64.StdEncoding.DecodeString(used)
		if derr != nil {
			got, derr = base64.RawStdEncoding.DecodeString(strings.TrimRight(used, "="))
		}
		if derr != nil || !hmac.Equal(got, want) {
			t.Fatalf("Verify(%q, %q) = nil, but the value used does not decode to the signature", current, legacy)
		}
	})
}

func FuzzHMAC(f *testing.F) {
	body := []byte("a=1&b=2")
	f.Add(hmacSig("sha256", "hex", "sha256=", fuzzHMACSecret, body), "sha256=", uint8(1), uint8(0), body)
	f.Add(hmacSig("sha1", "base64", "", fuzzHMACSecret, body), "", uint8(0), uint8(1), body)
	f.Add(hmacSig("sha512", "base64url", "v1=", fuzzHMACSecret, body), "v1=", uint8(2), uint8(2), body)
	f.Add("", " x", uint8(7), uint8(9), body)
	algs, encs := []string{"sha1", "sha256", "sha512", "md5"}, []string{"hex", "base64", "base64url", "base32"}
	f.Fuzz(func(t *testing.T, sig, prefix string, alg, enc uint8, body []byte) {
		cfg := verify.Config{Scheme: verify.SchemeHMAC, Secrets: []string{fuzzHMACSecret}, Header: "X-Sig",
			Algorithm: algs[int(alg)%len(algs)], Encoding: encs[int(enc)%len(encs)], Prefix: prefix}
		v, err := verify.New(cfg)
		if err != nil {
			var fe *verify.FieldError
			if !errors.As(err, &fe) || !strings.HasPrefix(err.Error(), "verify: ") || strings.Contains(err.Error(), fuzzHMACSecret) {
				t.Fatalf("New(%v): %v", cfg, err)
			}
			return
		}
		err = v.Verify(http.Header{"X-Sig": {sig}}, body)
		want := mac(testHashes[cfg.Algorithm], []byte(fuzzHMACSecret), body)
		if err != nil {
			checkErrText(t, err, "hmac", []string{fuzzHMACSecret}, []string{
				hex.EncodeToString(want), base64.RawStdEncoding.EncodeToString(want), base64.RawURLEncoding.EncodeToString(want)})
			return
		}
		val, ok := strings.CutPrefix(trimBlank(sig), prefix)
		if !ok {
			t.Fatalf("Verify(%q) = nil without the prefix %q", sig, prefix)
		}
		var got []byte
		switch cfg.Encoding {
		case "hex":
			got, _ = hex.DecodeString(val)
		case "base64":
			got, _ = base64.RawStdEncoding.DecodeString(strings.TrimRight(val, "="))
		case "base64url":
			got, _ = base64.RawURLEncoding.DecodeString(strings.TrimRight(val, "="))
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("Verify(%q) = nil, but it does not decode to the signature", sig)
		}
	})
}
