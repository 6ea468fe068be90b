package kvwindow

// SetAsyncPublish switches claim creates between js.PublishMsg (false) and js.PublishMsgAsync (true).
func SetAsyncPublish(w *Window, on bool) { w.async = on }

// Stats reports what claims ran into: 10071 and 10164 answers, markers written over, and reads that found nothing.
func Stats(w *Window) (w10071, w10164, markers, empty uint64) {
	return w.stats.wrongSeq10071.Load(), w.stats.wrongSeq10164.Load(), w.stats.markers.Load(), w.stats.empty.Load()
}

// Takeovers counts the takeover writes claims attempted: a later delivery replacing an earlier one's claim.
func Takeovers(w *Window) uint64 { return w.stats.takeovers.Load() }
