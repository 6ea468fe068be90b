// Package integration is dedupeworker's fault suite: real worker processes (built from cmd/dedupeworker) against
// real nats-servers (internal/natstest), killed, restarted, partitioned from their window and fed hostile input,
// each run closed by a ledger that must balance. See RELIABILITY.md for the scenarios and their figures.
//
// The package is tests only, its ledger (balance_test.go) included: no build of the worker compiles any of it.
package integration
