package kvwindow

import (
	"encoding/binary"
	"time"
)

// valueV1 starts a compact claim value; a later encoding takes the next version byte. A value that starts with
// anything else is no claim this package wrote.
//
// Layout after the version byte, each integer a varint (encoding/binary; signed ones zigzag):
//
//	seq        uvarint  claimant: input stream sequence
//	stamp      varint   claimant: input stream timestamp, unix nanoseconds (0: unknown)
//	consumer   varint   delivery: consumer creation time, unix nanoseconds (0: unknown)
//	count      uvarint  delivery: count
//	first      varint   first claim time, unix milliseconds, minus stamp's milliseconds (a few bytes: the claim
//	                    follows the envelope's storing by little)
//	flags      byte     flagPublished, flagKey, flagReleased, flagMayBeStored; unknown bits are ignored
//	key        rest     the event key, only with flagKey: only when the KV key holds its hash (longer than
//	                    MaxRawKey); a raw key is in the KV key already
//
// The claim time and TTL are left out: the stored message's timestamp and its Nats-TTL header say them.
//
// A release marker has the same layout with flagReleased: it is no claim, and names the claimant and delivery that
// released it (see Release).
const valueV1 = 0x01

const (
	flagPublished = 1 << iota
	flagKey
	// flagReleased: a release marker, not a claim: the claimant dead-lettered its event and released the claim.
	flagReleased
	// flagMayBeStored: with flagReleased, the event may be in the output (the releasing delivery had taken the
	// claim over from an earlier one, which may have stored it unrecorded); on a claim, it was made over such a
	// marker (kept across takeovers, not by MarkPublished, after which no delivery publishes again).
	flagMayBeStored
)

// claimValue is a decoded claim.
type claimValue struct {
	Claimant Claimant
	Delivery Delivery
	First    int64 // unix milliseconds
	Pub      bool
	Key      string // "" when the KV key holds the key itself
	// Flags holds flagReleased and flagMayBeStored as stored.
	Flags byte
}

// released reports whether the value is a release marker rather than a claim.
func (v claimValue) released() bool { return v.Flags&flagReleased != 0 }

// mayBeStored reports whether the marker (or the claim made over one) says the event may be in the output.
func (v claimValue) mayBeStored() bool { return v.Flags&flagMayBeStored != 0 }

// firstClaimed is when the claim was first made.
func (v claimValue) firstClaimed() time.Time { return time.UnixMilli(v.First) }

// appendClaimValue appends c's claim, first claimed at firstMs (unix milliseconds), in the compact encoding, with
// flags (flagPublished, flagReleased, flagMayBeStored; flagKey is set here).
func appendClaimValue(dst []byte, c Claim, firstMs int64, flags byte) []byte {
	dst = append(dst, valueV1)
	dst = binary.AppendUvarint(dst, c.Claimant.Seq)
	dst = binary.AppendVarint(dst, c.Claimant.Stamp)
	dst = binary.AppendVarint(dst, c.Delivery.Consumer)
	dst = binary.AppendUvarint(dst, c.Delivery.Count)
	dst = binary.AppendVarint(dst, firstMs-c.Claimant.Stamp/int64(time.Millisecond))
	flags &^= flagKey
	if len(c.Key) > MaxRawKey {
		flags |= flagKey
	}
	dst = append(dst, flags)
	if flags&flagKey != 0 {
		dst = append(dst, c.Key...)
	}
	return dst
}

// valueSize is the room appendClaimValue needs at most for c.
func valueSize(c Claim) int {
	n := 1 + 5*binary.MaxVarintLen64 + 1
	if len(c.Key) > MaxRawKey {
		n += len(c.Key)
	}
	return n
}

// decodeClaimValue reads a compact claim value; false when it is none (not a claim this package wrote).
func decodeClaimValue(data []byte) (claimValue, bool) {
	if len(data) == 0 || data[0] != valueV1 {
		return claimValue{}, false
	}
	var v claimValue
	b := data[1:]
	u := func() uint64 {
		x, n := binary.Uvarint(b)
		if n <= 0 {
			b = nil
			return 0
		}
		b = b[n:]
		return x
	}
	s := func() int64 {
		x, n := binary.Varint(b)
		if n <= 0 {
			b = nil
			return 0
		}
		b = b[n:]
		return x
	}
	v.Claimant.Seq = u()
	v.Claimant.Stamp = s()
	v.Delivery.Consumer = s()
	v.Delivery.Count = u()
	v.First = s() + v.Claimant.Stamp/int64(time.Millisecond)
	if len(b) == 0 {
		return claimValue{}, false // truncated: a varint failed or the flags byte is missing
	}
	flags := b[0]
	v.Pub = flags&flagPublished != 0
	v.Flags = flags & (flagReleased | flagMayBeStored)
	if flags&flagKey != 0 {
		if len(b)-1 <= MaxRawKey {
			return claimValue{}, false // only a key the KV key holds hashed is written out
		}
		v.Key = string(b[1:])
	}
	return v, true
}
