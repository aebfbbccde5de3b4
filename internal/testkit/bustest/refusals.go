package bustest

import (
	"errors"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
)

// Refusals collects the errors the server sends a connection
// asynchronously (nats.ErrorHandler(r.Handler)), such as a publish or a
// subscription its permissions refuse.
type Refusals struct {
	mu   sync.Mutex
	errs []error
}

// Handler is the connection's nats.ErrHandler.
func (r *Refusals) Handler(_ *nats.Conn, _ *nats.Subscription, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, err)
}

// Refused reports whether the server sent a permissions violation naming
// subject.
func (r *Refusals) Refused(subject string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, err := range r.errs {
		if errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), subject) {
			return true
		}
	}
	return false
}
