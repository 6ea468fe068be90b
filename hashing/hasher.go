package hashing

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"math"
	"slices"
	"strconv"
	"sync"

	"github.com/dedupeworker/dedupeworker/internal/jsonscan"
)

// MaxDepth is the deepest nesting of objects and arrays a payload may have (jsonscan.DefaultMaxDepth, 1000); a
// deeper payload is an error.
const MaxDepth = jsonscan.DefaultMaxDepth

// Options selects what part of a payload decides its digest, and the form of keys.
type Options struct {
	// Only, when non-nil, keeps just the parts of the payload at these paths (rebuilt with their nesting); paths
	// that match nothing are skipped. A non-nil empty Only keeps nothing, so every payload hashes as {}.
	Only []string
	// Except, when non-nil, removes the parts at these paths, applied in order. It cannot be combined with Only.
	Except []string
	// Prefix puts the type and a ':' in front of the digest in Key. nil means true.
	Prefix *bool
}

// Hasher computes canonical payload digests. It is immutable once built and safe for concurrent use.
type Hasher struct {
	paths  []Path // the Only or the Except paths, as mode says
	mode   uint8
	prefix bool
}

const (
	modeAll uint8 = iota
	modeOnly
	modeExcept
)

// New builds a Hasher, parsing its paths once.
func New(opts Options) (*Hasher, error) {
	h := &Hasher{prefix: opts.Prefix == nil || *opts.Prefix}
	list := opts.Only
	switch {
	case opts.Only != nil && opts.Except != nil:
		return nil, errors.New("hashing: only and except cannot be combined")
	case opts.Only != nil:
		h.mode = modeOnly
	case opts.Except != nil:
		h.mode, list = modeExcept, opts.Except
	}
	for _, s := range list {
		p, err := ParsePath(s)
		if err != nil {
			return nil, err
		}
		h.paths = append(h.paths, p)
	}
	return h, nil
}

// Digest returns the lowercase hex SHA-256 (64 characters) of raw's canonical form, after applying the hasher's
// only/except selection. raw must be exactly one valid JSON document (see the package documentation).
func (h *Hasher) Digest(raw []byte) (string, error) {
	st := statePool.Get().(*state)
	defer putState(st)
	return h.digest(st, raw)
}

func (h *Hasher) digest(st *state, raw []byte) (string, error) {
	if err := st.load(h, raw); err != nil {
		return "", err
	}
	st.sha.Reset()
	st.emit(st.sha)
	var hexSum [2 * sha256.Size]byte
	hex.Encode(hexSum[:], st.sha.Sum(st.sum[:0]))
	return string(hexSum[:]), nil
}

// Key returns typ + ":" + Digest(raw), or just the digest when the hasher's Prefix is off.
func (h *Hasher) Key(typ string, raw []byte) (string, error) {
	d, err := h.Digest(raw)
	if err != nil {
		return "", err
	}
	if !h.prefix {
		return d, nil
	}
	return typ + ":" + d, nil
}

// Canonical writes the canonical stream that Digest would hash for raw to w. Nothing is written when raw is
// invalid.
func (h *Hasher) Canonical(w io.Writer, raw []byte) error {
	st := statePool.Get().(*state)
	defer putState(st)
	if err := st.load(h, raw); err != nil {
		return err
	}
	if err := st.emit(w); err != nil {
		return fmt.Errorf("hashing: writing canonical form: %w", err)
	}
	return nil
}

// node kinds
const (
	kObject uint8 = iota
	kArray
	kName
	kString
	kInt
	kFloat
	kTrue
	kFalse
	kNull
)

// A node is one token of the payload in document order (a flat pre-order tree). For containers a is the index just
// past the subtree; for names, strings and integers [a,b) is the raw token in the input (quotes included), unless
// aux is set, in which case [a,b) is in state.aux: the decoded name (for names) or the canonical float text.
type node struct {
	kind uint8
	esc  bool // string or name token contains escapes
	aux  bool // [a,b) indexes state.aux
	a, b int32
}

// marks
const (
	markNone    uint8 = iota
	markWhole         // only: keep the whole value
	markPartial       // only: keep the selected parts of this container
	markDeleted       // except: removed
)

