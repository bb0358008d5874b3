package bench

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"unsafe"
)

// DefaultClockTicks is USER_HZ on every Linux architecture Go supports; it
// is only used when /proc/self/auxv cannot be read.
const DefaultClockTicks = 100

// atClkTck is the auxiliary vector entry holding USER_HZ, the unit of the
// times in /proc/stat and /proc/PID/stat.
const atClkTck = 17

// SystemCPU is the machine-wide CPU time from /proc/stat, in seconds summed
// over all CPUs.
type SystemCPU struct {
	// Busy is user + nice + system + irq + softirq: every kind of work,
	// including the kernel's softirq packet processing that no process is
	// charged for. guest and guest_nice are already inside user and nice.
	Busy float64
	// Idle is idle + iowait. Steal (time a hypervisor gave to someone else)
	// is in neither: it is not work done here, nor time this machine had.
	Idle float64
	// CPUs is the number of per-CPU lines.
	CPUs int
}

// ParseProcStat reads the aggregate "cpu" line of /proc/stat; tck is
// USER_HZ (ticks per second).
func ParseProcStat(data []byte, tck float64) (SystemCPU, error) {
	var out SystemCPU
	found := false
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], "cpu") {
			continue
		}
		if f[0] != "cpu" {
			out.CPUs++
			continue
		}
		if len(f) < 8 {
			return out, fmt.Errorf("/proc/stat: cpu line has %d fields, want at least 8", len(f)-1)
		}
		var v [7]uint64
		for i := range v {
			n, err := strconv.ParseUint(f[i+1], 10, 64)
			if err != nil {
				return out, fmt.Errorf("/proc/stat: cpu field %d: %w", i+1, err)
			}
			v[i] = n
		}
		user, nice, system, idle, iowait, irq, softirq := v[0], v[1], v[2], v[3], v[4], v[5], v[6]
		out.Busy = float64(user+nice+system+irq+softirq) / tck
		out.Idle = float64(idle+iowait) / tck
		found = true
	}
	if !found {
		return out, fmt.Errorf("/proc/stat: no aggregate cpu line")
	}
	return out, nil
}

// ReadSystemCPU snapshots /proc/stat.
func ReadSystemCPU() (SystemCPU, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return SystemCPU{}, err
	}
	return ParseProcStat(data, ClockTicks())
}

// ParsePidStat returns utime + stime of a /proc/PID/stat line in seconds:
// the CPU time of every thread of the process, user and kernel. The kernel
// scales the two so that they add up to the threads' scheduler run time,
// which on kernels without CONFIG_IRQ_TIME_ACCOUNTING includes softirq work
// that ran while the process was on the CPU (with veth, much of the
// receiver's stack runs on the sender's time); softirq work in ksoftirqd
// is never in it. The command name may contain spaces and parentheses, so
// the fields are counted from the last ')'.
func ParsePidStat(data []byte, tck float64) (float64, error) {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, fmt.Errorf("stat: no ')' after the command name")
	}
	f := strings.Fields(string(data[i+1:]))
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	const utime, stime = 14 - 3, 15 - 3
	if len(f) <= stime {
		return 0, fmt.Errorf("stat: %d fields after the command name, want more than %d", len(f), stime)
	}
	u, err := strconv.ParseUint(f[utime], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("stat: utime: %w", err)
	}
	s, err := strconv.ParseUint(f[stime], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("stat: stime: %w", err)
	}
	return float64(u+s) / tck, nil
}

// readProc reads /proc/PID/name (0 = this process).
func readProc(pid int, name string) ([]byte, error) {
	dir := "self"
	if pid != 0 {
		dir = strconv.Itoa(pid)
	}
	return os.ReadFile("/proc/" + dir + "/" + name)
}

// ProcessCPU returns the CPU seconds process pid has used so far (0 = this
// process).
func ProcessCPU(pid int) (float64, error) {
	data, err := readProc(pid, "stat")
	if err != nil {
		return 0, err
	}
	return ParsePidStat(data, ClockTicks())
}

// ParseVmHWM returns the peak resident set size in bytes from the text of
// /proc/PID/status: its "VmHWM:" line, which the kernel writes in kB
// meaning KiB.
func ParseVmHWM(data []byte) (float64, error) {
	for _, line := range strings.Split(string(data), "\n") {
		rest, ok := strings.CutPrefix(line, "VmHWM:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("status: VmHWM line %q, want a number of kB", line)
		}
		kib, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("status: VmHWM: %w", err)
		}
		return float64(kib) * 1024, nil
	}
	// Kernel threads and zombies have no memory lines.
	return 0, fmt.Errorf("status: no VmHWM line")
}

// ProcessPeakRSS returns the largest resident set size process pid has had
// so far, in bytes (0 = this process). It is gone once the process exits,
// so read it before stopping the process.
func ProcessPeakRSS(pid int) (float64, error) {
	data, err := readProc(pid, "status")
	if err != nil {
		return 0, err
	}
	return ParseVmHWM(data)
}

var clockTicks = sync.OnceValue(func() float64 {
	data, err := os.ReadFile("/proc/self/auxv")
	if err != nil {
		return DefaultClockTicks
	}
	if v, ok := ParseAuxvClockTicks(data, int(unsafe.Sizeof(uintptr(0))), binary.NativeEndian); ok {
		return float64(v)
	}
	return DefaultClockTicks
})

// ClockTicks is USER_HZ: what sysconf(_SC_CLK_TCK) returns, read from the
// auxiliary vector the kernel gave this process.
func ClockTicks() float64 { return clockTicks() }

// ParseAuxvClockTicks finds AT_CLKTCK in an auxiliary vector of (key,
// value) words of wordSize bytes.
func ParseAuxvClockTicks(b []byte, wordSize int, order binary.ByteOrder) (uint64, bool) {
	word := func(p []byte) uint64 {
		if wordSize == 4 {
			return uint64(order.Uint32(p))
		}
		return order.Uint64(p)
	}
	for len(b) >= 2*wordSize {
		k, v := word(b), word(b[wordSize:])
		b = b[2*wordSize:]
		switch k {
		case 0: // AT_NULL ends the vector
			return 0, false
		case atClkTck:
			return v, v > 0
		}
	}
	return 0, false
}
