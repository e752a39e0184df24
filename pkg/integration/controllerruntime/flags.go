package controllerruntime

import (
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/pflag"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	k8sle "github.com/baton-dev/baton/pkg/k8s/leaderelection"
)

// Names of the flags BindFlags defines: those of kubebuilder's scaffold and of
// component-base's leader election.
const (
	FlagLeaderElect            = "leader-elect"
	FlagLeaseDuration          = "leader-elect-lease-duration"
	FlagRenewDeadline          = "leader-elect-renew-deadline"
	FlagRetryPeriod            = "leader-elect-retry-period"
	FlagResourceName           = "leader-elect-resource-name"
	FlagResourceNamespace      = "leader-elect-resource-namespace"
	FlagMetricsBindAddress     = "metrics-bind-address"
	FlagHealthProbeBindAddress = "health-probe-bind-address"
)

// flagSpec is one flag BindFlags defines.
type flagSpec struct {
	name, def, usage string
	boolean          bool
}

var flagSpecs = []flagSpec{
	{FlagLeaderElect, "false", "run Baton's leader election (a replica runs leader-only work only in a term of " +
		"the Lease); false, the scaffold's default for make run, runs it too: leader-only work needs a term", true},
	{FlagLeaseDuration, k8sle.DefaultLeaseDuration.String(), "how long a follower waits before taking a Lease not renewed", false},
	{FlagRenewDeadline, k8sle.DefaultRenewDeadline.String(), "how long the leader keeps trying to renew before its term ends", false},
	{FlagRetryPeriod, k8sle.DefaultRetryPeriod.String(), "the interval between tries to take or renew the Lease", false},
	{FlagResourceName, "", "name of the Lease (default: Options.LeaderElectionID)", false},
	{FlagResourceNamespace, "", "namespace of the Lease (default: Options.LeaderElectionNamespace, else the pod's)", false},
	{FlagMetricsBindAddress, "0", `address of the metrics endpoint, such as ":8080"; "0": off`, false},
	{FlagHealthProbeBindAddress, ":8081", "address of the /healthz and /readyz endpoints", false},
}

// Flags are the command-line flags of a controller on a Runtime, with the names of
// kubebuilder's scaffold and component-base. BindFlags (or BindPFlags) defines them;
// after the flag set is parsed, ManagerOptions and Options read them. A flag the set
// already defines (the scaffold's --leader-elect, --metrics-bind-address and
// --health-probe-bind-address) is not defined again: its value is read from it.
type Flags struct {
	lookup func(name string) (string, bool)
}

// flagValue is a flag's value of either flag package, kept as its text.
type flagValue struct {
	s       string
	boolean bool
}

func (v *flagValue) String() string     { return v.s }
func (v *flagValue) Set(s string) error { v.s = s; return nil }
func (v *flagValue) Type() string {
	if v.boolean {
		return "bool"
	}
	return "string"
}
func (v *flagValue) IsBoolFlag() bool { return v.boolean }

// BindFlags defines the flags on fs, but those fs already defines.
func (f *Flags) BindFlags(fs *flag.FlagSet) {
	for _, spec := range flagSpecs {
		if fs.Lookup(spec.name) == nil {
			fs.Var(&flagValue{s: spec.def, boolean: spec.boolean}, spec.name, spec.usage)
		}
	}
	f.lookup = func(name string) (string, bool) {
		fl := fs.Lookup(name)
		if fl == nil {
			return "", false
		}
		return fl.Value.String(), true
	}
}

// BindPFlags defines the flags on fs (github.com/spf13/pflag, as cobra commands
// use), but those fs already defines.
func (f *Flags) BindPFlags(fs *pflag.FlagSet) {
	for _, spec := range flagSpecs {
		if fs.Lookup(spec.name) == nil {
			fl := fs.VarPF(&flagValue{s: spec.def, boolean: spec.boolean}, spec.name, "", spec.usage)
			if spec.boolean {
				fl.NoOptDefVal = "true"
			}
		}
	}
	f.lookup = func(name string) (string, bool) {
		fl := fs.Lookup(name)
		if fl == nil {
			return "", false
		}
		return fl.Value.String(), true
	}
}

// value returns the text of flag name; "" before BindFlags.
func (f *Flags) value(name string) string {
	if f.lookup == nil {
		return ""
	}
	s, _ := f.lookup(name)
	return s
}

// LeaderElect reports --leader-elect's value.
func (f *Flags) LeaderElect() bool {
	b, _ := strconv.ParseBool(f.value(FlagLeaderElect))
	return b
}

// ManagerOptions returns o with the manager's side of the flags: the metrics and
// probe addresses, and LeaderElection false whatever o says, since Baton's Runtime
// is the election (--leader-elect means Baton's). Wrap the scaffold's options in it,
// ctrl.NewManager(cfg, flags.ManagerOptions(ctrl.Options{...})), and the scaffold's
// LeaderElection: enableLeaderElection line can stay.
func (f *Flags) ManagerOptions(o manager.Options) manager.Options {
	o.Metrics.BindAddress = f.value(FlagMetricsBindAddress)
	o.HealthProbeBindAddress = f.value(FlagHealthProbeBindAddress)
	o.LeaderElection = false
	return o
}

// Options returns o with the election's flags applied: the Lease's name and
// namespace when given, and the timings (a timing flag at its default keeps a value
// o sets). Errors wrap ErrInvalidOptions and name the
// flag.
func (f *Flags) Options(o Options) (Options, error) {
	if _, err := strconv.ParseBool(f.value(FlagLeaderElect)); err != nil {
		return o, fmt.Errorf("%w: --%s %q: %v", ErrInvalidOptions, FlagLeaderElect, f.value(FlagLeaderElect), err)
	}
	if name := f.value(FlagResourceName); name != "" {
		o.LeaderElectionID = name
	}
	if ns := f.value(FlagResourceNamespace); ns != "" {
		o.LeaderElectionNamespace = ns
	}
	for _, d := range []struct {
		flag, def string
		to        **time.Duration
	}{
		{FlagLeaseDuration, k8sle.DefaultLeaseDuration.String(), &o.LeaseDuration},
		{FlagRenewDeadline, k8sle.DefaultRenewDeadline.String(), &o.RenewDeadline},
		{FlagRetryPeriod, k8sle.DefaultRetryPeriod.String(), &o.RetryPeriod},
	} {
		if *d.to != nil && f.value(d.flag) == d.def {
			continue // a flag left at its default keeps the option set in code
		}
		v, err := time.ParseDuration(f.value(d.flag))
		if err != nil {
			return o, fmt.Errorf("%w: --%s %q: %v", ErrInvalidOptions, d.flag, f.value(d.flag), err)
		}
		*d.to = &v
	}
	return o, nil
}
