// Package model checks the exactly-once protocol by exhaustive exploration: a deterministic model of the world the
// decision core runs in, driven through every interleaving up to a bound, with the protocol's invariants checked
// after each step. It drives the real core (protocol.Decide, through Protocol) and, for comparison, the worker's
// decisions before the core (Legacy). A violation comes with the interleaving that led to it, one readable line per
// step (Replay).
//
// The model is test code: everything but this package doc is in _test.go files, so no build of the worker compiles
// it. The world it models, what it leaves out and the invariants it checks (the Rule constants) are described in
// docs/model.md; its bounds, its search and its figures in RELIABILITY.md.
package model
