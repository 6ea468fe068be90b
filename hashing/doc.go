// Package hashing computes canonical digests of JSON payloads, byte-compatible with zizq-elixir's
// Zizq.PayloadHasher (v0.8.0), so that a webhook body and the same payload hashed by an Elixir producer give the
// same key.
//
// A Hasher is built once from Options (paths are parsed then, never per payload) and is safe for concurrent use:
//
//	h, err := hashing.New(hashing.Options{Only: []string{".user_id", ".template"}})
//	key, err := h.Key("send_email", body) // "send_email:<64 hex digits>"
//
// # Selection
//
// Paths are jq-flavoured (see ParsePath). With Only, each path is walked and the matched values are rebuilt with
// their nesting (".user.id" on {"user":{"id":7,"name":"x"}} hashes {"user":{"id":7}}); array positions are kept by
// padding with null; a path that matches nothing is skipped, not hashed as null; "." keeps everything; when
// nothing matches the payload hashes as {}. With Except, paths are removed in order from the progressively
// modified payload (removing an array element shifts the rest left), a missing path is a no-op, and "." makes the
// payload null.
//
// # Canonical form
//
// The digest is the lowercase hex SHA-256 of a canonical stream, written into the hash through a small buffer:
// objects as '{', then each member sorted by the bytes of its (unescaped) name as name ':' value ',', then '}';
// arrays as '[', each element followed by ',', ']'; strings unescaped then re-escaped minimally ('"', '\',
// \b \t \n \f \r, other bytes below 0x20 as \u00XX with uppercase hex; everything else raw UTF-8); integers (no '.',
// 'e' or 'E') as their exact decimal of any size, with -0 as 0; floats as Erlang's float_to_binary(F, [short])
// writes them (1.0, 1.0e3, 0.0001, 1.0e-5), so 1 and 1.0 hash differently, exactly as in Elixir; true, false and
// null as themselves. When a name appears twice in one object, the last occurrence wins. Canonical writes the
// stream itself, for debugging.
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
