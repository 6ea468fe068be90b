package receiver

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"time"

	"github.com/dedupeworker/dedupeworker/kvwindow"
)

// ReplayWindow is the claim window the replay guard records signed bodies in (docs/sources.md, "The replay guard"):
// a kvwindow.Window on a bucket of its own, so that the receiver's NATS user never writes the worker's claims.
type ReplayWindow interface {
	Claim(ctx context.Context, c kvwindow.Claim, known kvwindow.Known) (kvwindow.Outcome, error)
	// Release gives up a claim the guard won for a delivery without an id whose publish then failed.
	Release(ctx context.Context, c kvwindow.Claim, revision uint64, mayBeStored bool) (bool, error)
	// Bucket names the bucket, for the log line that says how to find a replay's claim.
	Bucket() string
	// Ping checks that the bucket answers and is still the one the window bound to (Ready).
	Ping(ctx context.Context) error
}

// ReplayKeyPrefix starts the window key under which the replay guard records a signed body: the prefix and the
// lowercase hex SHA-256 of the body, in the tenant and source of the delivery. The space keeps it apart from
// every delivery id a provider sends (none holds a space).
const ReplayKeyPrefix = "body sha256:"

// ReplayKey is the guard's window key of a body.
func ReplayKey(body []byte) string {
	sum := sha256.Sum256(body)
	var b [len(ReplayKeyPrefix) + 2*sha256.Size]byte
	copy(b[:], ReplayKeyPrefix)
	hex.Encode(b[len(ReplayKeyPrefix):], sum[:])
	return string(b[:])
}

// IDFingerprint is how the guard's claim names the id a body arrived under: the first 8 bytes of the id's
// SHA-256, big-endian, without the top bit (`dedupeworker window get` prints it as claimant_seq). Never 0.
func IDFingerprint(id string) uint64 {
	sum := sha256.Sum256([]byte(id))
	return max(binary.BigEndian.Uint64(sum[:8])>>1, 1)
}

// replayed reports whether the guard's claim found the body accepted before under another id: not published.
// Won is a new body; Owned (and Stale, which one delivery count cannot give) the same id again: a retry.
func replayed(o kvwindow.Outcome) bool { return o.Status == kvwindow.Duplicate }

// heldByClaim reports whether a claim made again under a fingerprint no other delivery has (settleGuard) holds
// the key: Owned, the first write landed; Won, it did not and this one did. Duplicate is another delivery's claim.
func heldByClaim(o kvwindow.Outcome) bool {
	return o.Status == kvwindow.Won || o.Status == kvwindow.Owned
}

// guardClaim is the guard's claim of body arriving under id (the value the worker will key it on): the body's
// key, claimed by the id's fingerprint for ttl. A delivery without an id gets a random fingerprint: a provider's
// retry and a captured copy are then the same bytes, so one drawn from the request would pass every replay as a
// retry. The retry a random one takes for a replay is paid back by releasing the claim (releaseGuard, settleGuard).
func guardClaim(tenant, source, id string, body []byte, ttl time.Duration) kvwindow.Claim {
	fp := rand.Uint64()>>1 | 1 // random: as unlikely as a second id (2^-63) to meet another claim's
	if id != "" {
		fp = IDFingerprint(id)
	}
	return kvwindow.Claim{Tenant: tenant, Source: source, Key: ReplayKey(body), TTL: ttl,
		Claimant: kvwindow.Claimant{Seq: fp}}
}
