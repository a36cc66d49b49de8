package server

import (
	"net/http"
	"net/netip"
	"strings"
)

// allowed reports whether the client that sent r has an address within
// allow. A client whose address cannot be told is not allowed.
func (s *Server) allowed(r *http.Request, allow []netip.Prefix) bool {
	addr, ok := clientAddr(r, s.cfg.TrustedProxies)
	return ok && within(addr, allow)
}

// clientAddr finds the address of the client that sent r. It is the peer's
// address, unless the peer is a trusted proxy that says whom it forwards
// for: then the hops its forwarding headers list are walked from the
// nearest, skipping trusted proxies, and the first other address is the
// client's (or the farthest hop, when every hop is trusted). A hop that is
// not an address ("unknown", an obfuscated name, garbage) ends the walk
// with no answer. When both X-Forwarded-For and Forwarded are present they
// must name the same client: a proxy that writes only one of them passes
// the other through from the client, who could otherwise choose its own
// address.
func clientAddr(r *http.Request, trusted []netip.Prefix) (netip.Addr, bool) {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}, false
	}
	peer := ap.Addr().Unmap()
	if !within(peer, trusted) {
		return peer, true
	}
	xff := r.Header.Values("X-Forwarded-For")
	fwd := r.Header.Values("Forwarded")
	if len(xff) == 0 && len(fwd) == 0 {
		return peer, true // the proxy speaks for itself
	}
	var client netip.Addr
	found := false
	for _, h := range []struct {
		values []string
		split  func([]string) ([]string, bool)
	}{{xff, forwardedForHops}, {fwd, forwardedHops}} {
		if len(h.values) == 0 {
			continue
		}
		hops, ok := h.split(h.values)
		if !ok {
			return netip.Addr{}, false
		}
		c, ok := walkHops(hops, peer, trusted)
		if !ok || (found && c != client) {
			return netip.Addr{}, false
		}
		client, found = c, true
	}
	return client, found
}

// ForwardedHTTPS reports whether the proxy in front of hookbox says that
// r's client reached it over HTTPS (X-Forwarded-Proto: https; with
// several hops listed, the first, the client's). The header is believed
// only from a peer within trusted; from any other it is ignored, as a
// client can send it itself.
func ForwardedHTTPS(r *http.Request, trusted []netip.Prefix) bool {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil || !within(ap.Addr().Unmap(), trusted) {
		return false
	}
	proto, _, _ := strings.Cut(r.Header.Get("X-Forwarded-Proto"), ",")
	return strings.EqualFold(strings.TrimSpace(proto), "https")
}

// walkHops walks hops (farthest first) back from the trusted peer and
// returns the first address that is not a trusted proxy.
func walkHops(hops []string, peer netip.Addr, trusted []netip.Prefix) (netip.Addr, bool) {
	client := peer
	for i := len(hops) - 1; i >= 0; i-- {
		a, ok := parseHop(hops[i])
		if !ok {
			return netip.Addr{}, false
		}
		client = a
		if !within(a, trusted) {
			return a, true
		}
	}
	return client, true
}

// forwardedForHops splits X-Forwarded-For values (one or several header
// lines) into hops, farthest first.
func forwardedForHops(values []string) ([]string, bool) {
	var hops []string
	for _, v := range values {
		for hop := range strings.SplitSeq(v, ",") {
			hops = append(hops, strings.TrimSpace(hop))
		}
	}
	return hops, len(hops) > 0
}

// forwardedHops takes the for= parameter of each element of RFC 7239
// Forwarded values, farthest first. An element without exactly one for=
// makes the whole header unusable.
func forwardedHops(values []string) ([]string, bool) {
	var hops []string
	for _, v := range values {
		for elem := range strings.SplitSeq(v, ",") {
			var hop string
			found := 0
			for pair := range strings.SplitSeq(elem, ";") {
				key, val, ok := strings.Cut(strings.TrimSpace(pair), "=")
				if ok && strings.EqualFold(strings.TrimSpace(key), "for") {
					hop = strings.TrimSpace(val)
					found++
				}
			}
			if found != 1 {
				return nil, false
			}
			if len(hop) >= 2 && hop[0] == '"' && hop[len(hop)-1] == '"' {
				hop = hop[1 : len(hop)-1]
			}
			hops = append(hops, hop)
		}
	}
	return hops, len(hops) > 0
}

// parseHop parses one hop: an IPv4 or IPv6 address, optionally with a port
// ("192.0.2.1:80", "[2001:db8::1]:80") or in brackets ("[2001:db8::1]").
func parseHop(s string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap(), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap(), true
	}
	if len(s) > 2 && s[0] == '[' && s[len(s)-1] == ']' {
		if a, err := netip.ParseAddr(s[1 : len(s)-1]); err == nil {
			return a.Unmap(), true
		}
	}
	return netip.Addr{}, false
}

// within reports whether a lies in any of ps.
func within(a netip.Addr, ps []netip.Prefix) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
