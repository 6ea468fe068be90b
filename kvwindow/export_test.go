package kvwindow

// SetAsyncPublish switches claim creates between js.PublishMsg (false) and js.PublishMsgAsync (true).
func SetAsyncPublish(w *Window, on bool) {
	for _, s := range w.shards {
		s.async = on
	}
}

// Stats reports what claims ran into, over every bucket: 10071 and 10164 answers, markers written over, and reads
// that found nothing.
func Stats(w *Window) (w10071, w10164, markers, empty uint64) {
	for _, s := range w.shards {
		w10071 += s.stats.wrongSeq10071.Load()
		w10164 += s.stats.wrongSeq10164.Load()
		markers += s.stats.markers.Load()
		empty += s.stats.empty.Load()
	}
	return
}

// Takeovers counts the takeover writes claims attempted: a later delivery replacing an earlier one's claim.
func Takeovers(w *Window) uint64 {
	var n uint64
	for _, s := range w.shards {
		n += s.stats.takeovers.Load()
	}
	return n
}