// state is the per-call working memory, reused through a sync.Pool.
type state struct {
	sc       jsonscan.Scanner
	src      []byte
	nodes    []node
	aux      []byte
	open     []int32
	marks    []uint8
	members  []member
	scratch  []member
	perms    *permCache
	chain    []int32
	str      []byte
	rootNull bool
	mode     uint8
	sha      hash.Hash
	sum      [sha256.Size]byte
	w        io.Writer
	werr     error
	out      []byte

	// Sort cache counters, read by tests to check which path an object took.
	permHits, permMisses, permFails int
}

const outSize = 4096

func newState() *state { return &state{sha: sha256.New(), out: make([]byte, 0, outSize)} }

var statePool = sync.Pool{New: func() any { return newState() }}

// Buffers larger than this are dropped rather than kept in the pool after a call.
const maxPooledNodes = 1 << 18

func putState(st *state) {
	st.src = nil
	st.w = nil
	st.werr = nil
	if cap(st.nodes) > maxPooledNodes {
		st.nodes, st.marks, st.members, st.scratch = nil, nil, nil, nil
	}
	if cap(st.aux) > 1<<20 {
		st.aux = nil
	}
	if cap(st.str) > 1<<20 {
		st.str = nil
	}
	statePool.Put(st)
}

// load validates raw, builds its node array and applies the hasher's selection. Every error about the input is
// reported here, before anything is written.
func (st *state) load(h *Hasher, raw []byte) error {
	if len(raw) >= math.MaxInt32 {
		return errors.New("hashing: payload larger than 2 GiB")
	}
	if err := st.build(raw); err != nil {
		return err
	}
	st.mode = h.mode
	st.rootNull = false
	if h.mode != modeAll {
		st.resetMarks()
	}
	for _, p := range h.paths {
		if h.mode == modeOnly {
			st.selectOnly(p.steps)
		} else {
			st.remove(p.steps)
		}
	}
	return nil
}

func (st *state) resetMarks() {
	st.marks = slices.Grow(st.marks[:0], len(st.nodes))[:len(st.nodes)]
	clear(st.marks)
}

// build scans raw into st.nodes.
func (st *state) build(raw []byte) error {
	st.src = raw
	st.aux = st.aux[:0]
	st.open = st.open[:0]
	st.sc.Reset(raw)
	// Each node's fields are stored straight into its slot (pushNode), with the slice in a local: appending a node
	// literal built it on the stack with byte stores and read it back as one word, a store-forwarding stall that was
	// most of build's own time in the profile.
	nodes := st.nodes[:0]
	for {
		tk, err := st.sc.Next()
		if err != nil {
			st.nodes = nodes
			return fmt.Errorf("hashing: invalid JSON: %w", err)
		}
		if len(nodes) == cap(nodes) {
			nodes = slices.Grow(nodes, 1)
		}
		// Token.Raw is always a two-index slice of raw, so its capacity locates it.
		start := int32(cap(raw) - cap(tk.Raw))
		end := start + int32(len(tk.Raw))
		switch tk.Kind {
		case jsonscan.EOF:
			st.nodes = nodes
			return nil
		case jsonscan.ObjectStart, jsonscan.ArrayStart:
			k := kObject
			if tk.Kind == jsonscan.ArrayStart {
				k = kArray
			}
			st.open = append(st.open, int32(len(nodes)))
			nodes = pushNode(nodes, k, false, false, 0, 0)
		case jsonscan.ObjectEnd, jsonscan.ArrayEnd:
			i := st.open[len(st.open)-1]
			st.open = st.open[:len(st.open)-1]
			nodes[i].a = int32(len(nodes))
		case jsonscan.Name:
			if tk.Escaped {
				a := int32(len(st.aux))
				st.aux = jsonscan.AppendUnescaped(st.aux, tk.Raw)
				nodes = pushNode(nodes, kName, true, true, a, int32(len(st.aux)))
			} else {
				nodes = pushNode(nodes, kName, false, false, start, end)
			}
		case jsonscan.String:
			nodes = pushNode(nodes, kString, tk.Escaped, false, start, end)
		case jsonscan.Number:
			if jsonscan.IsInteger(tk.Raw) {
				nodes = pushNode(nodes, kInt, false, false, start, end)
				break
			}
			f, err := strconv.ParseFloat(string(tk.Raw), 64)
			if err != nil {
				lit := tk.Raw
				if len(lit) > 40 {
					lit = append(lit[:37:37], "..."...)
				}
				st.nodes = nodes
				return fmt.Errorf("hashing: invalid JSON: number %s at offset %d overflows float64", lit, start)
			}
			a := int32(len(st.aux))
			st.aux = appendErlangFloat(st.aux, f)
			nodes = pushNode(nodes, kFloat, false, true, a, int32(len(st.aux)))
		case jsonscan.True:
			nodes = pushNode(nodes, kTrue, false, false, 0, 0)
		case jsonscan.False:
			nodes = pushNode(nodes, kFalse, false, false, 0, 0)
		case jsonscan.Null:
			nodes = pushNode(nodes, kNull, false, false, 0, 0)
		}
	}
}

