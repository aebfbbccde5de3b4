package tenantcfg

import "fmt"

// Proxy holds how the Messages API proxy treats a tenant's requests
// (see docs/messages-api.md).
type Proxy struct {
	// FailOpen sends a request upstream as the client sent it when Mnemos
	// cannot manage it (Postgres or NATS unavailable); off, the client gets
	// a 503 overloaded_error instead and the upstream is not called.
	FailOpen bool `json:"fail_open"`
	// ExactCountWithinPercent, when above 0, lets the proxy ask the
	// upstream's count_tokens for a request whose estimate is within that
	// percentage of the auto-compact threshold, and decide on the exact
	// figure: an estimate can be a few percent off, and there it decides
	// whether the session is compacted. Each such request costs one more
	// upstream call. 0: never asked.
	ExactCountWithinPercent float64 `json:"exact_count_within_percent"`
	// PreflightExactPercent, when above 0, lets a preflight ask the
	// tenant's upstream's count_tokens when at least that percentage of
	// its count is estimated rather than measured by a response: the
	// request's new messages, and before any response the system prompt
	// and tools too. The exact figure replaces the estimate of that part.
	// One or two more upstream calls for those preflights; 0: never asked.
	PreflightExactPercent float64 `json:"preflight_exact_percent"`
}

// Validate reports a percentage out of range.
func (p Proxy) Validate() error {
	if p.ExactCountWithinPercent < 0 || p.ExactCountWithinPercent > 100 {
		return fmt.Errorf("proxy: exact_count_within_percent must be within 0..100, got %v", p.ExactCountWithinPercent)
	}
	if p.PreflightExactPercent < 0 || p.PreflightExactPercent > 100 {
		return fmt.Errorf("proxy: preflight_exact_percent must be within 0..100, got %v", p.PreflightExactPercent)
	}
	return nil
}

// DefaultProxy fails open: an agent keeps working while Mnemos cannot
// manage its requests.
func DefaultProxy() Proxy { return Proxy{FailOpen: true} }
