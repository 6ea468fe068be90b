package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// instance is a running contender.
type instance struct {
	check   func() error // non-nil once the contender failed or stopped by itself
	stop    func() error
	workers []*workerReplica
}

func (b *bench) startContender(ctx context.Context, kind, url string, w *Workload) (*instance, error) {
	switch contenderClass(kind) {
	case cFloor, cNaive:
		fn := naiveContender(b.opts.shards.k())
		if kind == cFloor {
			fn = floorContender(b.opts.floorFlight, b.opts.shards.k())
		}
		cctx, cancel := context.WithCancel(ctx)
		errc := make(chan error, 1)
		go func() { errc <- fn(cctx, url, w) }()
		var once sync.Once
		var ended error
		var gotEnd atomic.Bool
		wait := func(block bool) (error, bool) {
			if gotEnd.Load() {
				return ended, true
			}
			if block {
				ended = <-errc
			} else {
				select {
				case ended = <-errc:
				default:
					return nil, false
				}
			}
			gotEnd.Store(true)
			return ended, true
		}
		return &instance{
			check: func() error {
				if err, done := wait(false); done {
					if err == nil {
						err = errors.New("returned early")
					}
					return fmt.Errorf("%s: %w", kind, err)
				}
				return nil
			},
			stop: func() error {
				var err error
				once.Do(func() { cancel(); err, _ = wait(true) })
				return err
			},
		}, nil
	case cWorker, cWorker2:
		reps, err := startWorkers(b.ps, b.workerSpec(kind), url)
		inst := &instance{workers: reps}
		inst.stop = func() error {
			var errs []error
			for _, r := range reps {
				if err := r.proc.Stop(30 * time.Second); err != nil {
					errs = append(errs, err)
				}
				if ok, werr := r.proc.Exited(); ok && werr != nil {
					errs = append(errs, fmt.Errorf("%s exited: %v", r.proc.Name, werr))
				}
			}
			return errors.Join(errs...)
		}
		inst.check = func() error {
			for _, r := range reps {
				if ok, err := r.proc.Exited(); ok {
					return fmt.Errorf("%s exited (%v):\n%s", r.proc.Name, err, r.proc.log.String())
				}
			}
			return nil
		}
		if err != nil {
			_ = inst.stop()
			return nil, err
		}
		return inst, nil
	}
	return nil, fmt.Errorf("unknown contender %q", kind)
}
