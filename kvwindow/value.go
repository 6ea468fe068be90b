package kvwindow

import (
	"encoding/binary"
	"encoding/json"
	"time"
)

// valueV1 starts a compact claim value. JSON (what older workers wrote) starts with '{' or white space, never with
// a control byte, so the first byte alone tells the two encodings apart, and a later encoding takes the next
// version byte.
//
// Layout after the version byte, each integer a varint (encoding/binary; signed ones zigzag):
//
//	seq        uvarint  claimant: input stream sequence
//	stamp      varint   claimant: input stream timestamp, unix nanoseconds (0: unknown)
//	consumer   varint   delivery: consumer creation time, unix nanoseconds (0: unknown)
//	count      uvarint  delivery: count
//	first      varint   first claim time, unix milliseconds, minus stamp's milliseconds (a few bytes: the claim
//	                    follows the envelope's storing by little)
//	flags      byte     flagPublished, flagKey; unknown bits are ignored
//	key        rest     the event key, only with flagKey: only when the KV key holds its hash (longer than
//	                    MaxRawKey); a raw key is in the KV key already
//
// The claim time and TTL that the JSON value carried are left out: the stored message's timestamp and its
// Nats-TTL header say the same.
const valueV1 = 0x01

const (
	flagPublished = 1 << iota
	flagKey
)

// claimValue is a decoded claim.
type claimValue struct {
	Seq   uint64
	Stamp int64
	Con   int64
	Dlv   uint64
	First int64 // unix milliseconds; 0 = not recorded (a JSON value)
	Pub   bool
	Key   string // "" when the KV key holds the key itself
	// Legacy marks a JSON value, written by a worker that recorded a publish only on redeliveries.
	Legacy bool
	TTL    int64 // seconds, JSON values only (the Nats-TTL header says it for every value)
}

// jsonValue is the JSON claim older workers wrote. Claims written before ts, con and dlv existed lack them; they
// read as zero (unknown stamp, earliest delivery).
type jsonValue struct {
	Seq uint64 `json:"seq"`
	TS  int64  `json:"ts"`
	Con int64  `json:"con"`
	Dlv uint64 `json:"dlv"`
	At  int64  `json:"at"`
	TTL int64  `json:"ttl"`
	Key string `json:"key"`
	Pub bool   `json:"pub"`
}

func (v claimValue) claimant() Claimant { return Claimant{Seq: v.Seq, Stamp: v.Stamp} }
func (v claimValue) delivery() Delivery { return Delivery{Consumer: v.Con, Count: v.Dlv} }

// firstClaimed is when the claim was first made: recorded, or else the best bound there is, the time the server
// stored its latest write.
func (v claimValue) firstClaimed(stored time.Time) time.Time {
	if v.First != 0 {
		return time.UnixMilli(v.First)
	}
	return stored
}

// decided reports whether the holder's outcome is settled for a copy that finds its claim: the publish is
// recorded, or the claim comes from a worker that never recorded first publishes (counting it as published keeps
// an upgrade from holding copies back until their TTL).
func (v claimValue) decided() bool { return v.Pub || v.Legacy }

// appendClaimValue appends c's claim, first claimed at firstMs (unix milliseconds), in the compact encoding.
func appendClaimValue(dst []byte, c Claim, firstMs int64, published bool) []byte {
	dst = append(dst, valueV1)
	dst = binary.AppendUvarint(dst, c.Claimant.Seq)
	dst = binary.AppendVarint(dst, c.Claimant.Stamp)
	dst = binary.AppendVarint(dst, c.Delivery.Consumer)
	dst = binary.AppendUvarint(dst, c.Delivery.Count)
	dst = binary.AppendVarint(dst, firstMs-c.Claimant.Stamp/int64(time.Millisecond))
	var flags byte
	if published {
		flags |= flagPublished
	}
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

// decodeClaimValue reads a compact or a JSON claim value; false when it is neither (not a claim this package
// wrote).
func decodeClaimValue(data []byte) (claimValue, bool) {
	if len(data) == 0 {
		return claimValue{}, false
	}
	if data[0] != valueV1 {
		var j jsonValue
		if json.Unmarshal(data, &j) != nil {
			return claimValue{}, false
		}
		return claimValue{Seq: j.Seq, Stamp: j.TS, Con: j.Con, Dlv: j.Dlv, Pub: j.Pub, Key: j.Key, TTL: j.TTL, Legacy: true}, true
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
	v.Seq = u()
	v.Stamp = s()
	v.Con = s()
	v.Dlv = u()
	v.First = s() + v.Stamp/int64(time.Millisecond)
	if len(b) == 0 {
		return claimValue{}, false // truncated: a varint failed or the flags byte is missing
	}
	flags := b[0]
	v.Pub = flags&flagPublished != 0
	if flags&flagKey != 0 {
		if len(b)-1 <= MaxRawKey {
			return claimValue{}, false // only a key the KV key holds hashed is written out
		}
		v.Key = string(b[1:])
	}
	return v, true
}
