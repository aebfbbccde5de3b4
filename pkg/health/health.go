// Package health serves the liveness and readiness endpoints every target
// has, whatever else it serves.
package health

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/mnemos-ai/mnemos/api"
)

// Check reports whether a dependency is usable.
type Check func(context.Context) error

// Mux is what Register adds its routes to: an *http.ServeMux, or a wrapper
// that records them.
type Mux interface {
	HandleFunc(pattern string, handler func(http.ResponseWriter, *http.Request))
}

// Register adds GET /healthz (the process is alive, and what its targets
// are doing) and GET /readyz (every check passes) to mux.
func Register(mux Mux, checks map[string]Check, targets map[string]string) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		write(w, http.StatusOK, api.Health{Status: "ok", Targets: targets})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		failed := map[string]string{}
		for name, check := range checks {
			if err := check(ctx); err != nil {
				failed[name] = err.Error()
			}
		}
		if len(failed) > 0 {
			write(w, http.StatusServiceUnavailable, api.Health{Status: "unavailable", Failed: failed})
			return
		}
		write(w, http.StatusOK, api.Health{Status: "ready", Targets: targets})
	})
}

func write(w http.ResponseWriter, status int, v api.Health) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client went away; nothing left to tell it
}
