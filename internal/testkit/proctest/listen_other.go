//go:build !linux

package proctest

import (
	"errors"
	"net/netip"
)

// ListeningAddrs needs Linux's /proc.
func ListeningAddrs(int) ([]netip.AddrPort, error) {
	return nil, errors.New("proctest.ListeningAddrs: only on Linux")
}
