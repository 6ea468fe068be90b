package pipeline

import (
	"context"
	"fmt"
	"time"
)

// tooOld says why a delivery received at received must not be published now ("" when it may): held past the hold
// bound, or across a pause of the process, it may have been published by another replica longer ago than the
// output stream's duplicate window remembers.
func (p *Pipeline) tooOld(received time.Duration) string {
	now := p.clock()
	if held, bound := now-received, time.Duration(p.maxHold.Load()); held > bound {
		return fmt.Sprintf("held %s, longer than the hold bound %s", held.Round(time.Millisecond), bound)
	}
	if received < time.Duration(p.pauseTill.Load()) {
		return "the process was paused after the delivery arrived"
	}
	if last := time.Duration(p.lastTick.Load()); last > 0 && now-last > p.pauseThreshold() {
		return fmt.Sprintf("the process was paused (no tick for %s)", (now - last).Round(time.Millisecond))
	}
	return ""
}

// holdBound is the longest a delivery may be held before it is published: MaxHold, or half the output stream's
// duplicate window, so that a later delivery's publish under the same Nats-Msg-Id still collapses.
func (p *Pipeline) holdBound(dupWindow time.Duration) time.Duration {
	if p.cfg.MaxHold > 0 {
		return p.cfg.MaxHold
	}
	if dupWindow <= 0 {
		return p.cfg.AckWait
	}
	return dupWindow / 2
}

// pauseThreshold is the gap between two ticks of the pause detector that counts as a pause of the process: at
// least 2s, no scheduling hiccup even under the race detector (a false alarm only costs redeliveries).
func (p *Pipeline) pauseThreshold() time.Duration {
	return min(5*time.Second, max(2*time.Second, time.Duration(p.maxHold.Load())/4))
}

const pauseTick = 100 * time.Millisecond

// pauseLoop notices that the process was stopped (SIGSTOP, a frozen container): every delivery received before
// or just after the pause is handed back instead of published, and the consume loop binds again.
func (p *Pipeline) pauseLoop(ctx context.Context) {
	t := time.NewTicker(pauseTick)
	defer t.Stop()
	p.lastTick.Store(int64(p.clock()))
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := p.clock()
		gap := now - time.Duration(p.lastTick.Load())
		if gap > p.pauseThreshold() {
			p.pauseTill.Store(int64(now + time.Second))
			p.rebind.Store(true)
			p.log.Warn("pipeline: the process was paused; deliveries held across the pause are handed back", "pause", gap.Round(time.Millisecond))
		}
		p.lastTick.Store(int64(now))
	}
}
