package pipeline

// ProvisionFailed is what a failed provisioning attempt does (provisionFailed): stop, or retry with readiness's reason.
func ProvisionFailed(err error) (stop bool, reason error) { return provisionFailed(err) }
