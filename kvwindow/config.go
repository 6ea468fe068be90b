package kvwindow

import (
	"cmp"
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
	// MarkerTTL is the bucket's LimitMarkerTTL when New creates it (whole seconds, at least 1s; default 1m): what
	// lets each key carry its own TTL. An expired claim leaves a marker for MarkerTTL, so that watchers and mirrors
	// see the expiry; it costs a small message per expired key and a re-claim over it one more round trip, and a
	// minute keeps both small while leaving observers ample time.
	MarkerTTL time.Duration
	// MaxBytes caps the bucket's size when New creates it (0 = unlimited). A full bucket refuses new claims
	// (ErrUnavailable) rather than evicting live ones.
	MaxBytes int64
	// MaxTTL is the longest TTL the window's claims will carry (0: not known). New refuses a bucket whose age limit
	// (its stream's max_age, `nats kv add --ttl`) is shorter; see ErrAgeLimit.
	MaxTTL time.Duration
	// Timeout bounds every operation (a Claim with its retries, a Get, a Forget, a Ping). Default 5s.
	Timeout time.Duration
	// Shards is the number of buckets the window is spread over (1–64; 0 or 1: the single bucket Bucket). With K > 1
	// the buckets are "<Bucket>-00" … "<Bucket>-<K-1>" and a key lives in exactly one (a stable hash of its KV key),
	// so that no server holds every live key. New refuses buckets that were created for another K.
	Shards int
	// Placement, when set, places the buckets New creates: shard i gets Placement[i % len(Placement)] (a cluster
	// and/or tags), so that with more servers than replicas each server holds only its share.
	Placement []jetstream.Placement
}

// DefaultConfig is the recommended configuration: the defaults, the bucket provisioned when missing.
func DefaultConfig() Config { return Config{Provision: true}.WithDefaults() }

// WithDefaults returns c with zero fields set to their defaults (Provision is left as it is).
func (c Config) WithDefaults() Config {
	c.Bucket = cmp.Or(c.Bucket, DefaultBucket)
	c.Replicas = cmp.Or(c.Replicas, DefaultReplicas)
	c.MarkerTTL = cmp.Or(c.MarkerTTL, DefaultMarkerTTL)
	c.Timeout = cmp.Or(c.Timeout, DefaultTimeout)
	c.Shards = cmp.Or(c.Shards, 1)
	return c
}

var bucketRE = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// Validate checks c after defaults are applied to its zero fields. Errors start with "kvwindow: " and name the
// field.
func (c Config) Validate() error {
	c = c.WithDefaults()
	switch {
	case !bucketRE.MatchString(c.Bucket) || len(c.Bucket) > 250:
		return fmt.Errorf("kvwindow: bucket: must be a valid KV bucket name, got %q", c.Bucket)
	case c.Replicas < 1 || c.Replicas > 5:
		return fmt.Errorf("kvwindow: replicas: must be between 1 and 5, got %d", c.Replicas)
	case c.Storage != jetstream.FileStorage && c.Storage != jetstream.MemoryStorage:
		return fmt.Errorf("kvwindow: storage: must be file or memory, got %d", int(c.Storage))
	case c.MarkerTTL < time.Second || c.MarkerTTL%time.Second != 0:
		return fmt.Errorf("kvwindow: marker_ttl: must be whole seconds and at least 1s, got %s", c.MarkerTTL)
	case c.MaxBytes < 0:
		return fmt.Errorf("kvwindow: max_bytes: must be 0 (unlimited) or positive, got %d", c.MaxBytes)
	case c.MaxTTL < 0:
		return fmt.Errorf("kvwindow: max_ttl: must be 0 (not known) or positive, got %s", c.MaxTTL)
	case c.Timeout < 0:
		return fmt.Errorf("kvwindow: timeout: must be positive, got %s", c.Timeout)
	case c.Shards < 1 || c.Shards > MaxShards:
		return fmt.Errorf("kvwindow: shards: must be between 1 and %d, got %d", MaxShards, c.Shards)
	case c.Shards > 1 && len(c.Bucket) > 240:
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
