package bench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// cpuSample is the CPU time used so far by the run's processes and by the whole machine.
type cpuSample struct {
	at    time.Time
	procs map[string]float64 // seconds, by process name
	busy  float64            // seconds, every CPU, every process
}

// procCPU is a process's user + system time in seconds (0 when it is gone).
func procCPU(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseFloat(f[11], 64)
	k, _ := strconv.ParseFloat(f[12], 64)
	return (u + k) / 100 // USER_HZ
}

// machineBusy is the time every CPU spent not idle, in seconds.
func machineBusy() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	var busy float64
	for i, v := range f[1:] {
		n, _ := strconv.ParseFloat(v, 64)
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		busy += n
	}
	return busy / 100
}

// sampleCPU reads the control plane's processes, the benchmark's own and the services'.
func (e *Env) sampleCPU(services map[string]*Service) cpuSample {
	s := cpuSample{at: time.Now(), procs: map[string]float64{}, busy: machineBusy()}
	for _, p := range e.Cluster.Processes {
		s.procs[p.Name] = procCPU(p.PID)
	}
	s.procs["benchmark (driver, NATS)"] = procCPU(os.Getpid())
	for name, svc := range services {
		s.procs[name] = procCPU(svc.PID())
	}
	return s
}

// cpuUse is what each process used between two samples, in percent of one CPU, with
// "machine" (every process) and "other processes" (the machine minus the run's).
func cpuUse(a, b cpuSample) map[string]float64 {
	d := b.at.Sub(a.at).Seconds()
	out := map[string]float64{}
	var ours float64
	for k, v := range b.procs {
		u := v - a.procs[k]
		ours += u
		out[k] = 100 * u / d
	}
	out["machine"] = 100 * (b.busy - a.busy) / d
	out["other processes"] = max(0, 100*(b.busy-a.busy-ours)/d)
	return out
}
