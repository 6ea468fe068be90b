package keys

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"sync"

	"github.com/dedupeworker/dedupeworker/internal/jsonscan"
)

// Extractor finds an envelope's key. The zero value is ready to use; an Extractor is safe for concurrent use.
type Extractor struct {
	// MaxJSONBytes is the largest body json and payload sources read; a larger body is not read at all and has no
	// key (ReasonTooLarge). 0 (or negative) means DefaultMaxJSONBytes. Header sources ignore it.
	MaxJSONBytes int
}

func (x Extractor) maxJSON() int {
	if x.MaxJSONBytes <= 0 {
		return DefaultMaxJSONBytes
	}
	return x.MaxJSONBytes
}

// Extract returns the key of an envelope under spec s, or "" and the reason there is none. h may be nil. The package
// documentation says how each kind of source finds its key, and what that allocates.
func (x Extractor) Extract(s Spec, h Headers, body []byte) (string, Reason) {
	p := s.p
	if p == nil {
		return "", ReasonNoDedupe
	}
	if p.kind == KindHeader {
		if h == nil {
			return "", ReasonMissing
		}
		v, ok := h.Get(p.header)
		if !ok || v == "" {
			return "", ReasonMissing
		}
		if len(v) > MaxKeyBytes {
			return hashKey([]byte(v)), ReasonNone
		}
		return v, ReasonNone
	}
	if len(body) > x.maxJSON() {
		return "", ReasonTooLarge
	}
	if p.kind == KindJSON {
		return extractJSON(p.path, body)
	}
	d, err := p.hasher.Digest(body) // KindPayload: 64 hex characters, never over MaxKeyBytes
	if err != nil {
		return "", ReasonNotJSON
	}
	return d, ReasonNone
}

// hashKey is the stand-in for a key over MaxKeyBytes: "sha256:" + lowercase hex SHA-256.
func hashKey(k []byte) string {
	const prefix = "sha256:"
	sum := sha256.Sum256(k)
	var out [len(prefix) + 2*sha256.Size]byte
	copy(out[:], prefix)
	hex.Encode(out[len(prefix):], sum[:])
	return string(out[:])
}

// walker holds the per-call state of a json extraction; pooled so that the scanner's depth stack is reused.
type walker struct {
	sc   jsonscan.Scanner
	last jsonscan.Token // the value of the last occurrence of the path's final member, when it can be a key
	has  bool
	buf  []byte // decoded escaped strings
}

var walkers = sync.Pool{New: func() any { return new(walker) }}

// maxPooledBuf keeps a walker that decoded a huge key from pinning its buffer.
const maxPooledBuf = 4 << 10

var errUnexpected = errors.New("keys: unexpected token")

func extractJSON(path []string, body []byte) (string, Reason) {
	w := walkers.Get().(*walker)
	defer func() {
		w.sc.Reset(nil) // do not keep the body reachable from the pool
		w.last = jsonscan.Token{}
		if cap(w.buf) > maxPooledBuf {
			w.buf = nil
		}
		walkers.Put(w)
	}()
	w.sc.Reset(body)
	w.has = false
	if err := w.walk(path); err != nil {
		return "", ReasonNotJSON
	}
	if !w.has {
		return "", ReasonMissing
	}
	raw, content := w.last.Raw, w.last.Raw // a number: its literal
	switch {
	case w.last.Kind == jsonscan.Number && string(raw) == "-0":
		return "0", ReasonNone
	case w.last.Escaped:
		w.buf = jsonscan.AppendUnescaped(w.buf[:0], raw)
		content = w.buf
	case w.last.Kind == jsonscan.String:
		content = raw[1 : len(raw)-1]
	}
	switch {
	case len(content) == 0:
		return "", ReasonMissing
	case len(content) > MaxKeyBytes:
		return hashKey(content), ReasonNone
	}
	return string(content), ReasonNone
}

// walk scans the whole document (so that it is validated to the end) and records in w.last the value of the last
// occurrence of the member at path. Only the objects along the path are entered; every other value is skipped
// (and validated) by the scanner, so the walk allocates nothing and keeps no state per byte of body.
//
// Duplicate names: the last occurrence wins at every level, as with encoding/json decoding into a map. A new
// occurrence of a member on the path discards whatever an earlier occurrence held, and a final member whose value
// cannot be a key (float, boolean, null, object, array) clears an earlier match.
func (w *walker) walk(path []string) error {
	sc := &w.sc
	tok, err := sc.Next()
	if err != nil {
		return err
	}
	switch tok.Kind {
	case jsonscan.ObjectStart:
		if err := w.object(path); err != nil {
			return err
		}
	case jsonscan.ArrayStart:
		if err := sc.SkipValue(); err != nil {
			return err
		}
	}
	tok, err = sc.Next()
	if err != nil {
		return err
	}
	if tok.Kind != jsonscan.EOF {
		return errUnexpected
	}
	return nil
}

// object walks the top-level object, just opened. level is the index in path of the member wanted in the innermost
// open object; the open objects are exactly the matched members along the path, so level is also their depth.
func (w *walker) object(path []string) error {
	sc := &w.sc
	level := 0
	for {
		tok, err := sc.Next()
		if err != nil {
			return err
		}
		switch tok.Kind {
		case jsonscan.ObjectEnd:
			if level == 0 {
				return nil
			}
			level--
			continue
		case jsonscan.Name:
		default:
			return errUnexpected
		}
		if !jsonscan.EqualName(tok.Raw, path[level]) {
			if err := sc.SkipValue(); err != nil {
				return err
			}
			continue
		}
		val, err := sc.Next()
		if err != nil {
			return err
		}
		if level == len(path)-1 {
			w.last = val
			w.has = val.Kind == jsonscan.String || val.Kind == jsonscan.Number && jsonscan.IsInteger(val.Raw)
		} else {
			w.has = false // this occurrence replaces whatever an earlier one held
			if val.Kind == jsonscan.ObjectStart {
				level++
				continue
			}
		}
		if val.Kind == jsonscan.ObjectStart || val.Kind == jsonscan.ArrayStart {
			if err := sc.SkipValue(); err != nil {
				return err
			}
		}
	}
}
