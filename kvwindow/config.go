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
	// Timeout bounds every operation (a Claim with its retries, a Get, a Forget, a Ping). Default 5s.
	Timeout time.Duration
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
	if c.Timeout < 0 {
		return fmt.Errorf("kvwindow: timeout: must be positive, got %s", c.Timeout)
	}
	return nil
}
