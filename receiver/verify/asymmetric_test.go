package verify_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/receiver/verify"
)

// Standard Webhooks' asymmetric signatures, as its specification documents them: "v1a," + base64 of the Ed25519
// signature of "<id>.<timestamp>.<body>", verified with the sender's public key, given as "whpk_" + base64.

func ed25519Key(seed byte) (ed25519.PrivateKey, string) {
	priv := ed25519.NewKeyFromSeed([]byte(strings.Repeat(string(rune('a'+seed)), ed25519.SeedSize)))
	return priv, "whpk_" + base64.StdEncoding.EncodeToString(priv.Public().(ed25519.PublicKey))
}

func v1aSig(priv ed25519.PrivateKey, id string, ts int64, body []byte) string {
	msg := id + "." + strconv.FormatInt(ts, 10) + "." + string(body)
	return "v1a," + base64.StdEncoding.EncodeToString(ed25519.Sign(priv, []byte(msg)))
}

// A delivery signed only with v1a verifies with the sender's public key among the secrets, beside symmetric
// secrets or alone, under both header sets of svix; a wrong key, a changed body or id, and a stale timestamp do
// not. Before, every v1a-only delivery was refused as malformed.
func TestStandardWebhooksV1a(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	ts := now.Unix()
	body := []byte(`{"type":"user.created"}`)
	priv, pub := ed25519Key(1)
	other, otherPub := ed25519Key(2)
	const sym = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	sw := func(id, sig string, at int64) http.Header {
		return http.Header{"Webhook-Id": {id}, "Webhook-Timestamp": {strconv.FormatInt(at, 10)}, "Webhook-Signature": {sig}}
	}
	for _, c := range []struct {
		name    string
		scheme  string
		secrets []string
		h       http.Header
		body    []byte
		want    error
	}{
		{"v1a alone", "standard_webhooks", []string{pub}, sw("msg_1", v1aSig(priv, "msg_1", ts, body), ts), body, nil},
		{"v1a beside a symmetric secret", "standard_webhooks", []string{sym, pub}, sw("msg_1", v1aSig(priv, "msg_1", ts, body), ts), body, nil},
		{"v1 beside a public key", "standard_webhooks", []string{pub, sym}, sw("msg_1", standardSig(sym, "msg_1", ts, body), ts), body, nil},
		{"v1a among other entries", "standard_webhooks", []string{otherPub, pub},
			sw("msg_1", "v1,AAAA v1a,"+base64.StdEncoding.EncodeToString(make([]byte, 64))+" "+v1aSig(priv, "msg_1", ts, body), ts), body, nil},
		{"svix names", "svix", []string{pub}, http.Header{"Svix-Id": {"msg_1"}, "Svix-Timestamp": {strconv.FormatInt(ts, 10)},
			"Svix-Signature": {v1aSig(priv, "msg_1", ts, body)}}, body, nil},
		{"another sender's key", "standard_webhooks", []string{pub}, sw("msg_1", v1aSig(other, "msg_1", ts, body), ts), body, verify.ErrMismatch},
		{"body changed", "standard_webhooks", []string{pub}, sw("msg_1", v1aSig(priv, "msg_1", ts, body), ts), append(body, ' '), verify.ErrMismatch},
		{"id changed", "standard_webhooks", []string{pub}, sw("msg_2", v1aSig(priv, "msg_1", ts, body), ts), body, verify.ErrMismatch},
		{"not base64", "standard_webhooks", []string{pub}, sw("msg_1", "v1a,!!!", ts), body, verify.ErrMismatch},
		{"stale", "standard_webhooks", []string{pub}, sw("msg_1", v1aSig(priv, "msg_1", ts-3600, body), ts-3600), body, verify.ErrTimestamp},
		{"v1a without a public key", "standard_webhooks", []string{sym}, sw("msg_1", v1aSig(priv, "msg_1", ts, body), ts), body, verify.ErrMalformed},
	} {
		t.Run(c.name, func(t *testing.T) {
			v, err := verify.New(verify.Config{Scheme: c.scheme, Secrets: c.secrets, Now: func() time.Time { return now }})
			if err != nil {
				t.Fatal(err)
			}
			d, err := verify.VerifyDelivery(v, c.h, c.body)
			if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
				t.Fatalf("Verify: %v, want %v", err, c.want)
			}
			if err == nil && (d.ID != "msg_1" || !d.Signed) {
				t.Errorf("Delivery %+v, want the signed id msg_1", d)
			}
			if err != nil && strings.Contains(err.Error(), strings.TrimPrefix(pub, "whpk_")) {
				t.Errorf("the error shows a key: %v", err)
			}
		})
	}
}

