package proctest

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ListeningAddrs lists the TCP sockets the process pid listens on: the
// sockets among its open files (/proc/<pid>/fd) that /proc/<pid>/net/tcp
// and tcp6 show in state LISTEN. Whatever the process opened, by any
// library, is there.
func ListeningAddrs(pid int) ([]netip.AddrPort, error) {
	proc := filepath.Join("/proc", strconv.Itoa(pid))
	fds, err := os.ReadDir(filepath.Join(proc, "fd"))
	if err != nil {
		return nil, fmt.Errorf("proctest.ListeningAddrs: %w", err)
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join(proc, "fd", fd.Name()))
		if err != nil {
			continue // closed meanwhile
		}
		if inode, ok := strings.CutPrefix(target, "socket:["); ok {
			inodes[strings.TrimSuffix(inode, "]")] = true
		}
	}
	var out []netip.AddrPort
	for _, table := range []string{"tcp", "tcp6"} {
		f, err := os.Open(filepath.Join(proc, "net", table))
		if err != nil {
			return nil, fmt.Errorf("proctest.ListeningAddrs: %w", err)
		}
		sc := bufio.NewScanner(f)
		sc.Scan() // the header
		for sc.Scan() {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode …
			fields := strings.Fields(sc.Text())
			const listen = "0A"
			if len(fields) < 10 || fields[3] != listen || !inodes[fields[9]] {
				continue
			}
			addr, err := parseProcAddr(fields[1])
			if err != nil {
				f.Close()
				return nil, fmt.Errorf("proctest.ListeningAddrs: %s: %w", table, err)
			}
			out = append(out, addr)
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("proctest.ListeningAddrs: %w", err)
		}
	}
	return out, nil
}

// parseProcAddr reads an address of /proc/net/tcp: the IP in hex, as 32-bit
// words in host (little-endian) order, a colon, the port in hex.
func parseProcAddr(s string) (netip.AddrPort, error) {
	ipHex, portHex, ok := strings.Cut(s, ":")
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("address %q", s)
	}
	raw, err := hex.DecodeString(ipHex)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.AddrPort{}, fmt.Errorf("address %q", s)
	}
	for i := 0; i < len(raw); i += 4 {
		raw[i], raw[i+1], raw[i+2], raw[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
	}
	port, err := strconv.ParseUint(portHex, 16, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("port of %q", s)
	}
	ip, _ := netip.AddrFromSlice(raw)
	return netip.AddrPortFrom(ip.Unmap(), uint16(port)), nil
}
