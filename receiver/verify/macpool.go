package verify

import (
	"crypto/hmac"
	"hash"
	"sync"
)

// macPool keeps HMAC states of one key for reuse: hmac.New hashes the padded key twice and allocates two hash
// states each time, the largest part of a small delivery's verification cost. A state is Reset (to just after the
// key) before each use.
type macPool struct{ pool sync.Pool }

func newMACPool(newHash func() hash.Hash, key []byte) *macPool {
	p := &macPool{}
	p.pool.New = func() any { return hmac.New(newHash, key) }
	return p
}

// sum appends the HMAC of parts under the pool's key to dst.
func (p *macPool) sum(dst []byte, parts ...[]byte) []byte {
	m := p.pool.Get().(hash.Hash)
	m.Reset()
	for _, b := range parts {
		m.Write(b)
	}
	dst = m.Sum(dst)
	p.pool.Put(m)
	return dst
}

// macPools builds one pool per key.
func macPools(newHash func() hash.Hash, keys [][]byte) []*macPool {
	out := make([]*macPool, len(keys))
	for i, k := range keys {
		out[i] = newMACPool(newHash, k)
	}
	return out
}
