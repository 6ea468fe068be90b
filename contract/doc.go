// Package contract is the wire contract of dedupeworker, in one place: the subjects envelopes, events, duplicate
// copies and dead letters are published on, every header the worker reads or writes with the values it gives them,
// the headers a publisher may not set, and the dead-letter reasons. The worker, the receiver and the dlq commands
// use it; docs/consuming.md describes it for the people who write consumers, and a test keeps that page's header
// table equal to Headers.
//
// The package decides nothing about JetStream and imports nothing of the project's but internal/ident: what it
// says holds for every deployment, whatever its streams are called (prefixes are parameters).
package contract
