package proctest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Cluster is a JetStream cluster of nats-server children on loopback: each
// node keeps its name, ports and store directory across restarts, so a node
// killed and started again rejoins as itself.
type Cluster struct {
	Nodes []*NATS
	names []string
}

// StartCluster starts n nats-server nodes forming one JetStream cluster and
// waits until JetStream answers on every node with a meta leader elected.
// The nodes are killed when t ends.
func StartCluster(t testing.TB, bins Binaries, n int) *Cluster {
	t.Helper()
	client, route := make([]int, n), make([]int, n)
	var routes []string
	for i := range n {
		client[i], route[i] = freePort(t), freePort(t)
		routes = append(routes, "nats://127.0.0.1:"+strconv.Itoa(route[i]))
	}
	c := &Cluster{}
	for i := range n {
		name := fmt.Sprintf("n%d", i+1)
		url := "nats://127.0.0.1:" + strconv.Itoa(client[i])
		p := &Process{
			name: "nats-" + name, bin: bins.NATSServer, env: cleanEnv(), t: t,
			args: []string{
				"-n", name, "-a", "127.0.0.1", "-p", strconv.Itoa(client[i]), "-js", "-sd", t.TempDir(),
				"--cluster_name", "mnemos", "--cluster", routes[i], "--routes", strings.Join(routes, ","),
			},
			// A node alone cannot answer for JetStream until the others
			// are up: each is ready once it listens; the cluster below.
			ready: func(ctx context.Context, p *Process) error {
				for {
					nc, err := nats.Connect(url, nats.Timeout(time.Second))
					if err == nil {
						nc.Close()
						return nil
					}
					if err := p.pause(ctx, 50*time.Millisecond); err != nil {
						return err
					}
				}
			},
		}
		p.start(t)
		c.Nodes = append(c.Nodes, &NATS{Process: p, url: url})
		c.names = append(c.names, name)
	}
	deadline := time.Now().Add(readyTimeout)
	for _, node := range c.Nodes {
		for !c.answers(node.URL()) {
			if time.Now().After(deadline) {
				t.Fatalf("proctest: the JetStream cluster did not form within %s", readyTimeout)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return c
}

// answers reports whether JetStream answers at url within a short wait: a
// request sent before the cluster elected its meta leader is never
// answered, so each try has its own deadline.
func (c *Cluster) answers(url string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return jetStreamAnswers(ctx, url) == nil
}

// URL lists every node's client URL, as MNEMOS_NATS_URL takes them.
func (c *Cluster) URL() string {
	urls := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		urls[i] = n.URL()
	}
	return strings.Join(urls, ",")
}

// StreamLeader is the node leading stream (by its full name), asked of any
// node that answers.
func (c *Cluster) StreamLeader(ctx context.Context, stream string) (*NATS, error) {
	nc, err := nats.Connect(c.URL(), nats.Timeout(2*time.Second))
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return nil, err
	}
	if info.Cluster == nil {
		return nil, fmt.Errorf("proctest: stream %s has no cluster info", stream)
	}
	for i, name := range c.names {
		if name == info.Cluster.Leader {
			return c.Nodes[i], nil
		}
	}
	return nil, fmt.Errorf("proctest: stream %s has no leader now (%q)", stream, info.Cluster.Leader)
}
