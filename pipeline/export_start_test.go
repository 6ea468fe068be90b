package pipeline

// StartDecision is where a missing consumer is created to start (decideStart), by name.
func StartDecision(set, workQueue, empty, recreate bool) string {
	return [...]string{"first", "as set", "first, setting ignored", "needs setting", "needs restart"}[decideStart(set, workQueue, empty, recreate)]
}
