package verify

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// standardVerifier checks Standard Webhooks signatures, under the webhook-* names or (svix) Svix's svix-* names.
// The signature itself is computed and compared by the Standard Webhooks reference library. Its API covers one
// secret, the webhook-* names and the wall clock, so around it this type picks the header names, keeps one library
// Webhook per secret and checks the timestamp against the configured clock (calling VerifyIgnoringTimestamp).
type standardVerifier struct {
	describe
	scheme    string
	sets      []headerSet                 // tried in order: the first set whose three headers are all present is used
	hooks     []*standardwebhooks.Webhook // v1: one per symmetric secret
	public    []ed25519.PublicKey         // v1a: one per whpk_ public key
	tolerance time.Duration
	now       func() time.Time
}

// headerSet are the canonical names of one message's id, timestamp and signature headers.
type headerSet struct{ id, timestamp, signature string }

var (
	webhookHeaders = headerSet{"Webhook-Id", "Webhook-Timestamp", "Webhook-Signature"}
	svixHeaders    = headerSet{"Svix-Id", "Svix-Timestamp", "Svix-Signature"}
)

// Prefixes of Standard Webhooks keys: a symmetric secret (v1, HMAC-SHA256), an Ed25519 public key (v1a) and an
// Ed25519 signing key, which only the sender holds.
const (
	secretPrefix     = "whsec_"
	publicKeyPrefix  = "whpk_"
	signingKeyPrefix = "whsk_"
)

func newStandard(cfg Config, _ *scheme, tol time.Duration, now func() time.Time) (Verifier, error) {
	v := &standardVerifier{scheme: cfg.Scheme, tolerance: tol, now: now, sets: []headerSet{webhookHeaders}}
	if cfg.Scheme == SchemeSvix {
		// Svix's libraries read svix-* and fall back to the unbranded names when those are not all there.
		v.sets = []headerSet{svixHeaders, webhookHeaders}
	}
	keys := make([][]byte, len(cfg.Secrets))
	for i, s := range cfg.Secrets {
		field := fmt.Sprintf("secrets[%d]", i)
		if strings.HasPrefix(s, signingKeyPrefix) {
			return nil, &FieldError{field, "an Ed25519 signing key (" + signingKeyPrefix + "): give the receiver the public key (" + publicKeyPrefix + "…) and keep the signing key with the sender"}
		}
		pk, public := strings.CutPrefix(s, publicKeyPrefix)
		var key []byte
		var err error
		if public {
			if key, err = base64.StdEncoding.DecodeString(pk); err != nil || len(key) != ed25519.PublicKeySize {
				return nil, &FieldError{field, fmt.Sprintf("not an Ed25519 public key: want %s and the base64 of %d bytes", publicKeyPrefix, ed25519.PublicKeySize)}
			}
		} else {
			// Decoded here rather than by standardwebhooks.NewWebhook so that the error names the field without
			// quoting the library's message, and so that two spellings of one key (with and without whsec_) are
			// recognised as a duplicate.
			if key, err = base64.StdEncoding.DecodeString(strings.TrimPrefix(s, secretPrefix)); err != nil {
				return nil, &FieldError{field, "not base64 (optionally after " + secretPrefix + ")"}
			}
			if len(key) == 0 {
				return nil, &FieldError{field, "empty after " + secretPrefix}
			}
		}
		for j := range i {
			if string(keys[j]) == string(key) {
				return nil, &FieldError{field, fmt.Sprintf("same key as secrets[%d]", j)}
			}
		}
		keys[i] = key
		if public {
			v.public = append(v.public, ed25519.PublicKey(key))
			continue
		}
		wh, werr := standardwebhooks.NewWebhookRaw(key)
		if werr != nil {
			return nil, &FieldError{field, "refused by the Standard Webhooks library"}
		}
		v.hooks = append(v.hooks, wh)
	}
	names := "webhook-id, webhook-timestamp, webhook-signature"
	if cfg.Scheme == SchemeSvix {
		names = "svix-id, svix-timestamp, svix-signature (or webhook-*)"
	}
	v.describe = describe{cfg.Scheme + " " + names + " (" + countSecrets(len(keys)) + ", tolerance " + tol.String() + ")"}
	return v, nil
}

func (v *standardVerifier) Verify(h http.Header, body []byte) error {
	_, err := v.verifyDelivery(h, body)
	return err
}

