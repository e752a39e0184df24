package controllerruntime

import (
	"errors"
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// kubebuilderNames are the flag names of kubebuilder's scaffold and component-base's
// leader election, which BindFlags must define.
var kubebuilderNames = []string{
	"leader-elect", "leader-elect-lease-duration", "leader-elect-renew-deadline", "leader-elect-retry-period",
	"leader-elect-resource-name", "leader-elect-resource-namespace", "metrics-bind-address", "health-probe-bind-address",
}

// TestBindFlagsNames: BindFlags and BindPFlags define the kubebuilder and
// component-base names, and nothing else.
func TestBindFlagsNames(t *testing.T) {
	var std []string
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	new(Flags).BindFlags(fs)
	fs.VisitAll(func(f *flag.Flag) { std = append(std, f.Name) })
	var pf []string
	pfs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	new(Flags).BindPFlags(pfs)
	pfs.VisitAll(func(f *pflag.Flag) { pf = append(pf, f.Name) })
	want := slices.Sorted(slices.Values(kubebuilderNames))
	if !slices.Equal(std, want) || !slices.Equal(pf, want) {
		t.Errorf("flag: %v\npflag: %v\nwant %v", std, pf, want)
	}
}

// TestBindFlagsReusesTheScaffoldsFlags: on a flag set that already defines the
// scaffold's flags, BindFlags does not panic and reads their values; --leader-elect
// keeps the scaffold's manager options usable (LeaderElection false for the manager).
func TestBindFlagsReusesTheScaffoldsFlags(t *testing.T) {
	fs := flag.NewFlagSet("scaffold", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var enableLeaderElection bool
	var metricsAddr, probeAddr string
	fs.BoolVar(&enableLeaderElection, "leader-elect", false, "scaffold's")
	fs.StringVar(&metricsAddr, "metrics-bind-address", "0", "scaffold's")
	fs.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "scaffold's")
	var flags Flags
	flags.BindFlags(fs) // panics on a redefinition without the reuse
	err := fs.Parse([]string{"--leader-elect", "--metrics-bind-address=:8443", "--leader-elect-renew-deadline=5s",
		"--leader-elect-resource-name=guestbook", "--leader-elect-resource-namespace=system"})
	if err != nil {
		t.Fatal(err)
	}
	if !flags.LeaderElect() || !enableLeaderElection {
		t.Error("--leader-elect not read through the scaffold's flag")
	}
	mo := flags.ManagerOptions(manager.Options{LeaderElection: enableLeaderElection, LeaderElectionID: "guestbook"})
	if mo.LeaderElection || mo.Metrics.BindAddress != ":8443" || mo.HealthProbeBindAddress != ":8081" {
		t.Errorf("manager options %+v: want LeaderElection false, metrics :8443, probes :8081", mo)
	}
	lease := 20 * time.Second
	o, err := flags.Options(Options{LeaderElectionID: "from-code", LeaseDuration: &lease})
	if err != nil {
		t.Fatal(err)
	}
	if o.LeaderElectionID != "guestbook" || o.LeaderElectionNamespace != "system" || *o.RenewDeadline != 5*time.Second ||
		*o.LeaseDuration != lease || *o.RetryPeriod != 2*time.Second {
		t.Errorf("options %+v: want the flags' Lease and renew deadline, the code's lease duration", o)
	}
	if err := fs.Set("leader-elect-retry-period", "soon"); err != nil {
		t.Fatal(err)
	}
	if _, err := flags.Options(Options{}); !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), "--leader-elect-retry-period") {
		t.Errorf("bad duration: %v, want ErrInvalidOptions naming the flag", err)
	}
}

// TestBindPFlagsLeaderElectWithoutValue: with pflag, --leader-elect alone is true.
func TestBindPFlagsLeaderElectWithoutValue(t *testing.T) {
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	var flags Flags
	flags.BindPFlags(fs)
	if err := fs.Parse([]string{"--leader-elect", "--health-probe-bind-address=:9000"}); err != nil {
		t.Fatal(err)
	}
	if !flags.LeaderElect() || flags.ManagerOptions(manager.Options{}).HealthProbeBindAddress != ":9000" {
		t.Errorf("leader-elect %v, probes %q", flags.LeaderElect(), flags.ManagerOptions(manager.Options{}).HealthProbeBindAddress)
	}
}
