package hashing

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"io"

	"github.com/dedupeworker/dedupeworker/internal/jsonscan"
)

// emit writes the canonical stream of the loaded payload to w through st.out, a small buffer, and returns the first
// write error. Recursion is one level per container, bounded by MaxDepth (validated by the scanner).
func (st *state) emit(w io.Writer) error {
	st.w = w
	st.werr = nil
	st.out = st.out[:0]
	st.members = st.members[:0]
	switch {
	case st.mode == modeOnly && st.marks[0] == markNone:
		st.writeString("{}") // nothing selected
	case st.mode == modeExcept && st.rootNull:
		st.writeString("null")
	default:
		st.value(0, st.mode)
	}
	st.flush()
	return st.werr
}

func (st *state) flush() {
	if len(st.out) > 0 && st.werr == nil {
		_, st.werr = st.w.Write(st.out)
	}
	st.out = st.out[:0]
}

func (st *state) writeByte(c byte) {
	if len(st.out) == cap(st.out) {
		st.flush()
	}
	st.out = append(st.out, c)
}

func (st *state) write(b []byte) {
	if len(st.out)+len(b) > cap(st.out) {
		st.flush()
		if len(b) > cap(st.out) {
			if st.werr == nil {
				_, st.werr = st.w.Write(b)
			}
			return
		}
	}
	st.out = append(st.out, b...)
}

func (st *state) writeString(s string) {
	if len(st.out)+len(s) > cap(st.out) {
		st.flush()
	}
	st.out = append(st.out, s...)
}

// value writes the value at i. mode is modeAll below a whole selection, modeOnly inside a partial selection (the
// node at i is marked), modeExcept when removed nodes must be skipped.
func (st *state) value(i int32, mode uint8) {
	if mode == modeOnly && st.marks[i] == markWhole {
		mode = modeAll
	}
	n := &st.nodes[i]
	switch n.kind {
	case kObject:
		st.object(i, mode)
	case kArray:
		st.array(i, mode)
	case kString:
		if n.esc {
			st.str = jsonscan.AppendUnescaped(st.str[:0], st.src[n.a:n.b])
			st.escaped(st.str)
		} else {
			// Without escapes a valid string token has no control characters, '"' or '\', so it is canonical.
			st.write(st.src[n.a:n.b])
		}
	case kInt:
		if n.b-n.a == 2 && st.src[n.a] == '-' && st.src[n.a+1] == '0' {
			st.writeByte('0')
		} else {
			st.write(st.src[n.a:n.b])
		}
	case kFloat:
		st.write(st.aux[n.a:n.b])
	case kTrue:
		st.writeString("true")
	case kFalse:
		st.writeString("false")
	case kNull:
		st.writeString("null")
	}
}

// member is an object member being emitted: j is its name node, pre the first eight bytes of the decoded name
// (big-endian, zero-padded), which orders most pairs of names without reading them, and pos its place among the
// object's emitted members in document order, which the sort cache records.
type member struct {
	pre uint64
	j   int32
	pos int32
}

// namePrefix is the first eight bytes of name as a big-endian number, zero-padded. Two names whose prefixes
// differ compare as their prefixes do; equal prefixes need the full names.
func namePrefix(name []byte) uint64 {
	if len(name) >= 8 {
		return binary.BigEndian.Uint64(name)
	}
	var p uint64
	for k, c := range name {
		p |= uint64(c) << (56 - 8*k)
	}
	return p
}

func (st *state) object(i int32, mode uint8) {
	end := st.nodes[i].a
	base := len(st.members)
	shape := uint64(0)
	for j := i + 1; j < end; j = st.next(j + 1) {
		switch mode {
		case modeOnly:
			if st.marks[j+1] == markNone {
				continue
			}
		case modeExcept:
			if st.marks[j+1] == markDeleted {
				continue
			}
		}
		pre := namePrefix(st.name(j))
		shape = (shape ^ pre) * shapeMul
		st.members = append(st.members, member{pre: pre, j: j, pos: int32(len(st.members) - base)})
	}
	st.sortMembers(st.members[base:], shape)
	st.writeByte('{')
	for k := base; k < len(st.members); k++ {
		j := st.members[k].j
		// Of members with the same name, the last one wins; they are adjacent, in document order.
		if k+1 < len(st.members) && st.members[k].pre == st.members[k+1].pre &&
			bytes.Equal(st.name(j), st.name(st.members[k+1].j)) {
			continue
		}
		n := &st.nodes[j]
		if n.esc {
			st.escaped(st.name(j))
		} else {
			st.write(st.src[n.a:n.b])
		}
		st.writeByte(':')
		st.value(j+1, mode)
		st.writeByte(',')
	}
	st.writeByte('}')
	st.members = st.members[:base]
}

// compareMembers orders members by their names' bytes, then by position.
func (st *state) compareMembers(x, y member) int {
	if c := cmp.Compare(x.pre, y.pre); c != 0 {
		return c
	}
	if c := bytes.Compare(st.name(x.j), st.name(y.j)); c != 0 {
		return c
	}
	return cmp.Compare(x.j, y.j)
}

func (st *state) array(i int32, mode uint8) {
	end := st.nodes[i].a
	st.writeByte('[')
	switch mode {
	case modeOnly:
		// Keep positions: unselected elements before the last selected one become null.
		last := int32(-1)
		for j := i + 1; j < end; j = st.next(j) {
			if st.marks[j] != markNone {
				last = j
			}
		}
		for j := i + 1; j <= last; j = st.next(j) {
			if st.marks[j] == markNone {
				st.writeString("null")
			} else {
				st.value(j, mode)
			}
			st.writeByte(',')
		}
	default:
		for j := i + 1; j < end; j = st.next(j) {
			if mode == modeExcept && st.marks[j] == markDeleted {
				continue
			}
			st.value(j, mode)
			st.writeByte(',')
		}
	}
	st.writeByte(']')
}

// shortEscapes are the two-character escapes of the canonical form, by the byte escaped (at most '\\'); the other
// control bytes are written \u00XX.
var shortEscapes = [...]string{'"': `\"`, '\\': `\\`, '\b': `\b`, '\t': `\t`, '\n': `\n`, '\f': `\f`, '\r': `\r`}

// escaped writes decoded string bytes as a canonical JSON string (docs/sources.md, "Canonical form").
func (st *state) escaped(s []byte) {
	const hexDigits = "0123456789ABCDEF"
	st.writeByte('"')
	start := 0
	for k, c := range s {
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		st.write(s[start:k])
		if e := shortEscapes[c]; e != "" {
			st.writeString(e)
		} else {
			st.writeString(`\u00`)
			st.writeByte(hexDigits[c>>4])
			st.writeByte(hexDigits[c&0xF])
		}
		start = k + 1
	}
	st.write(s[start:])
	st.writeByte('"')
}
