package pipeline

import (
	"context"
	"fmt"
	"time"
)

// tooOld says why a delivery received at received must not be published now ("" when it may): it has been held
// longer than the hold bound, or the process was paused (stopped, frozen) since it was received. In both cases the
// server may have redelivered it to another replica, which may have published it longer ago than the output
// stream's duplicate window remembers.
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

// holdBound is the longest a delivery may be held before it is published, given the output stream's duplicate
// window: half of it, or MaxHold when set. A publish handed to the client within the bound is stored, or given
// up, well inside the window, so a later delivery's publish under the same Nats-Msg-Id still collapses.
func (p *Pipeline) holdBound(dupWindow time.Duration) time.Duration {
	if p.cfg.MaxHold > 0 {
		return p.cfg.MaxHold
	}
	if dupWindow <= 0 {
		return p.cfg.AckWait
	}
	return dupWindow / 2
}

// pauseThreshold is the gap between two ticks of the pause detector (every pauseTick) that counts as a pause of
// the process rather than scheduling noise.
func (p *Pipeline) pauseThreshold() time.Duration {
	// At least 2s: a tick delayed that long is no scheduling hiccup, even on a loaded machine under the race
	// detector; a false alarm only costs redeliveries.
	return min(5*time.Second, max(2*time.Second, time.Duration(p.maxHold.Load())/4))
}

const pauseTick = 100 * time.Millisecond

// pauseLoop notices that the process was stopped (SIGSTOP, a frozen container): every delivery received before
// the pause, or in the moments after it while the client hands over what it buffered meanwhile, is handed back
// instead of published, and the consume loop binds again so that buffered deliveries are dropped.
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
