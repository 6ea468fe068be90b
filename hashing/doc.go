// Package hashing computes canonical digests of JSON payloads, byte-compatible with zizq-elixir's
// Zizq.PayloadHasher (v0.8.0), so that a webhook body and the same payload hashed by an Elixir producer give the
// same key.
//
// A Hasher is built once from Options (paths are parsed then, never per payload) and is safe for concurrent use:
//
//	h, err := hashing.New(hashing.Options{Only: []string{".user_id", ".template"}})
//	key, err := h.Key("send_email", body) // "send_email:<64 hex digits>"
//
// # Selection and canonical form
//
// docs/sources.md ("Payload digests") writes the path grammar (ParsePath), what Only and Except keep and remove,
// and the canonical form that is hashed: members sorted by the bytes of their unescaped names, strings re-escaped
// minimally, integers exact, floats as Erlang's float_to_binary(F, [short]) writes them (so 1 and 1.0 hash
// differently, as in Elixir), the last of two equal names winning. Canonical writes the stream itself, for
// debugging.
//
// # Guarantees
//
// The digest depends only on the JSON value, not on whitespace, member order or escaping choices in the input.
// Input is validated completely (by internal/jsonscan) before anything is hashed or written: invalid JSON, trailing
// data, invalid UTF-8, a lone surrogate escape, a float literal that overflows float64, or nesting deeper than
// MaxDepth (1000) levels is an error naming the problem; no character is ever silently replaced, and no input can
// cause a panic or a stack overflow. Errors start with "hashing: ".
//
// Payloads repeat object shapes, so each pooled working state remembers (in a bounded cache of about 48 KiB) the
// sorted member order of the shapes it has met; a remembered order is checked to sort the names strictly before it
// is used and the members are sorted afresh when it does not, so the cache changes the speed, never the digest.
package hashing
