package pipeline

import "time"

// PlanShutdown is planShutdown's steps for budget: the drain's, the cancellation's and Run's end, from the stop.
func PlanShutdown(budget time.Duration) (drain, cancel, end time.Duration) {
	s := planShutdown(budget)
	return s.drain, s.cancel, s.end
}

// HandOversAfterStop offers n deliveries to the hand-over of a stopped run with a worker always ready to take one
// (a buffered channel: every send could proceed), and returns how many were given rather than handed back.
func HandOversAfterStop(n int) int {
	rs := newRunState(time.Second)
	rs.work = make(chan *delivery, n)
	rs.stop()
	for range n {
		rs.handOver(&delivery{})
	}
	return len(rs.work)
}
