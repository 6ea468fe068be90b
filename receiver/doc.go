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
//     where a tenant has secrets of its own): which requests are served at all, and how each is verified.
//   - New builds the Receiver: the HTTP handler (hooks, /metrics, /healthz, /readyz) and Serve, which owns the
//     http.Server and shuts it down within a bound, letting in-flight requests finish.
//
// # Answers
//
//	202  JetStream (the input stream, named in Nats-Expected-Stream so that no other stream can acknowledge it)
//	     stored the envelope; Ingest-Verified: true, or false for a source with on_invalid: forward whose
//	     signature did not verify
//	202  not published: a replay — a signed body already accepted under another id within the source's TTL
//	     (the replay guard, Config.Window)
//	400  verified, but a header carries another id than the verified one (a bound key, below)
//	401  the signature is missing or does not verify (on_invalid: reject, the default)
//	404  not /hooks/<tenant>/<source> with ids of 1-64 [A-Za-z0-9_-], an undeclared source, or a tenant the
//	     source's secrets do not cover
//	405  another method than POST (Allow: POST)
//	408  the body did not arrive within Config.BodyTimeout (the connection is closed)
//	413  a body over Config.MaxBody, or one the NATS server (max_payload) or the stream (max_msg_size) refuses
//	431  headers over Config.MaxHeaderBytes as published, a header section net/http refuses on its own, or one
//	     JetStream refuses (error 10097)
//	503  always with Retry-After, and the provider's retry delivers it:
//	     - "not stored": JetStream refused the envelope or could not be reached (NATS down, no stream);
//	     - "storage not confirmed": no acknowledgement within Config.PublishTimeout — it may have been stored,
//	       and a retry then stores a second copy (keyed sources collapse it in the worker);
//	     - "busy": Config.MaxInFlight deliveries are being published, or Config.MaxBufferedBytes of bodies are
//	       held;
//	     - "the replay guard's window is unavailable": a guarded source's claim got no answer (nothing is
//	       published unguarded).
//
// A delivery takes a publish slot only once its whole body is in; until then it holds only the bytes that
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
//
// # Headers
//
// The published headers are the request's, minus: hop-by-hop headers (Connection and the headers it names, except
// the headers the source's verifier or key reads,
// Keep-Alive, Proxy-*, TE, Trailer, Transfer-Encoding, Upgrade; Host is not a header in Go's requests and is not
// published), Expect, the credentials of the hop to the receiver (Authorization, Cookie), the names NATS clients
// read from a message (Status and Description — nats.go takes an empty-bodied message with them for a server
// status —, KV-Operation), and every header the server, the receiver or the worker reserves: Nats-* (a client must
// not set Nats-Msg-Id, Nats-Expected-*, Nats-TTL, …), Dedupe-*, and Ingest-* (so that a client's Ingest-Verified
// never reaches the worker). Names are matched ignoring case and with '_' read as '-' (Ingest_Verified, Nats_Msg_Id
// are dropped: gateways turn one into the other); they arrive in Go's canonical form (X-Github-Delivery).
//
// The receiver never sets Nats-Msg-Id: the event key is the worker's business, and a client-chosen id would let a
// forged request that reached the stream first shadow the genuine one.
package receiver
