package kvwindow

import (
	"fmt"
	"regexp"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Defaults used by New for zero-valued Config fields (and by DefaultConfig).
const (
	DefaultBucket    = "dedupe-window"
	DefaultReplicas  = 1
	DefaultMarkerTTL = time.Minute
	DefaultTimeout   = 5 * time.Second
)

// Config says where the window lives and how New treats the bucket.
type Config struct {
	// Bucket is the KV bucket name (the stream is "KV_<Bucket>"). Default "dedupe-window".
	Bucket string
	// Replicas is the bucket's replication factor when New creates it (1–5). Default 1. Ignored for an existing
	// bucket.
	Replicas int
	// Provision lets New create the bucket when it is missing. An existing bucket is never changed: if it cannot
	// carry per-key TTLs New fails and says how to fix it. The zero value (false) only binds to an existing
	// bucket; DefaultConfig sets it to true.
	Provision bool
	// Storage is the bucket's storage when New creates it. Zero value: jetstream.FileStorage.
	Storage jetstream.StorageType
	// MarkerTTL is the bucket's LimitMarkerTTL when New creates it (at least 1s; default 1m). Setting it is what
	// lets each key carry its own TTL. When a claim expires the server leaves a small "MaxAge" marker on the key
	// for MarkerTTL: KV watchers, mirrors and sources of the bucket see the expiry instead of a key that silently
	// vanished. A marker costs one small message per expired key for MarkerTTL, and a re-claim of a key that
	// still carries its marker costs one extra round trip; a minute keeps both small while leaving observers
	// ample time to see the marker.
	MarkerTTL time.Duration
	// MaxBytes caps the bucket's size when New creates it (0 = unlimited). A full bucket refuses new claims
	// (ErrUnavailable) rather than evicting live ones.
	MaxBytes int64
	// MaxTTL is the longest TTL the window's claims will carry (0: not known). New refuses an existing bucket
	// whose age limit (its stream's max_age, `nats kv add --ttl`) is shorter: the server removes a message at that
	// age whatever its own TTL, so every claim would lapse early and a later copy of its event go through again.
	// Whatever it is set to, a claim whose TTL is longer than the bucket's age limit fails (ErrUnavailable) rather
	// than being stored to lapse early.
	MaxTTL time.Duration
	// Timeout bounds every operation (a Claim with its retries, a Get, a Forget, a Ping). Default 5s.
	Timeout time.Duration
	// Shards is the number of buckets the window is spread over (1–64; 0 or 1: the single bucket Bucket, as
	// always). With K > 1 the buckets are "<Bucket>-00" … "<Bucket>-<K-1>" and a key lives in exactly one, chosen
	// by a stable hash of its KV key, so that no server has to hold every live key. K is fixed for a deployment:
	// New refuses buckets that were created for another K.
	Shards int
	// Placement, when set, places the buckets New creates: shard i gets Placement[i % len(Placement)] (a cluster
	// and/or tags), so that with more servers than replicas each server holds only its share.
	Placement []jetstream.Placement
}

// DefaultConfig is the recommended configuration: the default bucket, provisioned when missing.
func DefaultConfig() Config {
	return Config{
		Bucket:    DefaultBucket,
		Replicas:  DefaultReplicas,
		Provision: true,
		Storage:   jetstream.FileStorage,
		MarkerTTL: DefaultMarkerTTL,
		Timeout:   DefaultTimeout,
	}
}

// WithDefaults returns c with zero fields set to their defaults (Provision is left as it is).
func (c Config) WithDefaults() Config {
	if c.Bucket == "" {
		c.Bucket = DefaultBucket
	}
	if c.Replicas == 0 {
		c.Replicas = DefaultReplicas
	}
	if c.MarkerTTL == 0 {
		c.MarkerTTL = DefaultMarkerTTL
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Shards == 0 {
		c.Shards = 1
	}
	return c
}

var bucketRE = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// Validate checks c after defaults are applied to its zero fields. Errors start with "kvwindow: " and name the
// field.
func (c Config) Validate() error {
	c = c.WithDefaults()
	if !bucketRE.MatchString(c.Bucket) || len(c.Bucket) > 250 {
		return fmt.Errorf("kvwindow: bucket: must be a valid KV bucket name, got %q", c.Bucket)
	}
	if c.Replicas < 1 || c.Replicas > 5 {
		return fmt.Errorf("kvwindow: replicas: must be between 1 and 5, got %d", c.Replicas)
	}
	if c.Storage != jetstream.FileStorage && c.Storage != jetstream.MemoryStorage {
		return fmt.Errorf("kvwindow: storage: must be file or memory, got %d", int(c.Storage))
	}
	if c.MarkerTTL < time.Second || c.MarkerTTL%time.Second != 0 {
		return fmt.Errorf("kvwindow: marker_ttl: must be whole seconds and at least 1s, got %s", c.MarkerTTL)
	}
	if c.MaxBytes < 0 {
		return fmt.Errorf("kvwindow: max_bytes: must be 0 (unlimited) or positive, got %d", c.MaxBytes)
	}
	if c.MaxTTL < 0 {
		return fmt.Errorf("kvwindow: max_ttl: must be 0 (not known) or positive, got %s", c.MaxTTL)
	}
	if c.Timeout < 0 {
		return fmt.Errorf("kvwindow: timeout: must be positive, got %s", c.Timeout)
	}
	if c.Shards < 1 || c.Shards > MaxShards {
		return fmt.Errorf("kvwindow: shards: must be between 1 and %d, got %d", MaxShards, c.Shards)
	}
	if c.Shards > 1 && len(c.Bucket) > 240 {
		return fmt.Errorf("kvwindow: bucket: must be at most 240 characters with shards (a suffix -NN is added), got %d", len(c.Bucket))
	}
	for i, p := range c.Placement {
		if p.Cluster == "" && len(p.Tags) == 0 {
			return fmt.Errorf("kvwindow: placement[%d]: needs a cluster or tags", i)
		}
	}
	return nil
}

// MaxShards is the most buckets a window may be spread over.
const MaxShards = 64
