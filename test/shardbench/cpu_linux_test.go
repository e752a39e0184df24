package shardbench

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of the CPU times in /proc (USER_HZ, 100 on Linux).
const clockTick = 10 * time.Millisecond

// readCPU returns the CPU time used so far by this process, by each of its child
// processes (kube-apiserver and etcd, by command name), and by the whole machine.
func readCPU() cpuSample {
	s := cpuSample{at: time.Now(), children: map[string]time.Duration{}, ok: true}
	self := os.Getpid()
	if t, _, ok := procTimes(filepath.Join("/proc", strconv.Itoa(self), "stat")); ok {
		s.self = t
	} else {
		s.ok = false
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		t, ppid, ok := procTimes(filepath.Join("/proc", e.Name(), "stat"))
		if !ok || ppid != self {
			continue
		}
		comm, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if err != nil {
			continue
		}
		s.children[strings.TrimSpace(string(comm))] += t
	}
	if stat, err := os.ReadFile("/proc/stat"); err == nil {
		line, _, _ := strings.Cut(string(stat), "\n")
		fields := strings.Fields(line)
		for i, f := range fields[1:] {
			v, err := strconv.ParseUint(f, 10, 64)
			if err != nil || i >= 8 { // user nice system idle iowait irq softirq steal
				continue
			}
			d := time.Duration(v) * clockTick
			s.machineTotal += d
			if i != 3 && i != 4 {
				s.machineBusy += d
			}
		}
	} else {
		s.ok = false
	}
	s.cores = numCPU()
	return s
}

// procTimes returns utime+stime and the parent's pid from a /proc/<pid>/stat file.
func procTimes(path string) (time.Duration, int, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, false
	}
	// The command name is in parentheses and may hold spaces: fields start after it.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, 0, false
	}
	ppid, err1 := strconv.Atoi(f[1])
	utime, err2 := strconv.ParseUint(f[11], 10, 64)
	stime, err3 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return 0, 0, false
	}
	return time.Duration(utime+stime) * clockTick, ppid, true
}
