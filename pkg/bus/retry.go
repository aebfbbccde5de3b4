package bus

import (
	"errors"
	"math/rand/v2"
	"time"
)

// Permanent marks err as permanent: retrying will not help (bad input, an
// unknown schema, a tenant mismatch), so Run dead-letters the message at once
// instead of retrying it. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

// IsPermanent reports whether err, or an error it wraps, was marked with
// Permanent.
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

type permanentError struct {
	err error
}

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// DefaultBackoff is the delay before redelivery after the attempt-th failed
// delivery (1-based): 250ms doubling up to 30s, with jitter so retries of
// many messages spread out.
func DefaultBackoff(attempt int) time.Duration {
	return backoff(attempt, 250*time.Millisecond, 30*time.Second)
}

// backoff returns a delay in [d/2, d], where d is base doubled attempt-1
// times and capped at limit.
func backoff(attempt int, base, limit time.Duration) time.Duration {
	d := base
	for i := 1; i < attempt && d < limit; i++ {
		d *= 2
	}
	d = min(d, limit)
	return d/2 + rand.N(d/2+1) //nolint:gosec // jitter needs no cryptographic randomness
}

// Transient marks err as a failure of the system rather than of the message
// (the database unreachable, say): Run retries the handler in place, with
// backoff, for as long as it takes, keeping the message in progress, so an
// outage never uses up a message's deliveries nor sends it to the dead
// letters. Transient(nil) is nil.
func Transient(err error) error {
	if err == nil {
		return nil
	}
	return &transientError{err: err}
}

// IsTransient reports whether err, or an error it wraps, was marked with Transient.
func IsTransient(err error) bool {
	var t *transientError
	return errors.As(err, &t)
}

type transientError struct {
	err error
}

func (e *transientError) Error() string { return e.err.Error() }
func (e *transientError) Unwrap() error { return e.err }
