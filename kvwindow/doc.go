// Package kvwindow is dedupeworker's claim window: a JetStream KV bucket (or several, Config.Shards) in which
// workers claim event keys, scoped to tenant and source, for a per-key TTL. The first copy of an event wins the
// claim and is republished; later copies inside the TTL are duplicates.
//
// Guarantees:
//
//   - Atomic claim. A claim is one create of the key's subject expecting its last subject sequence to be 0 (or the
//     marker it replaces): the server admits one writer per key, however many race, replicated buckets included.
//     Won is reported only when this call's create was stored. Owned, Stale and Duplicate are decided from the
//     stored claim read from the stream leader — except for a first delivery (Delivery.Count 1), which cannot be
//     Owned: its losing create is read back by direct get, where a stale answer can at worst suppress a copy of an
//     event whose claim is just expiring.
//   - Crash recovery via the claimant. The claim records its envelope (input sequence and stored-at time, unique
//     across a re-created input stream) and delivery (consumer creation time, delivery count). A redelivery finds
//     its own claim and gets Owned, so it is published again instead of dropped; a claim whose reply was lost may
//     still land later, and the retry then sees Owned.
//   - One live delivery per claim. Of two deliveries of one envelope alive at once, the later takes the claim over
//     (one write expecting the revision it read, with the full TTL) and the earlier gets Stale: a takeover never
//     overwrites a still later delivery's.
//   - Release only what you hold. Release writes a release marker (the claim's TTL, naming the envelope) only while
//     the key's last revision is the caller's. That envelope's later deliveries are told DeadLettered; another
//     envelope claims over it, told when the event may be stored (Outcome.MayBeStored, kept across takeovers).
//   - Never "not a duplicate" when unsure. Any failure to decide (timeout, no responders, connection closed, bucket
//     full, leader election) wraps ErrUnavailable; callers retry later. Bad arguments wrap ErrInvalid.
//   - TTL on the server. Each claim carries its own Nats-TTL (whole seconds, rounded up) in a bucket with history 1
//     and a limit marker TTL; the server removes a lapsed claim and leaves a marker the next claim writes over. The
//     worker keeps no per-key state.
//   - The holder's outcome travels with the claim. MarkPublished records the publish in the claim; a copy is told
//     whether the holder's outcome is decided (Outcome.Published), so that it is acknowledged only once the event is
//     stored, and a released claim lets it through. The first claim time survives takeovers and marks.
//   - Lost buckets are never silent. New never creates a shard bucket missing beside siblings that hold claims;
//     NewManager binds it as lost, so that the others can still be read. Each bucket's creation time is recorded at
//     bind, and the highest sequence seen of it (raised by every write's ack, every read and every Ping). A Ping
//     that finds the bucket gone or created again, or a write stored at or below the sequence seen before it was
//     sent, marks the bucket lost: every later claim in it fails with ErrWindowLost until the worker restarts. Such
//     a write takes one stream info read to tell a bucket created again from one that lost its latest writes (a
//     replica-1 bucket after a hard crash, a memory bucket after a restart). Not proved at once: a bucket created
//     again that has passed, before this worker's first write into it, every sequence the worker saw of the old
//     one (a young or little-used bucket); the next Ping closes that by the creation time. A bucket restored from a
//     backup keeps its creation time, so only the sequence tells it. Every shard bucket records the shard count and
//     its index (metadata and description), checked at New.
//   - No claim outlives its bucket's age limit unnoticed. The server removes a message older than its stream's
//     max_age whatever its TTL. New refuses a bucket whose age limit is shorter than Config.MaxTTL; a limit edited
//     under a running window is taken up by the next Ping. While it is shorter than a claim's TTL (or than
//     Config.MaxTTL, when set, for every claim), Claim writes nothing and fails with ErrAgeLimit, and while it is
//     shorter than Config.MaxTTL or a TTL refused so far, so does Ping. MarkPublished and Release still write into
//     a claim already held.
//   - No claim is evicted unnoticed. New refuses a bucket that discards old messages (full, it would drop the
//     oldest live claims); one edited so under a running window is taken up by the next Ping, and Claim and Ping
//     fail with ErrEvicting until discard new is back. MarkPublished and Release still write into a claim held.
//
// Key layout: "<tenant>.<source>.<enc>" (see KVKey); tenant and source are 1–64 of [A-Za-z0-9_-] (checked in
// every method), so no key reaches into another scope and a scope is one subject-filtered purge away. The value is
// about 30 bytes of compact binary behind a version byte; the claim time and TTL are the stored message's
// timestamp and Nats-TTL header ("<seconds>s").
//
// Compatibility: from the first tagged release on, a release reads every claim value, bucket layout (shard count
// and index) and Nats-TTL form that the previous release wrote, and a change of any of them takes a new version
// byte read beside the old one for at least one release. Values and buckets of untagged builds are not read; start
// such a window afresh.
//
// The package windowtest holds an in-memory window with the same semantics and the conformance suite both pass.
package kvwindow
