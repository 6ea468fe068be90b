package pipeline

// ClaimSucceeded is what a successful claim does to the window's standing error.
func ClaimSucceeded(p *Pipeline) { p.claimUp() }
