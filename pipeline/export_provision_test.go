package pipeline

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ProvisionFailed is what a failed provisioning attempt does (provisionFailed): stop, or retry with readiness's reason.
func ProvisionFailed(err error) (stop bool, reason error) { return provisionFailed(err) }

// Provision creates what a pipeline of cfg (with js, when not nil) needs and is missing, as Run does with
// Config.Provision (provision), after applying and checking cfg's defaults as New does.
func Provision(ctx context.Context, js jetstream.JetStream, cfg Config) error {
	if js != nil {
		cfg.JetStream = js
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return err
	}
	_, err := provision(ctx, cfg, false)
	return err
}

// WithPlacementStuckAfter is cfg with a start that says a lasting placement refusal at ERROR after d rather than
// jserr.PlacementStuckAfter.
func WithPlacementStuckAfter(cfg Config, d time.Duration) Config {
	cfg.placementStuckAfter = d
	return cfg
}
