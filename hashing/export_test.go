package hashing

// CacheState is a working state kept outside the pool, so that a test can follow one sort cache across payloads.
type CacheState struct{ st *state }

func NewCacheState() *CacheState { return &CacheState{st: newState()} }

func (c *CacheState) Digest(h *Hasher, raw []byte) (string, error) { return h.digest(c.st, raw) }

// Stats returns how many objects took a cached order, were fully sorted (within the cacheable sizes), and had a
// cached order fail its check.
func (c *CacheState) Stats() (hits, misses, fails int) {
	return c.st.permHits, c.st.permMisses, c.st.permFails
}

// CacheLimits are the sizes the cache works with.
const (
	MinCachedMembers = minCachedMembers
	MaxCachedMembers = maxCachedMembers
	PermArenaLen     = permArenaLen
)
