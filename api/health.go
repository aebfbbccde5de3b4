package api

// Health is the answer to GET /healthz and GET /readyz.
type Health struct {
	// Status is ok (alive), ready, or unavailable.
	Status string `json:"status"`
	// Targets say what each of the process's targets is doing.
	Targets map[string]string `json:"targets,omitempty"`
	// Failed are the failed checks of an unavailable process, by name,
	// with their errors.
	Failed map[string]string `json:"failed,omitempty"`
}
