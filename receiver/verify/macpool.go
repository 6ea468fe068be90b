package verify

import (
	"crypto/hmac"
	"fmt"
	"hash"
	"slices"
	"sync"
)

// macPool keeps HMAC states of one key for reuse: hmac.New hashes the padded key twice and allocates two hash
// states each time, the largest part of a small delivery's verification cost. A state is Reset (to just after the
// key) before each use.
type macPool struct{ pool sync.Pool }

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

// macPools builds one pool per secret, used as bytes, refusing duplicates: listing one secret twice is a
// configuration slip (a rotation that forgot the new secret) that would otherwise pass unnoticed.
func macPools(newHash func() hash.Hash, secrets []string) ([]*macPool, error) {
	out := make([]*macPool, len(secrets))
	for i, s := range secrets {
		if j := slices.Index(secrets[:i], s); j >= 0 {
			return nil, &FieldError{fmt.Sprintf("secrets[%d]", i), fmt.Sprintf("same as secrets[%d]", j)}
		}
		key := []byte(s)
		out[i] = &macPool{}
		out[i].pool.New = func() any { return hmac.New(newHash, key) }
	}
	return out, nil
}
