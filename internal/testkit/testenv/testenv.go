// Package testenv finds the real services tests run against: what the
// environment names first, then containers when a Docker engine answers,
// then the services of the local machine.
package testenv

import (
	"context"
	"sync"
	"time"

	"github.com/testcontainers/testcontainers-go"
)

// Environment variables that name the services for tests.
const (
	DatabaseURLVar = "MNEMOS_TEST_DATABASE_URL"
	NATSURLVar     = "MNEMOS_TEST_NATS_URL"
)

// DockerAvailable reports, once per process, whether a Docker engine answers.
var DockerAvailable = sync.OnceValue(func() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return false
	}
	_ = cli.Close() // only asked whether the engine answers
	return true
})
