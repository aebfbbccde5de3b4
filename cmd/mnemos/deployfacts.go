//go:build deployfacts

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
)

// Built with the deployfacts tag, `mnemos deploy-facts` prints, as JSON, what
// the tests of deploy/ check the Helm chart and docker-compose.yml against:
// the targets that run as their own process, and every environment variable
// of the configuration table (configtable.go). Those tests run it with
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

// deployFacts lists the targets of the target table and the variables of
// the configuration table, names and aliases.
func deployFacts() any {
	var facts struct {
		Targets []string `json:"targets"`
		Env     []string `json:"env"`
	}
	for _, t := range targetTable {
		facts.Targets = append(facts.Targets, t.name)
	}
	for _, v := range configTable {
		facts.Env = append(facts.Env, v.env)
		if v.alias != "" {
			facts.Env = append(facts.Env, v.alias)
		}
	}
	slices.Sort(facts.Env)
	facts.Env = slices.Compact(facts.Env)
	return facts
}
