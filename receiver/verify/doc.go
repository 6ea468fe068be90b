// Package verify checks the signatures that webhook providers put on their deliveries, for the webhook receiver
// (`dedupeworker ingest`). A Verifier is built once per source from a Config (New) and then called for every
// request with the request's headers and its raw body, exactly as received:
//
//	v, err := verify.New(verify.Config{Scheme: verify.SchemeGitHub, Secrets: []string{oldSecret, newSecret}})
//	...
//	err = v.Verify(r.Header, body) // nil: verified
//
// # Schemes
//
// Each scheme follows its provider's documented algorithm:
//
//	github             X-Hub-Signature-256: "sha256=" + hex HMAC-SHA256(secret, body). The SHA-1 header
//	                   X-Hub-Signature is not accepted: GitHub keeps it only for compatibility.
//	stripe             Stripe-Signature: "t=<unix>,v1=<hex>[,v1=<hex>…]" (other elements such as v0 are ignored),
//	                   HMAC-SHA256(secret, "<t>." + body); the secret (whsec_…) is used as it is, not decoded.
//	standard_webhooks  webhook-id, webhook-timestamp, webhook-signature: space-separated "v1,<base64>" entries,
//	                   HMAC-SHA256(key, "<id>.<timestamp>." + body), key = base64 of the secret after an optional
//	                   whsec_ prefix, computed by the Standard Webhooks reference library; and "v1a,<base64>"
//	                   entries, an Ed25519 signature of the same text, checked with crypto/ed25519 against the
//	                   secrets given as "whpk_" + base64 of a 32-byte public key (a "whsk_" signing key is refused).
//	svix               the same as standard_webhooks under svix-id, svix-timestamp, svix-signature; when those
//	                   three are not all present, the webhook-* names (as Svix's own libraries do).
//	shopify            Shopify-Hmac-Sha256, else X-Shopify-Hmac-Sha256: base64 HMAC-SHA256(secret, body). The
//	                   un-prefixed name (Shopify Events send it) wins when both are present, as in Shopify's
//	                   shopify_app library.
//	hmac               a configurable HMAC: Header, Algorithm (sha1, sha256 — the default — or sha512), Encoding
//	                   (hex — the default —, base64 or base64url) and an optional literal Prefix such as "sha256=".
//	none               no verification: Verify always returns nil.
//
// Stripe, Standard Webhooks and Svix sign a timestamp; a delivery verifies only if that timestamp is within
// Config.Tolerance (default 5 minutes, as the providers' libraries) of Config.Now, in both directions. Stripe's
// own libraries reject only old timestamps; a future one is rejected here too, so that a signed request cannot be
// replayed for longer than the tolerance whatever the two clocks say.
//
// VerifyDelivery also says which event id a verification read (Delivery): the signed message id for
// standard_webhooks and svix (from the header set it used), the documented but unsigned X-GitHub-Delivery and
// Shopify-Webhook-Id / X-Shopify-Webhook-Id for github and shopify, none for the others. BodyOnly names the schemes
// whose signature covers the body alone.
//
// # Guarantees
//
//   - Verify returns nil only when a signature in the request equals the HMAC, under one of Config.Secrets, of
//     exactly what the provider signs, or (v1a) is an Ed25519 signature of it by one of the whpk_ public keys (for
//     timestamped schemes, also within the tolerance). Several secrets verify during a rotation: a request
//     verifies if any of them matches.
//   - Signatures are compared with hmac.Equal (constant time; as decoded bytes, or by the Standard Webhooks library
//     as their base64 text), so the time a rejection takes does not tell an attacker how much of a guessed
//     signature was right.
//   - Every error from Verify wraps exactly one of ErrMissing, ErrMalformed, ErrMismatch and ErrTimestamp (see
//     Reason, for a metric label) and reads "verify: <scheme>: <header>: <reason>[: <detail>]". No error, and no
//     formatting of a Config or a Verifier (%v, %+v, %#v, slog), contains a secret, a key derived from one or a
//     signature computed with one; header values are never echoed either, except a parsed timestamp.
//   - ErrTimestamp is returned only after a signature matched: it means a replay or a clock problem, never a
//     forgery. A forged or wrongly-signed request is ErrMismatch, whatever its timestamp.
//   - A header is read under any letter case of its name; its first value is used (later values are ignored, as
//     in the providers' libraries), with surrounding blanks removed. An empty value counts as missing.
//   - Verify never panics, whatever the headers and body (fuzzed); Verifiers are immutable and safe for
//     concurrent use.
//   - New validates the whole Config and fails with a *FieldError naming the field ("verify: secrets[1]: empty").
//     Secrets with leading or trailing blanks are refused: a trailing newline from a secret file would otherwise
//     make every delivery fail to verify.
package verify
