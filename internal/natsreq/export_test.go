package natsreq

// Slots is how many slots m has made.
func Slots(m *Mux) int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.slots)
}
