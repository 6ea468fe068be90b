// Package kvwindow is dedupeworker's claim window: a JetStream KV bucket in which workers claim event keys, scoped
// to tenant and source, for a per-key TTL. The first copy of an event wins the claim and is republished; later
// copies inside the TTL are duplicates.
//
// Guarantees:
//
//   - Atomic claim. A claim is one create of the key's subject with "expected last subject sequence 0" (or the
//     revision of the expiry marker it replaces): the server admits exactly one writer per key, however many
//     workers and goroutines race, on single-node and replicated buckets alike. Won is reported only when this
//     call's create was stored; Owned, Stale and Duplicate are decided from the stored claim, read from the
//     stream leader (never a possibly stale replica) — except for a first delivery (Delivery.Count 1), which cannot be
//     Owned: its losing create is read back by direct get, where a stale answer can at worst suppress a copy of
//     an event whose claim is just expiring.
//   - Crash recovery via the claimant. The claim records its claimant — the envelope's sequence in the input
//     stream and the stream's timestamp of it, which together survive a re-created input stream — and the
//     delivery that made it (consumer creation time, delivery count). A redelivered envelope (the worker
//     crashed or timed out after claiming, before acknowledging) finds its own claim and gets Owned, so it is
//     published again instead of being dropped as a duplicate. A claim whose reply was lost (timeout,
//     reconnect) may still land later; the retry then sees Owned.
//   - One live delivery per claim. Of two deliveries of one envelope alive at once (a worker stalled past the
//     ack wait, and the redelivery), the later one takes the claim over — a write over the claim expecting its
//     revision, with the full TTL — and gets Owned with the new revision; the earlier one then gets Stale and
//     must do nothing. A takeover never overwrites a still later delivery's: it expects the revision it read.
//   - Release only what you hold. Release replaces a claim only while the key's last revision is still the one the
//     caller was given (one write of the key's subject, expected at that revision), never a claim made since. What
//     it leaves is a release marker with the claim's TTL, naming the envelope: that envelope's later deliveries
//     are told DeadLettered and never hold the key again, another envelope claims over it, and a marker that
//     says the event may be stored (the releasing delivery had taken the claim over) makes the claim written over
//     it say so (Outcome.MayBeStored), across takeovers.
//   - Never "not a duplicate" when unsure. Any failure to decide (timeout, no responders, connection closed, bucket
//     full, leader election) is an error wrapping ErrUnavailable; callers retry later. Bad arguments wrap
//     ErrInvalid.
//   - TTL on the server. Each claim carries its own TTL (the Nats-TTL header, whole seconds, rounded up) in a
//     bucket with history 1 and a limit marker TTL; the server removes the claim when it lapses and leaves a
//     "MaxAge" marker for the marker TTL, over which the next claim writes. The worker keeps no per-key state:
//     memory per key is server-side (one small message).
//   - The holder's outcome travels with the claim. MarkPublished records the publish in the claim (one write
//     expected at the holder's revision, returning the new one); a copy that finds the claim is told whether the
//     holder's outcome is decided (Outcome.Published), so that it is acknowledged only once the event is stored,
//     and a released claim lets it through. The first claim time is kept across takeovers and marks
//     (Outcome.FirstClaimed), so that a takeover can tell how long ago an earlier delivery may have published.
//   - Lost buckets are never silent. New never creates a shard bucket missing beside siblings that hold claims.
//     Each bucket's creation time is recorded at bind, and the highest sequence of it seen: its last one at bind,
//     raised by every acknowledgement of a write, every message read and every Ping. A Ping that finds the bucket
//     gone or created again (another creation time), or a write stored at or below the sequence seen before it was
//     sent (a stream's sequence never goes down), marks the bucket lost, and every later claim in it fails with
//     ErrWindowLost until the worker is restarted. Such a write also takes one stream info read, to tell a bucket
//     created again from the same bucket (same creation time) whose last sequence went back: a replica-1 bucket
//     that lost its unsynced writes in a hard crash, or a memory bucket whose server restarted. Its claims are
//     lost just the same; the error says it "lost its latest writes" instead. Every shard bucket records the shard count and its index
//     (metadata, and the description), checked on every bucket at New. NewManager, the operators' hold,
//     binds such a window all the same, the missing bucket marked lost, so that the others can still be read.
//     What the write's check cannot prove is a bucket created again whose sequence has passed everything the
//     worker saw of the old one before its first write into it: the new bucket must take more writes (from other
//     workers) than the old one had reached at this worker's last write, read or Ping, which only a young or
//     little-used bucket allows. The next Ping closes that by the creation time (the pipeline pings every status
//     interval); claims won in the new bucket before it were admitted as new. A bucket restored from a backup
//     keeps its creation time, so only the sequence tells it: the first write lands at or below what was seen,
//     unless the restored bucket has passed it.
//   - No claim outlives its bucket's age limit unnoticed. The server removes a message older than its stream's
//     max_age whatever its own TTL. New refuses a bucket whose age limit is shorter than Config.MaxTTL; under a
//     running window, an edit of the limit is taken up by the next Ping. While it is shorter than a claim's TTL,
//     or than Config.MaxTTL when that is set (then for every claim, as New would refuse the bucket), Claim
//     writes nothing and fails with ErrAgeLimit; and while it is shorter than Config.MaxTTL or than a TTL refused
//     so far, Ping fails with it too, so that a window refusing claims is never reported reachable between them.
//     MarkPublished and Release still write into a claim already held: it lapses at the age limit either way,
//     and refusing them would only have its event published or dead-lettered again once the limit is lifted.
//     ErrAgeLimit wraps ErrUnavailable but means a misconfiguration, not an outage: it passes only once the
//     operator lifts or raises the limit.
//   - Copies counted beside the window. The copies a claim suppressed are counted in a counter stream of their own
//     (CopiesStream, CopyCounter, Copies), never in a bucket: counting writes nothing a claim's revision depends on.
//
// Key layout: "<tenant>.<source>.<enc>" in the bucket (subject "$KV.<bucket>.<tenant>.<source>.<enc>"), where enc
// is the unpadded base64url of the event key when it is at most 48 bytes and otherwise "=" followed by the unpadded
// base64url of its SHA-256. Any key bytes are valid; tenant and source are 1–64 of [A-Za-z0-9_-] (checked in every
// method), so no key can reach into another scope and a tenant or source is one subject-filtered purge away.
// The value is compact binary (about 30 bytes): a version byte (0x01), then varints —
// claimant sequence and stamp, consumer creation time, delivery count, first claim time in milliseconds relative to
// the stamp — a flags byte ("published", "key follows") and, only when the KV key holds the event key's hash, the
// event key itself. The claim time and TTL are the stored message's timestamp and Nats-TTL header ("<seconds>s").
//
// Compatibility: from the first tagged release on, a release reads every claim value, bucket layout (shard count
// and index in the metadata or the description) and Nats-TTL form that the previous release wrote, and a change
// of any of them takes a new version byte read beside the old one for at least one release. Before that release
// nothing was kept: values and buckets of untagged builds (JSON claim values, claims without a stamp or
// consumer, shard buckets that record no index, Nats-TTL without a unit) are not read; start such a window
// afresh.

// The package windowtest holds an in-memory window with the same semantics and the conformance suite both pass.
package kvwindow
