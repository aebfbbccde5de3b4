// Package faults holds the test hooks that crash a process at a chosen point
// of its work, for the fault-injection tests (tests/faults). They are off
// unless configured, and a production process never configures them.
package faults

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// ExitCode is the status a process exits with when a crash point is reached,
// so a test tells the crash it asked for from a failure.
const ExitCode = 86

// Points maps a point (a consumer's durable name, "outbox-relay") to the hit
// of it that crashes the process: 1 is the first.
type Points map[string]int

// Parse reads "<point>:<n>" pairs separated by commas, e.g.
// "token-accounting:5,compactor:1". An empty spec is no points.
func Parse(spec string) (Points, error) {
	points := Points{}
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		i := strings.LastIndexByte(part, ':')
		if i <= 0 {
			return nil, fmt.Errorf("%q: want <point>:<n>", part)
		}
		n, err := strconv.Atoi(part[i+1:])
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q: want <point>:<n> with n ≥ 1", part)
		}
		points[part[:i]] = n
	}
	return points, nil
}

// Crash counts the hits of each point and calls exit at the configured one.
// A nil *Crash does nothing.
type Crash struct {
	points Points
	exit   func(point string, hit int)

	mu   sync.Mutex
	hits map[string]int
}

// NewCrash returns a Crash over points, or nil when there are none. exit
// must end the process (os.Exit(ExitCode)); it is called at most once.
func NewCrash(points Points, exit func(point string, hit int)) *Crash {
	if len(points) == 0 {
		return nil
	}
	return &Crash{points: points, exit: exit, hits: map[string]int{}}
}

// Hit counts one hit of point and crashes the process at the configured one.
func (c *Crash) Hit(point string) {
	if c == nil {
		return
	}
	n, ok := c.points[point]
	if !ok {
		return
	}
	c.mu.Lock() // held on: nothing else gets past a crash point meanwhile
	c.hits[point]++
	if c.hits[point] == n {
		c.exit(point, n)
	}
	c.mu.Unlock()
}
