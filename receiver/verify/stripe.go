package verify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// stripeVerifier checks Stripe-Signature as Stripe documents it ("Verify manually": split on ',', take t and every
// v1, HMAC-SHA256 of "<t>." + body, compare each v1, check the age) and as stripe-go's webhook package parses it.
// It is written on crypto/hmac rather than on stripe-go: the SDK is one module for the whole Stripe API (hundreds
// of files, a new major version several times a year) for a check of a few lines, and its webhook package reads
// the wall clock itself (no clock for tests), takes one secret per call and accepts any future timestamp.
type stripeVerifier struct {
	describe
	macs      []*macPool
	tolerance time.Duration
	now       func() time.Time
}

const stripeHeader = "Stripe-Signature"

func newStripe(cfg Config, _ *scheme, tol time.Duration, now func() time.Time) (Verifier, error) {
	macs, err := macPools(sha256.New, cfg.Secrets)
	if err != nil {
		return nil, err
	}
	return &stripeVerifier{describe: describe{"stripe Stripe-Signature (" + countSecrets(len(macs)) + ", tolerance " + tol.String() + ")"},
		macs: macs, tolerance: tol, now: now}, nil
}

func (v *stripeVerifier) Verify(h http.Header, body []byte) error {
	raw := header(h, stripeHeader)
	if raw == "" {
		return fail(SchemeStripe, stripeHeader, ErrMissing, "")
	}
	ts, sigs, detail := parseStripe(raw)
	if detail != "" {
		return fail(SchemeStripe, stripeHeader, ErrMalformed, detail)
	}
	signedPrefix := strconv.FormatInt(ts, 10) + "."
	matched := false
	var buf [sha256.Size]byte
	for _, m := range v.macs {
		want := m.sum(buf[:0], []byte(signedPrefix), body)
		for _, sig := range sigs {
			if hmac.Equal(want, sig) {
				matched = true
			}
		}
		if matched {
			break
		}
	}
	if !matched {
		return fail(SchemeStripe, stripeHeader, ErrMismatch, "no v1 signature matches any of "+countSecrets(len(v.macs)))
	}
	// Checked after the signature, so that ErrTimestamp always means a genuine but stale (or early) delivery.
	if detail, ok := checkTime(v.now(), ts, v.tolerance); !ok {
		return fail(SchemeStripe, stripeHeader, ErrTimestamp, detail)
	}
	return nil
}

// parseStripe reads "t=<unix>,v1=<hex>[,v1=<hex>…]" with other elements (v0, future schemes) ignored. It returns
// the timestamp and the v1 signatures, or a reason the header is malformed. Like stripe-go, every element must be
// key=value and a v1 value that is not a SHA-256 in hex is skipped; unlike it, a second t is refused (which of two
// was signed would be a guess) and there must be some v1 left.
func parseStripe(raw string) (ts int64, sigs [][]byte, detail string) {
	haveT := false
	for item := range strings.SplitSeq(raw, ",") {
		k, val, ok := strings.Cut(trimOWS(item), "=")
		if !ok {
			return 0, nil, "an element is not key=value"
		}
		switch k {
		case "t":
			if haveT {
				return 0, nil, "more than one t"
			}
			if ts, ok = parseUnix(val); !ok {
				return 0, nil, "t is not Unix seconds"
			}
			haveT = true
		case "v1":
			if len(val) != 2*sha256.Size {
				continue
			}
			if sig, err := hex.DecodeString(val); err == nil {
				sigs = append(sigs, sig)
			}
		}
	}
	if !haveT {
		return 0, nil, "no t"
	}
	if len(sigs) == 0 {
		return 0, nil, "no v1 signature of 64 hex digits"
	}
	return ts, sigs, ""
}
