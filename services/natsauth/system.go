package natsauth

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
)

// SystemConns closes connections on a nats-server of its own, every server
// of a cluster, through its system account: it asks them all for the
// user's connections ($SYS.REQ.SERVER.PING.CONNZ) and has each closed by
// its server ($SYS.REQ.SERVER.<id>.KICK). Its connection is a user of the
// server's system_account.
type SystemConns struct {
	nc *nats.Conn
	// wait is how long the servers' answers are gathered.
	wait time.Duration
}

// NewSystemConns closes connections through nc, a system account's.
func NewSystemConns(nc *nats.Conn) *SystemConns {
	return &SystemConns{nc: nc, wait: 500 * time.Millisecond}
}

// connzAnswer is the part of a server's answer to a CONNZ request read
// here.
type connzAnswer struct {
	Server struct {
		ID string `json:"id"`
	} `json:"server"`
	Data struct {
		Conns []struct {
			Cid uint64 `json:"cid"`
		} `json:"connections"`
	} `json:"data"`
	Error *struct {
		Description string `json:"description"`
	} `json:"error"`
}

// CloseUser closes the open connections named user on every server that
// answers within the wait, as their answers come, and says how many.
func (c *SystemConns) CloseUser(user string) (int, error) {
	req, err := json.Marshal(map[string]any{"auth": true, "user": user, "limit": 1 << 16})
	if err != nil {
		return 0, err
	}
	inbox := c.nc.NewRespInbox()
	sub, err := c.nc.SubscribeSync(inbox)
	if err != nil {
		return 0, fmt.Errorf("natsauth: subscribing to the servers' answers: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := c.nc.PublishRequest("$SYS.REQ.SERVER.PING.CONNZ", inbox, req); err != nil {
		return 0, fmt.Errorf("natsauth: asking the servers for %s's connections: %w", user, err)
	}
	deadline := time.Now().Add(c.wait)
	closed := 0
	var errs []error
	for {
		m, err := sub.NextMsg(time.Until(deadline))
		if errors.Is(err, nats.ErrTimeout) {
			return closed, errors.Join(errs...)
		}
		if err != nil {
			return closed, errors.Join(append(errs, err)...)
		}
		var a connzAnswer
		if err := json.Unmarshal(m.Data, &a); err != nil || a.Error != nil {
			errs = append(errs, fmt.Errorf("natsauth: a server's connections of %s: %s", user, m.Data))
			continue
		}
		for _, conn := range a.Data.Conns {
			if err := c.kick(a.Server.ID, conn.Cid); err != nil {
				errs = append(errs, err)
				continue
			}
			closed++
		}
	}
}

// kick has server close its connection cid.
func (c *SystemConns) kick(server string, cid uint64) error {
	req, err := json.Marshal(map[string]uint64{"cid": cid})
	if err != nil {
		return err
	}
	m, err := c.nc.Request("$SYS.REQ.SERVER."+server+".KICK", req, time.Second)
	if err != nil {
		return fmt.Errorf("natsauth: closing connection %d on server %s: %w", cid, server, err)
	}
	var a connzAnswer
	if err := json.Unmarshal(m.Data, &a); err == nil && a.Error != nil {
		return fmt.Errorf("natsauth: closing connection %d on server %s: %s", cid, server, a.Error.Description)
	}
	return nil
}
