package shardbench

import (
	"fmt"
	"runtime"
	"time"
)

// cpuSample is the CPU time used up to a moment (readCPU).
type cpuSample struct {
	at                        time.Time
	self                      time.Duration            // this process: the replicas and the benchmark
	children                  map[string]time.Duration // kube-apiserver and etcd, by command name
	machineBusy, machineTotal time.Duration            // every core of the machine
	cores                     int
	ok                        bool
}

func numCPU() int { return runtime.NumCPU() }

// cpuUse is the CPU used between two samples, in cores (1.0 is one core busy).
type cpuUse struct {
	self, apiserver, etcd, machine float64
	cores                          int
	ok                             bool
}

func cpuBetween(a, b cpuSample) cpuUse {
	wall := b.at.Sub(a.at).Seconds()
	if !a.ok || !b.ok || wall <= 0 {
		return cpuUse{}
	}
	u := cpuUse{
		self:      (b.self - a.self).Seconds() / wall,
		apiserver: (b.children["kube-apiserver"] - a.children["kube-apiserver"]).Seconds() / wall,
		etcd:      (b.children["etcd"] - a.children["etcd"]).Seconds() / wall,
		cores:     b.cores,
		ok:        true,
	}
	if total := (b.machineTotal - a.machineTotal).Seconds(); total > 0 {
		u.machine = (b.machineBusy - a.machineBusy).Seconds() / total * float64(b.cores)
	}
	return u
}

func (u cpuUse) String() string {
	if !u.ok {
		return "cpu unknown"
	}
	return fmt.Sprintf("cpu (cores): replicas %.2f, kube-apiserver %.2f, etcd %.2f, machine %.2f of %d", u.self, u.apiserver, u.etcd, u.machine, u.cores)
}
