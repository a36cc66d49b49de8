package main

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// readProcLimits reads the limits on hookbox's processes and threads that
// it can: its soft RLIMIT_NPROC, unless it runs as root of the host (whom
// the kernel does not hold to it), and the pids.max of its cgroup, when
// the cgroup has one and it can be read.
func readProcLimits() []procLimit {
	var ls []procLimit
	if l, ok := nprocLimit(); ok && !hostRoot() {
		ls = append(ls, l)
	}
	cgroup, _ := os.ReadFile("/proc/self/cgroup")
	if path, max, ok := pidsMax(cgroup, "/sys/fs/cgroup", os.ReadFile); ok {
		ls = append(ls, procLimit{
			what:  "the pids.max of hookbox's cgroup (" + path + "), which counts every process and thread in it,",
			max:   max,
			raise: "raise it (TasksMax= in the systemd unit, --pids-limit for a container, the pod's PID limit)",
		})
	}
	return ls
}

// nprocLimit reads this process's soft RLIMIT_NPROC; ok is false when
// it cannot be read or is unlimited.
func nprocLimit() (procLimit, bool) {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NPROC, &rl); err != nil || rl.Cur == unix.RLIM_INFINITY {
		return procLimit{}, false
	}
	return procLimit{
		what:  "RLIMIT_NPROC (ulimit -u), which counts every process and thread of the user hookbox runs as, hookbox's included,",
		max:   rl.Cur,
		raise: "raise it (LimitNPROC= in the systemd unit, ulimit -u, --ulimit nproc= for a container)",
	}, true
}

// hostRoot reports whether this process's real user is root of the
// host's user namespace, whose processes RLIMIT_NPROC does not bound.
func hostRoot() bool {
	if os.Getuid() != 0 {
		return false
	}
	m, err := os.ReadFile("/proc/self/uid_map")
	return err == nil && strings.Join(strings.Fields(string(m)), " ") == "0 0 4294967295"
}

// pidsMax finds, from the text of /proc/self/cgroup, the pids.max files
// of this process's cgroup under root (cgroup v2's unified hierarchy, or
// v1's pids controller) and of the cgroups above it, any of which bounds
// it, and returns the path and value of the lowest; ok is false when
// none can be read or all say "max".
func pidsMax(cgroup []byte, root string, read func(string) ([]byte, error)) (path string, limit uint64, ok bool) {
	sc := bufio.NewScanner(bytes.NewReader(cgroup))
	for sc.Scan() {
		// hierarchy-ID:controllers:path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		var top string
		switch {
		case parts[0] == "0" && parts[1] == "":
			top = root
		case hasController(parts[1], "pids"):
			top = filepath.Join(root, "pids")
		default:
			continue
		}
		for dir := filepath.Join(top, parts[2]); ; dir = filepath.Dir(dir) {
			p := filepath.Join(dir, "pids.max")
			if b, err := read(p); err == nil {
				// "max" does not parse: no limit at this level.
				if v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil && (!ok || v < limit) {
					path, limit, ok = p, v, true
				}
			}
			if len(dir) <= len(top) {
				break
			}
		}
	}
	return path, limit, ok
}

// hasController reports whether the comma-separated list has c.
func hasController(list, c string) bool {
	for _, x := range strings.Split(list, ",") {
		if x == c {
			return true
		}
	}
	return false
}
