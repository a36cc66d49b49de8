package bench

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of /proc's CPU times (USER_HZ, 100 on Linux).
const clockTick = 10 * time.Millisecond

// cpuSample is the CPU time spent so far by the whole machine (busy:
// user, nice, system, irq and softirq; not idle, iowait or steal) and by
// this process, read from /proc. ok is false where /proc is not Linux's.
type cpuSample struct {
	machine, process time.Duration
	ok               bool
}

// sampleCPU reads the machine's and this process's CPU time.
func sampleCPU() cpuSample {
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuSample{}
	}
	self, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return cpuSample{}
	}
	line, _, _ := bytes.Cut(stat, []byte{'\n'})
	f := strings.Fields(string(line))
	// cpu user nice system idle iowait irq softirq steal …
	if len(f) < 9 || f[0] != "cpu" {
		return cpuSample{}
	}
	var busy int64
	for _, i := range []int{1, 2, 3, 6, 7} {
		n, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return cpuSample{}
		}
		busy += n
	}
	// The command name (field 2) may hold spaces: count from the ')'.
	_, rest, found := bytes.Cut(self, []byte(") "))
	g := strings.Fields(string(rest))
	// rest starts at field 3 (state); utime and stime are fields 14 and 15.
	if !found || len(g) < 13 {
		return cpuSample{}
	}
	utime, err1 := strconv.ParseInt(g[11], 10, 64)
	stime, err2 := strconv.ParseInt(g[12], 10, 64)
	if err1 != nil || err2 != nil {
		return cpuSample{}
	}
	return cpuSample{machine: time.Duration(busy) * clockTick, process: time.Duration(utime+stime) * clockTick, ok: true}
}

// perOp divides the CPU spent from s to end over n operations.
func (s cpuSample) perOp(end cpuSample, n int) *CPUFigures {
	if !s.ok || !end.ok || n <= 0 {
		return nil
	}
	return &CPUFigures{
		Machine: (end.machine - s.machine) / time.Duration(n),
		Process: (end.process - s.process) / time.Duration(n),
	}
}

// CPUFigures is the CPU one request (or one drained event) cost, on
// average over a measurement: the whole machine's (hookbox, the load
// generator, PostgreSQL's server processes, the kernel) and this
// process's (hookbox and the load generator, which run in it). A rate
// moves with whatever else the machine runs; the CPU per request much
// less, and on a machine whose cores are the limit, rates compare as the
// inverse of these. The machine's figure comes from /proc/stat's
// counters, which some virtual machines sample coarsely (here they read
// up to a tenth below the precise per-process times): compare figures of
// one run and one machine.
type CPUFigures struct {
	Machine time.Duration `json:"machine_ns"`
	Process time.Duration `json:"process_ns"`
}
