package kvwindow

import (
	"context"
	"errors"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// BucketPing is what PingEach found of one bucket: its stream's info as the read returned it (nil when the read
// failed, ReadErr saying why), and what Ping makes of it (Err: nil, or wrapping ErrWindowLost, ErrAgeLimit or
// ErrUnavailable).
type BucketPing struct {
	Bucket  string
	Info    *jetstream.StreamInfo
	ReadErr error
	Err     error
}

// PingEach is Ping for a caller that also wants what the reads say of each bucket's stream (its leader, its
// replicas), without reading it again: one stream info request per bucket, all at once, each bounded by
// Config.Timeout. It returns each bucket's read, in shard order, and Ping's verdict on them.
func (w *Window) PingEach(ctx context.Context) ([]BucketPing, error) {
	out := make([]BucketPing, len(w.shards))
	var wg sync.WaitGroup
	for i, s := range w.shards {
		wg.Go(func() {
			out[i].Bucket = s.cfg.Bucket
			out[i].Info, out[i].ReadErr, out[i].Err = s.pingInfo(ctx)
		})
	}
	wg.Wait()
	errs := make([]error, len(out))
	for i, b := range out {
		errs[i] = b.Err
	}
	return out, pingVerdict(errs)
}

// pingVerdict is what a Ping of the buckets that answered errs (in shard order) returns: the first lost bucket's
// error, else the first age limit's, else the first other failure, else nil. The order is that of what each
// takes to pass, so that the failure reported is never one that hides a graver one: a lost bucket does not pass
// by itself (its claims are gone: the worker must be restarted once the operator has decided), an age limit
// passes once the operator edits it, and any other failure (a bucket not answering, its stream without a leader)
// passes by itself.
func pingVerdict(errs []error) error {
	var lost, aged, other error
	for _, err := range errs {
		switch {
		case err == nil:
		case errors.Is(err, ErrWindowLost):
			if lost == nil {
				lost = err
			}
		case errors.Is(err, ErrAgeLimit):
			if aged == nil {
				aged = err
			}
		case other == nil:
			other = err
		}
	}
	switch {
	case lost != nil:
		return lost
	case aged != nil:
		return aged
	}
	return other
}

// pingInfo is the shard's Ping with the stream info it read (nil when the read failed: readErr, its own error).
func (w *shard) pingInfo(ctx context.Context) (info *jetstream.StreamInfo, readErr, err error) {
	if w.closed != nil && w.closed.Load() {
		err = w.usable()
		return nil, err, err
	}
	info, readErr = w.info(ctx)
	if readErr != nil {
		return nil, readErr, w.observe(nil, readErr)
	}
	if err := w.observe(info, nil); err != nil {
		return info, nil, err
	}
	return info, nil, w.agedOut()
}
