package keys

// Headers gives a request's headers to the Extractor.
type Headers interface {
	// Get returns the value of the first header whose name matches name, ignoring ASCII case, and whether there
	// is one.
	Get(name string) (value string, ok bool)
}

// Header is one request header.
type Header struct{ Name, Value string }

// HeaderList is a request's headers in the order received. Get returns the first match; values are neither trimmed
// nor joined.
type HeaderList []Header

// Get implements Headers.
func (l HeaderList) Get(name string) (string, bool) {
	for i := range l {
		if equalFoldASCII(l[i].Name, name) {
			return l[i].Value, true
		}
	}
	return "", false
}

// NATSHeaders adapts a NATS message's headers (nats.Header is a map[string][]string) without copying them.
//
// Get tries the exact name first, then scans for a name equal ignoring ASCII case, taking the first value. The map
// does not keep the order between distinct names, so when several distinct names differ only by case (say "Svix-Id"
// and "svix-id") and none is the exact name asked for, Get picks the lexically smallest name: the result does not
// depend on map iteration order. Names present with no values are skipped. Get does not allocate.
type NATSHeaders map[string][]string

// Get implements Headers.
func (h NATSHeaders) Get(name string) (string, bool) {
	if vs := h[name]; len(vs) > 0 {
		return vs[0], true
	}
	var best, value string
	found := false
	for k, vs := range h {
		if len(vs) == 0 || !equalFoldASCII(k, name) {
			continue
		}
		if !found || k < best {
			best, value, found = k, vs[0], true
		}
	}
	return value, found
}

// equalFoldASCII reports whether a and b are equal ignoring ASCII case (HTTP and NATS header names are ASCII; no
// Unicode folding, so "K" never matches the Kelvin sign).
func equalFoldASCII(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if x == y {
			continue
		}
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
