package tenantcfg

// Proxy holds how the Messages API proxy treats a tenant's requests
// (see docs/messages-api.md).
type Proxy struct {
	// FailOpen sends a request upstream as the client sent it when Mnemos
	// cannot manage it (Postgres or NATS unavailable); off, the client gets
	// a 503 overloaded_error instead and the upstream is not called.
	FailOpen bool `json:"fail_open"`
}

// DefaultProxy fails open: an agent keeps working while Mnemos cannot
// manage its requests.
func DefaultProxy() Proxy { return Proxy{FailOpen: true} }