// pushNode appends a node to nodes, which has room for it.
func pushNode(nodes []node, kind uint8, esc, aux bool, a, b int32) []node {
	nodes = nodes[:len(nodes)+1]
	n := &nodes[len(nodes)-1]
	n.kind, n.esc, n.aux, n.a, n.b = kind, esc, aux, a, b
	return nodes
}

// next returns the index just past the value at i.
func (st *state) next(i int32) int32 {
	if k := st.nodes[i].kind; k == kObject || k == kArray {
		return st.nodes[i].a
	}
	return i + 1
}

// name returns the decoded bytes of the name node at i.
func (st *state) name(i int32) []byte {
	n := &st.nodes[i]
	if n.aux {
		return st.aux[n.a:n.b]
	}
	return st.src[n.a+1 : n.b-1]
}

// child walks one step from the value at cur: the value of the last (live) member with the step's name, or the
// step's index among the (live) elements. ok is false when there is no such value.
func (st *state) child(cur int32, step Step) (v int32, ok bool) {
	n := st.nodes[cur]
	except := st.mode == modeExcept
	if step.IsIndex {
		if n.kind != kArray {
			return 0, false
		}
		k := 0
		for j := cur + 1; j < n.a; j = st.next(j) {
			if except && st.marks[j] == markDeleted {
				continue
			}
			if k == step.Index {
				return j, true
			}
			k++
		}
		return 0, false
	}
	if n.kind != kObject {
		return 0, false
	}
	found := int32(-1)
	for j := cur + 1; j < n.a; j = st.next(j + 1) {
		if except && st.marks[j+1] == markDeleted {
			continue
		}
		if string(st.name(j)) == step.Name {
			found = j + 1
		}
	}
	return found, found >= 0
}

// selectOnly marks what an only-path keeps: the matched value whole, its ancestors partially.
func (st *state) selectOnly(steps []Step) {
	st.chain = st.chain[:0]
	cur := int32(0)
	for _, step := range steps {
		if st.marks[cur] == markWhole {
			return // already kept whole by another path
		}
		v, ok := st.child(cur, step)
		if !ok {
			return // matches nothing: skipped
		}
		st.chain = append(st.chain, cur)
		cur = v
	}
	for _, c := range st.chain {
		if st.marks[c] == markNone {
			st.marks[c] = markPartial
		}
	}
	st.marks[cur] = markWhole
}

// remove applies one except-path to the (progressively modified) payload.
func (st *state) remove(steps []Step) {
	if st.rootNull {
		return // the payload is already null: no path leads anywhere
	}
	if len(steps) == 0 {
		st.rootNull = true
		return
	}
	cur := int32(0)
	for _, step := range steps[:len(steps)-1] {
		v, ok := st.child(cur, step)
		if !ok {
			return
		}
		cur = v
	}
	last := steps[len(steps)-1]
	if last.IsIndex {
		if v, ok := st.child(cur, last); ok {
			st.marks[v] = markDeleted
		}
		return
	}
	// Removing a member removes every occurrence of its name (the earlier ones are shadowed anyway).
	n := st.nodes[cur]
	if n.kind != kObject {
		return
	}
	for j := cur + 1; j < n.a; j = st.next(j + 1) {
		if string(st.name(j)) == last.Name {
			st.marks[j+1] = markDeleted
		}
	}
}
