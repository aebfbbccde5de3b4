//go:build deployfacts

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sync"
)

// Built with the deployfacts tag, `mnemos deploy-facts` prints, as JSON, what
// the tests of deploy/ check the Helm chart and docker-compose.yml against:
// the targets that run as their own process, and every environment variable
// the configuration reader reads. Those tests run it with
// `go run -tags deployfacts ./cmd/mnemos deploy-facts`; the binary built
// without the tag (every other build) has no such command.
func init() {
	if len(os.Args) != 2 || os.Args[1] != "deploy-facts" {
		return
	}
	if err := json.NewEncoder(os.Stdout).Encode(deployFacts()); err != nil {
		fmt.Fprintln(os.Stderr, "mnemos deploy-facts:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// deployFacts finds the variables by reading the configuration of every
// target through a getenv that remembers what it was asked.
func deployFacts() any {
	var facts struct {
		Targets []string `json:"targets"`
		Env     []string `json:"env"`
	}
	for _, t := range targetTable {
		facts.Targets = append(facts.Targets, t.name)
	}
	var mu sync.Mutex
	getenv := func(name string) string {
		mu.Lock()
		defer mu.Unlock()
		if !slices.Contains(facts.Env, name) {
			facts.Env = append(facts.Env, name)
		}
		return ""
	}
	for _, target := range targetNames() {
		_, _ = configFromEnv(target, getenv) // single targets fail without a NATS URL; the names are what matter
	}
	slices.Sort(facts.Env)
	return facts
}