// verifyDelivery is Verify, and the id it verified: the message id the signature covers, from the header set used.
func (v *standardVerifier) verifyDelivery(h http.Header, body []byte) (Delivery, error) {
	var set headerSet
	var id, ts, sig string
	for _, s := range v.sets {
		set = s
		id, ts, sig = header(h, s.id), header(h, s.timestamp), header(h, s.signature)
		if id != "" && ts != "" && sig != "" {
			break
		}
	}
	if id == "" || ts == "" || sig == "" {
		// Name what is missing from the first (preferred) set.
		first := v.sets[0]
		var missing []string
		for _, n := range []string{first.id, first.timestamp, first.signature} {
			if header(h, n) == "" {
				missing = append(missing, n)
			}
		}
		detail := ""
		if len(v.sets) > 1 {
			detail = "and no complete webhook-* set either"
		}
		return Delivery{}, fail(v.scheme, strings.Join(missing, ", "), ErrMissing, detail)
	}
	unix, ok := parseUnix(ts)
	if !ok {
		return Delivery{}, fail(v.scheme, set.timestamp, ErrMalformed, "not Unix seconds")
	}
	// The library skips what it cannot use; a header with no v1 (or v1a) entry at all is not a signature of this
	// scheme, which is worth telling apart from a wrong one.
	v1, v1a := hasEntry(sig, "v1,"), hasEntry(sig, "v1a,")
	switch {
	case !v1 && v1a && len(v.public) == 0:
		return Delivery{}, fail(v.scheme, set.signature, ErrMalformed, `only "v1a,<base64>" (Ed25519) entries, and no public key (`+publicKeyPrefix+`…) among the secrets`)
	case !v1 && !v1a:
		return Delivery{}, fail(v.scheme, set.signature, ErrMalformed, `no "v1,<base64>" or "v1a,<base64>" entry`)
	}
	// The library reads the webhook-* names: hand it exactly the three values checked above.
	msg := http.Header{
		"Webhook-Id":        {id},
		"Webhook-Timestamp": {ts},
		"Webhook-Signature": {sig},
	}
	matched := false
	if v1 {
		for _, wh := range v.hooks {
			err := wh.VerifyIgnoringTimestamp(body, msg)
			if err == nil {
				matched = true
				break
			}
			if !errors.Is(err, standardwebhooks.ErrNoMatchingSignature) {
				// Not reached: the headers were checked above. The library's message holds no secret, but it is
				// not passed on, to keep the promise about error texts independent of its wording.
				return Delivery{}, fail(v.scheme, set.signature, ErrMalformed, "refused by the Standard Webhooks library")
			}
		}
	}
	if !matched && v1a && len(v.public) > 0 {
		matched = v.checkV1a(id, ts, sig, body)
	}
	if !matched {
		return Delivery{}, fail(v.scheme, set.signature, ErrMismatch, "no v1 or v1a signature matches any of "+countSecrets(len(v.hooks)+len(v.public)))
	}
	// Checked after the signature, so that ErrTimestamp always means a genuine but stale (or early) delivery.
	if detail, ok := checkTime(v.now(), unix, v.tolerance); !ok {
		return Delivery{}, fail(v.scheme, set.timestamp, ErrTimestamp, detail)
	}
	return Delivery{ID: id, Header: set.id, Signed: true}, nil
}

// checkV1a reports whether a "v1a,<base64>" entry of sig is an Ed25519 signature, by one of the public keys, of
// "<id>.<timestamp>.<body>" (the Standard Webhooks specification's asymmetric scheme; the reference library for Go
// verifies v1 only).
func (v *standardVerifier) checkV1a(id, ts, sig string, body []byte) bool {
	var signed []byte
	for entry := range strings.SplitSeq(sig, " ") {
		enc, ok := strings.CutPrefix(entry, "v1a,")
		if !ok {
			continue
		}
		s, err := base64.StdEncoding.DecodeString(enc)
		if err != nil || len(s) != ed25519.SignatureSize {
			continue
		}
		if signed == nil {
			signed = make([]byte, 0, len(id)+len(ts)+2+len(body))
			signed = append(append(append(append(append(signed, id...), '.'), ts...), '.'), body...)
		}
		for _, pk := range v.public {
			if ed25519.Verify(pk, signed, s) {
				return true
			}
		}
	}
	return false
}

// hasEntry reports whether the space-separated signature list has a "<version>,<something>" entry (version
// given with its comma).
func hasEntry(sig, version string) bool {
	for entry := range strings.SplitSeq(sig, " ") {
		if len(entry) > len(version) && strings.HasPrefix(entry, version) {
			return true
		}
	}
	return false
}
