package natsreq

// Slots is how many slots m has made.
func Slots(m *Mux) int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.made
}

// Idle is how many slots wait for a request, and how many slots (of any kind) still hold a reply subject.
func Idle(m *Mux) (free, holding int) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	for _, s := range m.free {
		if s.reply != "" {
			holding++
		}
	}
	return len(m.free), holding + len(m.slots)
}
