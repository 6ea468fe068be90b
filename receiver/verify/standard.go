package verify

import (
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
	sets      []headerSet // tried in order: the first set whose three headers are all present is used
	hooks     []*standardwebhooks.Webhook
	tolerance time.Duration
	now       func() time.Time
}

// headerSet are the canonical names of one message's id, timestamp and signature headers.
type headerSet struct{ id, timestamp, signature string }

var (
	webhookHeaders = headerSet{"Webhook-Id", "Webhook-Timestamp", "Webhook-Signature"}
	svixHeaders    = headerSet{"Svix-Id", "Svix-Timestamp", "Svix-Signature"}
)

const secretPrefix = "whsec_"

func newStandard(cfg Config, tol time.Duration, now func() time.Time) (Verifier, error) {
	v := &standardVerifier{scheme: cfg.Scheme, tolerance: tol, now: now, sets: []headerSet{webhookHeaders}}
	if cfg.Scheme == SchemeSvix {
		// Svix's libraries read svix-* and fall back to the unbranded names when those are not all there.
		v.sets = []headerSet{svixHeaders, webhookHeaders}
	}
	keys := make([][]byte, len(cfg.Secrets))
	for i, s := range cfg.Secrets {
		field := fmt.Sprintf("secrets[%d]", i)
		// Decoded here rather than by standardwebhooks.NewWebhook so that the error names the field without
		// quoting the library's message, and so that two spellings of one key (with and without whsec_) are
		// recognised as a duplicate.
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, secretPrefix))
		if err != nil {
			return nil, &FieldError{field, "not base64 (optionally after " + secretPrefix + ")"}
		}
		if len(key) == 0 {
			return nil, &FieldError{field, "empty after " + secretPrefix}
		}
		for j := range i {
			if string(keys[j]) == string(key) {
				return nil, &FieldError{field, fmt.Sprintf("same key as secrets[%d]", j)}
			}
		}
		keys[i] = key
		wh, err := standardwebhooks.NewWebhookRaw(key)
		if err != nil {
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
		return fail(v.scheme, strings.Join(missing, ", "), ErrMissing, detail)
	}
	unix, ok := parseUnix(ts)
	if !ok {
		return fail(v.scheme, set.timestamp, ErrMalformed, "not Unix seconds")
	}
	// The library skips what it cannot use; a header with no v1 entry at all is not a signature of this scheme,
	// which is worth telling apart from a wrong one.
	if !hasV1(sig) {
		return fail(v.scheme, set.signature, ErrMalformed, `no "v1,<base64>" entry`)
	}
	// The library reads the webhook-* names: hand it exactly the three values checked above.
	msg := http.Header{
		"Webhook-Id":        {id},
		"Webhook-Timestamp": {ts},
		"Webhook-Signature": {sig},
	}
	matched := false
	for _, wh := range v.hooks {
		err := wh.VerifyIgnoringTimestamp(body, msg)
		if err == nil {
			matched = true
			break
		}
		if !errors.Is(err, standardwebhooks.ErrNoMatchingSignature) {
			// Not reached: the headers were checked above. The library's message holds no secret, but it is
			// not passed on, to keep the promise about error texts independent of its wording.
			return fail(v.scheme, set.signature, ErrMalformed, "refused by the Standard Webhooks library")
		}
	}
	if !matched {
		return fail(v.scheme, set.signature, ErrMismatch, "no v1 signature matches any of "+countSecrets(len(v.hooks)))
	}
	// Checked after the signature, so that ErrTimestamp always means a genuine but stale (or early) delivery.
	if detail, ok := checkTime(v.now(), unix, v.tolerance); !ok {
		return fail(v.scheme, set.timestamp, ErrTimestamp, detail)
	}
	return nil
}

// hasV1 reports whether the space-separated signature list has a "v1,<something>" entry.
func hasV1(sig string) bool {
	for entry := range strings.SplitSeq(sig, " ") {
		if len(entry) > len("v1,") && strings.HasPrefix(entry, "v1,") {
			return true
		}
	}
	return false
}
