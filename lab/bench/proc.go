package bench

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/braid-vpn/braid/lab/stats"
)

// clockTicks is USER_HZ, the unit of the times in /proc/stat and
// /proc/PID/stat: 100 on every Linux architecture Go supports (the kernel
// fixes it for user space; only alpha and ia64 had another).
const clockTicks = 100

// ParseProcStat returns the busy time of /proc/stat's aggregate "cpu" line,
// user + nice + system + irq + softirq in seconds summed over all CPUs
// (guest and guest_nice are inside user and nice), and the number of
// per-CPU lines.
func ParseProcStat(data []byte) (busy float64, cpus int, _ error) {
	found := false
	for _, line := range strings.Split(string(data), "\n") {
		if name, _, _ := strings.Cut(line, " "); name == "cpu" {
			var t [7]uint64 // user nice system idle iowait irq softirq
			if _, err := fmt.Sscanf(line, "cpu %d %d %d %d %d %d %d", &t[0], &t[1], &t[2], &t[3], &t[4], &t[5], &t[6]); err != nil {
				return 0, 0, fmt.Errorf("/proc/stat: cpu line %q: %w", line, err)
			}
			busy, found = float64(t[0]+t[1]+t[2]+t[5]+t[6])/clockTicks, true
		} else if strings.HasPrefix(name, "cpu") {
			cpus++
		}
	}
	if !found {
		return 0, 0, fmt.Errorf("/proc/stat: no aggregate cpu line")
	}
	return busy, cpus, nil
}

// ReadSystemCPU parses /proc/stat.
func ReadSystemCPU() (busy float64, cpus int, _ error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	return ParseProcStat(data)
}

// ReadPidCPU returns process pid's CPU seconds (ParsePidStat of /proc/PID/stat).
func ReadPidCPU(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return ParsePidStat(data)
}

// ParsePidStat returns utime + stime of a /proc/PID/stat line in seconds:
// the CPU time of all the process's threads, user and kernel (docs/lab.md
// says which softirq work that holds). The command name may contain spaces
// and parentheses, so the fields are counted from the last ')'.
func ParsePidStat(data []byte) (float64, error) {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, fmt.Errorf("stat: no ')' after the command name")
	}
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	f := strings.Fields(string(data[i+1:]))
	if len(f) <= 15-3 {
		return 0, fmt.Errorf("stat: %d fields after the command name, want more than %d", len(f), 15-3)
	}
	var sum uint64
	for i, name := range []string{"utime", "stime"} {
		n, err := strconv.ParseUint(f[14-3+i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("stat: %s: %w", name, err)
		}
		sum += n
	}
	return float64(sum) / clockTicks, nil
}

// ParseVmHWM returns the peak resident set size in bytes from the text of
// /proc/PID/status.
func ParseVmHWM(data []byte) (float64, error) { return ParseStatusKB(data, "VmHWM") }

// ParseStatusKB returns the field name of the text of /proc/PID/status in
// bytes: a memory line ("VmRSS", "VmHWM"), which the kernel writes in kB
// meaning KiB.
func ParseStatusKB(data []byte, name string) (float64, error) {
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, name+":"); ok {
			var kib uint64
			if _, err := fmt.Sscanf(rest, "%d kB", &kib); err != nil {
				return 0, fmt.Errorf("status: %s line %q, want a number of kB: %w", name, line, err)
			}
			return float64(kib) * 1024, nil
		}
	}
	// Kernel threads and zombies have no memory lines.
	return 0, fmt.Errorf("status: no %s line", name)
}

// perProcess parses /proc/PID/file of process pid (0: none, giving NaN)
// for what, naming who in an error.
func perProcess(pid int, who, what, file string, parse func([]byte) (float64, error)) (Num, error) {
	if pid == 0 {
		return stats.NaN(), nil
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, file))
	var v float64
	if err == nil {
		v, err = parse(data)
	}
	if err != nil {
		return stats.NaN(), fmt.Errorf("%s of the %s: %w", what, who, err)
	}
	return Num(v), nil
}
