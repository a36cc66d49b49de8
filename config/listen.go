package config

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
)

// CheckListenAddress reports what is wrong with addr as an address for
// hookbox serve to listen on, or nil. It wants host:port: the host may be
// empty (every interface) and the port is a number from 0 (any free
// port) to 65535, or a service name net.Listen resolves (http). The
// error does not repeat addr, which may have come from the environment.
func CheckListenAddress(addr string) error {
	return checkListenAddress(addr, "8080")
}

// checkListenAddress is CheckListenAddress with the port its examples
// suggest.
func checkListenAddress(addr, examplePort string) error {
	like := fmt.Sprintf(`like ":%s" (every interface) or "127.0.0.1:%s"`, examplePort, examplePort)
	_, port, err := net.SplitHostPort(addr)
	var ae *net.AddrError
	switch {
	case errors.As(err, &ae) && ae.Err == "missing port in address":
		return fmt.Errorf("has no port; write host:port, %s", like)
	case err != nil:
		return fmt.Errorf(`is not host:port (an IPv6 host goes in brackets, like "[::1]:%s"); write host:port, %s`, examplePort, like)
	case port == "":
		return fmt.Errorf(`has no port after the colon; write one, %s, or ":0" for any free port`, like)
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return fmt.Errorf("has a port that is not a number from 0 to 65535 (0: any free port); write host:port, %s", like)
	}
	return nil
}

// SameListenAddress reports whether listeners on a and b, both valid by
// CheckListenAddress, would take the same address, so that the second
// could not start: the same port, other than 0 (each gets a free one), on
// the same host or on every interface. Go listens on every interface for
// an empty host, "0.0.0.0" and "::" alike, which takes the port on every
// address. Two different hosts are resolved (a name to its addresses,
// within a few seconds): they clash when they share an address, as
// "localhost" and "127.0.0.1" do. A name that does not resolve clashes
// with nothing; serve then fails to listen on it, naming it.
func SameListenAddress(a, b string) bool {
	hostA, portA, errA := net.SplitHostPort(a)
	hostB, portB, errB := net.SplitHostPort(b)
	if errA != nil || errB != nil {
		return false
	}
	pa, errA := net.LookupPort("tcp", portA)
	pb, errB := net.LookupPort("tcp", portB)
	if errA != nil || errB != nil || pa != pb || pa == 0 {
		return false
	}
	if strings.EqualFold(hostA, hostB) || everyInterface(hostA) || everyInterface(hostB) {
		return true
	}
	ipsA, ipsB := hostAddrs(hostA), hostAddrs(hostB)
	for _, x := range ipsA {
		for _, y := range ipsB {
			if x.Equal(y) {
				return true
			}
		}
	}
	return false
}

// resolveWait bounds the look-up of a listen host name.
const resolveWait = 3 * time.Second

// hostAddrs is the address a listen host binds: an IP address itself, or
// of a name's addresses the one net.Listen takes, its first IPv4 address
// if it has one, else its first; none when the name does not resolve in
// resolveWait. (localhost with both 127.0.0.1 and ::1 binds 127.0.0.1
// only, so it takes nothing from a listener on [::1].)
func hostAddrs(host string) []net.IP {
	if ip := net.ParseIP(host); ip != nil {
		return []net.IP{ip}
	}
	ctx, cancel := context.WithTimeout(context.Background(), resolveWait)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil {
		return nil
	}
	return boundAddr(addrs)
}

// boundAddr is, of a name's addresses, the one net.Listen binds: the
// first IPv4 address, else the first.
func boundAddr(addrs []net.IPAddr) []net.IP {
	for _, a := range addrs {
		if a.IP.To4() != nil {
			return []net.IP{a.IP}
		}
	}
	if len(addrs) > 0 {
		return []net.IP{addrs[0].IP}
	}
	return nil
}

// everyInterface reports whether a listen host means every interface.
func everyInterface(host string) bool {
	ip := net.ParseIP(host)
	return host == "" || ip != nil && ip.IsUnspecified()
}

// checkListen checks listen and admin_listen, each a host:port. Whether
// they take the same address hookbox serve checks, against the address it
// listens on, which --listen or the default may decide.
func (c *Config) checkListen() []error {
	var errs []error
	if c.Listen != "" {
		if err := checkListenAddress(c.Listen, "8080"); err != nil {
			errs = append(errs, fmt.Errorf("listen: %w", err))
		}
	}
	if c.AdminListen != "" {
		if err := checkListenAddress(c.AdminListen, "9090"); err != nil {
			errs = append(errs, fmt.Errorf("admin_listen: %w", err))
		}
	}
	return errs
}

// adminListenWarnings warns about an admin_listen without admin_token:
// the admin API and the console are off, so admin_listen serves /metrics
// alone.
func (c *Config) adminListenWarnings() []string {
	if c.AdminListen == "" || c.AdminToken != "" {
		return nil
	}
	return []string{"admin_listen is set but admin_token is not: /admin/ and /ui/ need admin_token, so admin_listen serves /metrics only; set admin_token (for example admin_token: \"${HOOKBOX_ADMIN_TOKEN}\") to turn them on"}
}
