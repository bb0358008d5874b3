package fleet

import (
	"os"

	"github.com/braid-vpn/braid/lab/bench"
)

// cpuSnapshot is the CPU seconds used so far by the machine, the client
// daemons, the server daemons and the lab process (its HTTP clients).
type cpuSnapshot struct {
	machine, clients, servers, lab float64
}

// processCPU is a process's CPU seconds; 0 for one that is gone (a killed
// server: its time is then missing from the figure, which says so).
func processCPU(pid int) float64 {
	v, err := bench.ReadPidCPU(pid)
	if err != nil {
		return 0
	}
	return v
}

func (l *lab) cpu() (s cpuSnapshot, cpus int, err error) {
	if s.machine, cpus, err = bench.ReadSystemCPU(); err != nil {
		return s, 0, err
	}
	for _, c := range l.clients {
		s.clients += processCPU(c.current().PID())
	}
	for _, d := range l.servers {
		if c := d.current(); !c.Exited() {
			s.servers += processCPU(c.PID())
		}
	}
	s.lab = processCPU(os.Getpid())
	return s, cpus, nil
}

// CPU is the cores busy on average over the window: the whole machine
// (every process, including other users'), the client daemons, the server
// daemons (a server killed in the window is left out) and the lab process
// with its HTTP clients. A machine near its CPU count means the figures
// measure the CPU, not the tunnel.
type CPU struct {
	CPUs    int     `json:"cpus"`
	Machine float64 `json:"machine_cores"`
	Clients float64 `json:"client_daemons_cores"`
	Servers float64 `json:"server_daemons_cores"`
	Lab     float64 `json:"lab_cores"`
}

func cpuOver(a, b cpuSnapshot, cpus int, seconds float64) *CPU {
	return &CPU{CPUs: cpus, Machine: (b.machine - a.machine) / seconds, Clients: (b.clients - a.clients) / seconds,
		Servers: max(b.servers-a.servers, 0) / seconds, Lab: (b.lab - a.lab) / seconds}
}
