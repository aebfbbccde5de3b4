package proctest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
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

// ClusterOptions configure every node of a cluster.
type ClusterOptions struct {
	// Sync is the nodes' JetStream sync_interval: "always" (fsync after
	// every write, before the acknowledgement), an interval such as "10s",
	// or empty for the server's default (every two minutes).
	Sync string
}

// StartCluster starts n nats-server nodes forming one JetStream cluster and
// waits until JetStream answers on every node with a meta leader elected.
// The nodes are killed when t ends.
func StartCluster(t testing.TB, bins Binaries, n int) *Cluster {
	t.Helper()
	return StartClusterWith(t, bins, n, ClusterOptions{})
}

// StartClusterWith is StartCluster with every node configured by opts.
func StartClusterWith(t testing.TB, bins Binaries, n int, opts ClusterOptions) *Cluster {
	t.Helper()
	var conf []string
	if opts.Sync != "" {
		// The command line has no flag for it: a configuration file holds
		// it, and the flags below add everything else.
		file := filepath.Join(t.TempDir(), "nats.conf")
		if err := os.WriteFile(file, fmt.Appendf(nil, "jetstream {\n  sync_interval: %q\n}\n", opts.Sync), 0o600); err != nil {
			t.Fatalf("proctest: %v", err)
		}
		conf = []string{"-c", file}
	}
	client, route, monitor := make([]int, n), make([]int, n), make([]int, n)
	var routes []string
	for i := range n {
		client[i], route[i], monitor[i] = freePort(t), freePort(t), freePort(t)
		routes = append(routes, "nats://127.0.0.1:"+strconv.Itoa(route[i]))
	}
	c := &Cluster{}
	for i := range n {
		name := fmt.Sprintf("n%d", i+1)
		url := "nats://127.0.0.1:" + strconv.Itoa(client[i])
		p := &Process{
			name: "nats-" + name, bin: bins.NATSServer, env: cleanEnv(), t: t,
			args: append(slices.Clone(conf),
				"-n", name, "-a", "127.0.0.1", "-p", strconv.Itoa(client[i]), "-m", strconv.Itoa(monitor[i]), "-js", "-sd", t.TempDir(),
				"--cluster_name", "mnemos", "--cluster", routes[i], "--routes", strings.Join(routes, ","),
			),
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
		c.Nodes = append(c.Nodes, &NATS{Process: p, url: url, monitor: "http://127.0.0.1:" + strconv.Itoa(monitor[i])})
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

// JetStreamSync is how the node's JetStream syncs its files, as its
// monitoring endpoint (/varz) reports it: always after every write, or every
// interval.
func (n *NATS) JetStreamSync(ctx context.Context) (always bool, interval time.Duration, err error) {
	if n.monitor == "" {
		return false, 0, fmt.Errorf("proctest: %s has no monitoring port", n.name)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.monitor+"/varz", nil)
	if err != nil {
		return false, 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, 0, fmt.Errorf("proctest: %s /varz: %w", n.name, err)
	}
	defer resp.Body.Close()
	var varz struct {
		JetStream struct {
			Config struct {
				SyncInterval time.Duration `json:"sync_interval"`
				SyncAlways   bool          `json:"sync_always"`
			} `json:"config"`
		} `json:"jetstream"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&varz); err != nil {
		return false, 0, fmt.Errorf("proctest: %s /varz: %w", n.name, err)
	}
	return varz.JetStream.Config.SyncAlways, varz.JetStream.Config.SyncInterval, nil
}