// Keys New refuses: a signing key (whsk_, the sender's), a public key of the wrong size or not base64, and one
// public key twice.
func TestStandardWebhooksV1aKeys(t *testing.T) {
	_, pub := ed25519Key(3)
	for _, c := range []struct {
		name    string
		secrets []string
		want    string
	}{
		{"signing key", []string{"whsk_" + base64.StdEncoding.EncodeToString(make([]byte, 64))}, "secrets[0]: an Ed25519 signing key"},
		{"short public key", []string{"whpk_" + base64.StdEncoding.EncodeToString(make([]byte, 31))}, "secrets[0]: not an Ed25519 public key"},
		{"not base64", []string{"whpk_***"}, "secrets[0]: not an Ed25519 public key"},
		{"twice", []string{pub, pub}, "secrets[1]: same key as secrets[0]"},
	} {
		_, err := verify.New(verify.Config{Scheme: "standard_webhooks", Secrets: c.secrets})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

// Which id a verification read: the signed message id for the Standard Webhooks schemes (from the header set it
// used), the documented but unsigned delivery id for github and shopify, none for the others.
func TestVerifyDeliveryID(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	ts := strconv.FormatInt(now.Unix(), 10)
	body := []byte(`{}`)
	const sym = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	for _, c := range []struct {
		name, scheme, secret string
		h                    http.Header
		want                 verify.Delivery
	}{
		{"svix, svix-*", "svix", sym, http.Header{"Svix-Id": {"a"}, "Svix-Timestamp": {ts}, "Svix-Signature": {standardSig(sym, "a", now.Unix(), body)}},
			verify.Delivery{ID: "a", Header: "Svix-Id", Signed: true}},
		{"svix, webhook-*", "svix", sym, http.Header{"Webhook-Id": {"b"}, "Webhook-Timestamp": {ts}, "Webhook-Signature": {standardSig(sym, "b", now.Unix(), body)}, "Svix-Id": {"x"}},
			verify.Delivery{ID: "b", Header: "Webhook-Id", Signed: true}},
		{"github", "github", "s", http.Header{"X-Hub-Signature-256": {githubSig("s", body)}, "X-Github-Delivery": {" d "}},
			verify.Delivery{ID: "d", Header: "X-Github-Delivery"}},
		{"github without an id", "github", "s", http.Header{"X-Hub-Signature-256": {githubSig("s", body)}}, verify.Delivery{}},
		{"shopify events", "shopify", "s", http.Header{"Shopify-Hmac-Sha256": {shopifySig("s", body)}, "Shopify-Webhook-Id": {"e"}},
			verify.Delivery{ID: "e", Header: "Shopify-Webhook-Id"}},
		{"shopify", "shopify", "s", http.Header{"X-Shopify-Hmac-Sha256": {shopifySig("s", body)}, "X-Shopify-Webhook-Id": {"f"}},
			verify.Delivery{ID: "f", Header: "X-Shopify-Webhook-Id"}},
		{"stripe", "stripe", "s", http.Header{"Stripe-Signature": {stripeHeader("s", now.Unix(), body)}}, verify.Delivery{}},
	} {
		v, err := verify.New(verify.Config{Scheme: c.scheme, Secrets: []string{c.secret}, Now: func() time.Time { return now }})
		if err != nil {
			t.Fatal(err)
		}
		d, err := verify.VerifyDelivery(v, c.h, body)
		if err != nil || d != c.want {
			t.Errorf("%s: %+v %v, want %+v", c.name, d, err, c.want)
		}
	}
}

// Verify accepts a v1a delivery only with the genuine Ed25519 signature (deterministic: one per key and message)
// of "<id>.<timestamp>.<body>" within the tolerance, whatever else the header holds, and never panics.
func FuzzStandardWebhooksV1a(f *testing.F) {
	priv, pub := ed25519Key(4)
	now := time.Unix(1_700_000_000, 0)
	ts := strconv.FormatInt(now.Unix(), 10)
	body := []byte(`{"type":"user.created"}`)
	f.Add("msg_1", ts, v1aSig(priv, "msg_1", now.Unix(), body), body)
	f.Add("msg_1", ts, "v1a,AAAA "+v1aSig(priv, "msg_1", now.Unix(), body)+" v1,AAAA", body)
	f.Add("msg_1", ts, "v1a,"+base64.StdEncoding.EncodeToString(make([]byte, 64)), body)
	f.Add("msg_1", ts, "v1a,", body)
	v, err := verify.New(verify.Config{Scheme: "standard_webhooks", Secrets: []string{pub}, Now: func() time.Time { return now }})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, id, tsv, sig string, body []byte) {
		err := v.Verify(http.Header{"Webhook-Id": {id}, "Webhook-Timestamp": {tsv}, "Webhook-Signature": {sig}}, body)
		if err != nil {
			return
		}
		n, perr := strconv.ParseInt(strings.Trim(tsv, " \t"), 10, 64)
		if perr != nil || n < now.Unix()-300 || n > now.Unix()+300 {
			t.Fatalf("Verify(%q, %q, %q) = nil outside the tolerance", id, tsv, sig)
		}
		want := v1aSig(priv, strings.Trim(id, " \t"), n, body)
		for _, entry := range strings.Split(strings.Trim(sig, " \t"), " ") {
			if entry == want {
				return
			}
		}
		t.Fatalf("Verify(%q, %q, %q) = nil without the genuine signature %q", id, tsv, sig, want)
	})
}
