package jsonscan

// SetMaxDepth sets the nesting limit (the product keeps the default). It applies from the next container opened.
func (s *Scanner) SetMaxDepth(n int) {
	s.maxDepth = n
}
