// Package receiver is the webhook receiver behind `dedupeworker ingest`: an HTTP handler that takes a provider's
// delivery on POST /hooks/<tenant>/<source>, checks its signature with the source's verifier (package
// receiver/verify), and publishes it to JetStream as an envelope of the worker's wire contract: subject
// <input prefix>.<tenant>.<source>, the raw body, the request's end-to-end headers, and exactly one Ingest-Verified
// header set by the receiver. docs/receiver.md lists every answer and every header removed; docs/sources.md says
// how keys are bound to what was signed and how the replay guard works.
//
// Three parts, each built and tested on its own:
//
//   - LoadSecrets reads the signing secrets from DEDUPE_INGEST_SECRET_<SOURCE> variables and from a directory of
//     files, never from the sources file. Secrets are never formatted, logged or quoted in an error.
//   - NewPolicy turns the sources file's verify blocks and the secrets into one verifier per source (and per tenant
//     with secrets of its own): which requests are served at all, and how each is verified.
//   - New builds the Receiver: the HTTP handler (hooks, /metrics, /healthz, /readyz) and Serve, which owns the
//     http.Server and shuts it down within a bound, letting in-flight requests finish.
//
// The receiver never sets Nats-Msg-Id: a client-chosen id would let a forged request that reached the stream first
// shadow the genuine one. A delivery takes a publish slot only once its whole body is in; until then it holds only
// the bytes that arrived (counted against MaxBufferedBytes), for at most BodyTimeout.
package receiver
