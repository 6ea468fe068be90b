package hashing

import (
	"bytes"
	"slices"
)

// Sorting object members was a sixth of the time on the GitHub corpus, whose payloads repeat a few object shapes
// (users, repositories, ...) many times. The cache is keyed by a hash of the members' name prefixes in document
// order; a cached order is checked to be strictly increasing by name, which only the one sorted order of distinct
// names is, so a collision, names that differ after their prefixes or duplicate names fall back to the full sort.

const (
	// shapeMul mixes one name prefix into an object's shape hash (a 64-bit odd constant, golden ratio).
	shapeMul = 0x9E3779B97F4A7C15
	// Objects this small sort faster by insertion than through a cache lookup and check.
	minCachedMembers = 8
	// Objects with more members than this are not cached, so one huge object cannot flush the arena.
	maxCachedMembers = 1024
	permSlotBits     = 10
	permArenaLen     = 1 << 14 // positions; the arena is emptied (with every slot) when one more does not fit
)

// permSlot is one cached order: key is the shape hash, and arena[off:off+n] the original positions of the members
// in sorted order.
type permSlot struct {
	key uint64
	off uint32
	n   uint32
}

// permCache is direct-mapped: a new shape replaces whatever used its slot. About 48 KiB per pooled state, allocated
// the first time a state meets an object big enough to cache.
type permCache struct {
	slots [1 << permSlotBits]permSlot
	arena [permArenaLen]uint16
	used  int
}

// sortMembers puts one object's members in name order (members with equal names stay in document order), using
// the cache for objects of cacheable size.
func (st *state) sortMembers(seg []member, shape uint64) {
	n := len(seg)
	if n < minCachedMembers {
		st.insertionSort(seg)
		return
	}
	if n > maxCachedMembers {
		st.fullSort(seg)
		return
	}
	shape ^= uint64(n)
	shape *= shapeMul
	pc := st.perms
	if pc == nil {
		pc = new(permCache)
		st.perms = pc
	}
	slot := &pc.slots[shape>>(64-permSlotBits)]
	if slot.key == shape && slot.n == uint32(n) {
		if st.applyPerm(seg, pc.arena[slot.off:slot.off+uint32(n)]) {
			st.permHits++
			return
		}
		st.permFails++
	}
	st.permMisses++
	st.fullSort(seg)
	// Only an order of distinct names is cached, so that a hit's check can demand strictly increasing names.
	for k := 1; k < n; k++ {
		if seg[k-1].pre == seg[k].pre && bytes.Equal(st.name(seg[k-1].j), st.name(seg[k].j)) {
			return
		}
	}
	if pc.used+n > permArenaLen {
		pc.slots = [1 << permSlotBits]permSlot{}
		pc.used = 0
	}
	off := pc.used
	for k, m := range seg {
		pc.arena[off+k] = uint16(m.pos)
	}
	pc.used += n
	*slot = permSlot{key: shape, off: uint32(off), n: uint32(n)}
}

// applyPerm rearranges seg by a cached order and reports whether the result is strictly increasing by name; when it
// is not, seg is restored to document order.
func (st *state) applyPerm(seg []member, perm []uint16) bool {
	st.scratch = append(st.scratch[:0], seg...)
	doc := st.scratch
	prev := doc[perm[0]]
	seg[0] = prev
	for k := 1; k < len(seg); k++ {
		m := doc[perm[k]]
		if !st.less(prev, m) {
			copy(seg, doc)
			return false
		}
		seg[k] = m
		prev = m
	}
	return true
}

// fullSort sorts seg unless it is already in strictly increasing name order (as objects encoded from sorted maps
// are).
func (st *state) fullSort(seg []member) {
	for k := 1; k < len(seg); k++ {
		if !st.less(seg[k-1], seg[k]) {
			slices.SortFunc(seg, st.compareMembers)
			return
		}
	}
}

// insertionSort is stable, so members with equal names keep their document order without a tie-break, and its
// comparison is inlined rather than called through a func value.
func (st *state) insertionSort(seg []member) {
	for k := 1; k < len(seg); k++ {
		m := seg[k]
		l := k
		for l > 0 && st.less(m, seg[l-1]) {
			seg[l] = seg[l-1]
			l--
		}
		seg[l] = m
	}
}

// less reports whether x's name sorts strictly before y's: by the prefixes, and by the names only when those are
// equal (small enough to be inlined into the sorts' loops).
func (st *state) less(x, y member) bool {
	return x.pre < y.pre || x.pre == y.pre && st.nameLess(x, y)
}

// nameLess reports whether x's name sorts strictly before y's; it is the slow path once the prefixes are equal.
func (st *state) nameLess(x, y member) bool {
	return bytes.Compare(st.name(x.j), st.name(y.j)) < 0
}
