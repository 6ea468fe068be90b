// Package receiver is the webhook receiver behind `dedupeworker ingest`: an HTTP handler that takes a provider's
// delivery on POST /hooks/<tenant>/<source>, checks its signature with the source's verifier (package
// receiver/verify), and publishes it to JetStream as an envelope of the worker's wire contract (docs/sources.md,
// docs/consuming.md): subject <input prefix>.<tenant>.<source>, the raw body as data, the request's end-to-end
// headers as NATS headers, and exactly one Ingest-Verified header set by the receiver.
//
// Three parts, each built and tested on its own:
//
//   - LoadSecrets reads the signing secrets from DEDUPE_INGEST_SECRET_<SOURCE> variables and from a directory of
//     files named <source> (every tenant) or <tenant>.<source> — never from the sources file. Secrets are never
//     formatted, logged or quoted in an error.
//   - NewPolicy turns the sources file's verify blocks and the secrets into one verifier per source (and per tenant
//     where a tenant has secrets of its own): which requests are served at all, and how each is verified. It
//     refuses a source whose signed timestamp would still verify after its event's claim expired (MinTTL).
//   - New builds the Receiver: the HTTP handler (hooks, /metrics, /healthz, /readyz) and Serve, which owns the
//     http.Server and shuts it down within a bound, letting in-flight requests finish.
//
// # Answers and headers
//
// docs/receiver.md ("What is published and answered") lists every answer (every 503 carries Retry-After, so that
// the provider retries) and every header removed from an envelope: hop-by-hop headers, the hop's credentials, the
// names NATS clients read, and every Nats-*, Dedupe-* and Ingest-* header, matched ignoring case and with '_' read
// as '-' (gateways turn one into the other). The receiver never sets Nats-Msg-Id: the event key is the worker's
// business, and a client-chosen id would let a forged request that reached the stream first shadow the genuine
// one. A delivery takes a publish slot only once its whole body is in; until then it holds only the bytes that
// arrived (counted against MaxBufferedBytes), for at most BodyTimeout.
//
// # Keys bound to what was verified
//
// When a source's key reads a header that is one of the names its provider sends the event id under
// (verify.IDHeaders; svix-id for standard_webhooks too), the verified id (verify.VerifyDelivery) is published under
// the key's header, and a request carrying another id under any of those names is refused (400). For the schemes
// that sign the body alone (github, shopify, hmac with replay_guard: on) and a header key, the replay guard claims
// the body's digest (ReplayKey) in Config.Window under the fingerprint of the id the worker will key it on
// (IDFingerprint): the same id again passes, another id is a replay and is not published.
package receiver
