package jsonscan

// SetMaxDepth sets the nesting limit, clamped to [512, MaxDepth]. It applies from the next container opened.
func (s *Scanner) SetMaxDepth(n int) {
	s.maxDepth = min(max(n, 512), MaxDepth)
}
