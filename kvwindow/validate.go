package kvwindow

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dedupeworker/dedupeworker/internal/ident"
)

// ErrInvalid is wrapped by every error about a caller's argument (a bad tenant, source, key or TTL). Such a claim
// can never succeed; it is not a window failure and retrying it does not help.
var ErrInvalid = errors.New("kvwindow: invalid argument")

// MaxRawKey is the longest event key stored verbatim (base64url-encoded) in the KV key; longer keys are stored as
// "=" + base64url(SHA-256(key)).
const MaxRawKey = 48

// validateScope checks a tenant and a source id (source may be empty only when allowEmptySource).
func validateScope(tenant, source string, allowEmptySource bool) error {
	if !ident.Valid(tenant) {
		return fmt.Errorf("%w: tenant: must be 1-64 of [A-Za-z0-9_-], got %q", ErrInvalid, tenant)
	}
	if source == "" && allowEmptySource {
		return nil
	}
	if !ident.Valid(source) {
		return fmt.Errorf("%w: source: must be 1-64 of [A-Za-z0-9_-], got %q", ErrInvalid, source)
	}
	return nil
}

// Validate checks a claim: valid tenant and source ids, a non-empty key and a TTL of at least one second.
// Errors wrap ErrInvalid.
func (c Claim) Validate() error {
	if err := validateScope(c.Tenant, c.Source, false); err != nil {
		return err
	}
	if c.Key == "" {
		return fmt.Errorf("%w: key: must not be empty", ErrInvalid)
	}
	if c.TTL < time.Second {
		return fmt.Errorf("%w: ttl: must be at least 1s, got %s", ErrInvalid, c.TTL)
	}
	return nil
}

// validAt checks c and rev for a write into the claim at rev. Revision 0 would mean "the key is empty".
func validAt(c Claim, rev uint64) error {
	if err := c.Validate(); err != nil {
		return err
	}
	if rev == 0 {
		return fmt.Errorf("%w: revision: must not be 0", ErrInvalid)
	}
	return nil
}

// TTLSeconds is the claim's TTL in whole seconds, rounded up (the server keeps per-message TTLs in seconds).
func (c Claim) TTLSeconds() int64 {
	return int64((c.TTL + time.Second - 1) / time.Second)
}

// KVKey is the key under which the window stores a claim: "<tenant>.<source>.<enc>", where enc is the unpadded
// base64url of key when it is at most MaxRawKey bytes, otherwise "=" + the unpadded base64url of its SHA-256
// ("=" never occurs in unpadded base64url, so the two forms cannot collide).
func KVKey(tenant, source, key string) (string, error) {
	if err := validateScope(tenant, source, false); err != nil {
		return "", err
	}
	if key == "" {
		return "", fmt.Errorf("%w: key: must not be empty", ErrInvalid)
	}
	return string(appendKVKey(nil, tenant, source, key)), nil
}

func appendKVKey(dst []byte, tenant, source, key string) []byte {
	dst = append(dst, tenant...)
	dst = append(dst, '.')
	dst = append(dst, source...)
	dst = append(dst, '.')
	enc := base64.RawURLEncoding
	if len(key) <= MaxRawKey {
		return enc.AppendEncode(dst, []byte(key))
	}
	sum := sha256.Sum256([]byte(key))
	dst = append(dst, '=')
	return enc.AppendEncode(dst, sum[:])
}

// scopeOf splits a KV key into its tenant, source and, when the event key is stored raw, the event key ("" for a
// hashed key: only its claim value records its exact bytes). ok is false for a key this package does not write.
func scopeOf(kvKey string) (tenant, source, key string, ok bool) {
	parts := strings.SplitN(kvKey, ".", 3)
	if len(parts) != 3 || !ident.Valid(parts[0]) || !ident.Valid(parts[1]) || parts[2] == "" {
		return "", "", "", false
	}
	if strings.HasPrefix(parts[2], "=") {
		return parts[0], parts[1], "", true
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || len(raw) == 0 || len(raw) > MaxRawKey {
		return "", "", "", false
	}
	return parts[0], parts[1], string(raw), true
}

// fillScope sets e's Tenant and Source from e.KVKey, and its Key when the KV key holds it raw and the claim value
// did not say it.
func fillScope(e *Entry) {
	if parts := strings.SplitN(e.KVKey, ".", 3); len(parts) == 3 {
		e.Tenant, e.Source = parts[0], parts[1]
	}
	if _, _, key, ok := scopeOf(e.KVKey); ok && e.Key == "" {
		e.Key = key
	}
}
