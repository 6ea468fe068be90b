// Package keys finds the event key of a webhook delivery, following each source's dedupe spec (the Ankusa dedupe
// rules), and parses the sources file that declares those specs.
//
// A source (a webhook integration such as stripe, named by its subject token) declares how its deliveries are
// deduplicated: a preset name, or an object with exactly one of preset, header, json or payload, plus an optional
// ttl or ttl_seconds. docs/sources.md ("Sources, dedupe specs and TTLs") lists the presets and writes the spec
// grammar, the salesforce convention included.
//
// # Guarantees
//
// Extraction (Extractor.Extract) is deterministic and safe for concurrent use, and says why there is no key
// (ReasonNoDedupe, ReasonMissing, ReasonTooLarge, ReasonNotJSON):
//
//   - header: the value of the first header whose name matches ignoring ASCII case, untrimmed, never joined with
//     later values; an empty value is no key. No allocation (but for a key over MaxKeyBytes, below).
//   - json: the body must be one valid JSON document by the rules of internal/jsonscan (the same as hashing: RFC
//     8259, valid UTF-8, no lone surrogates, no trailing data, bounded nesting), else ReasonNotJSON. The path is
//     followed through objects only; a non-empty string (unescaped) or an integer (its exact literal; -0 is "0")
//     is the key; anything else is no key. When a name repeats, the last occurrence wins. The body is walked
//     token by token, never decoded into a tree: a key costs one allocation (the key string), whatever the body.
//   - payload: the hashing digest of the body (64 hex characters).
//   - json and payload sources do not read a body over Extractor.MaxJSONBytes (1 MiB by default): ReasonTooLarge.
//     Header sources ignore the limit.
//   - A key longer than MaxKeyBytes (200) bytes becomes "sha256:" + the lowercase hex SHA-256 of the key.
//
// Spec parsing (ParseSpec, LoadSources) is strict: unknown fields, unknown presets, several key sources, empty
// header names or path segments, index steps in json paths, conflicting only/except, and ttl values that are not
// whole seconds of at least 1s are errors. ParseSpec errors start with "dedupe: "; LoadSources errors name the
// place, e.g. `sources.orders.dedupe.json: segment 2 is empty in "data..id"`.
//
// The worker claims a key in its window, scoped by tenant and source, for Spec.TTL(def): the spec's own TTL or the
// worker's default (DefaultTTL). The first copy goes out with the Idempotency-Key IdempotencyHeader(tenant, source,
// key).
package keys
