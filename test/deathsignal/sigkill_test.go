package deathsignal

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/baton-dev/baton/pkg/k8s/incarnation"
	"github.com/baton-dev/baton/pkg/k8s/leaderelection"
)

// Environment of a re-executed test binary that is the leader process.
const (
	childEnv      = "DEATHSIGNAL_CHILD_LEASE"
	kubeconfigEnv = "DEATHSIGNAL_CHILD_KUBECONFIG"
	termLogEnv    = "DEATHSIGNAL_CHILD_TERMINATION_LOG"
)

// childMain is the leader process: it learns its incarnation (incarnation.Learn from
// the pod environment, writing the termination message file), leads the lease, prints
// "leading" and runs until killed.
func childMain() int {
	inc, err := incarnation.Learn(incarnation.LearnOptions{TerminationLog: os.Getenv(termLogEnv)})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv(kubeconfigEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	el, err := leaderelection.New(leaderelection.Config{
		Identity: inc.PodName, LeaseName: os.Getenv(childEnv), LeaseNamespace: namespace,
		LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
		Incarnation: inc.String(),
	}, cs, leaderelection.Callbacks{OnStartedLeading: func(ctx context.Context) {
		fmt.Println("leading")
		<-ctx.Done()
	}}, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := el.Start(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// TestSIGKILLedLeaderReplacedAtOnce: the leader is another process; it is SIGKILLed,
// then the test, as the kubelet, copies its termination message file into its
// container's terminated state: the follower's term starts within 100ms of that write.
func TestSIGKILLedLeaderReplacedAtOnce(t *testing.T) {
	for i := range 3 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			cs := shared.Clientset()
			w, err := incarnation.NewWatcher(cs, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(w.Wait)
			lease := fmt.Sprintf("death-sigkill-%d", i)
			pa := createPod(t, cs, lease+"-a")
			pb := createPod(t, cs, lease+"-b")
			termLog := filepath.Join(t.TempDir(), "termination-log")
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), childEnv+"="+lease, kubeconfigEnv+"="+shared.Kubeconfig(t), termLogEnv+"="+termLog,
				"POD_NAMESPACE="+namespace, "POD_NAME="+pa.Name, "POD_UID="+string(pa.UID), "CONTAINER_NAME="+container)
			cmd.Stderr = os.Stderr
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			leading := make(chan struct{})
			go func() {
				sc := bufio.NewScanner(stdout)
				for sc.Scan() {
					if sc.Text() == "leading" {
						close(leading)
					}
				}
			}()
			select {
			case <-leading:
			case <-time.After(20 * time.Second):
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				t.Fatal("the leader process did not lead within 20s")
			}
			b := start(t, cs, w, lease, incarnation.Incarnation{PodNamespace: namespace, PodName: pb.Name, PodUID: string(pb.UID),
				Container: container, Nonce: nonce(t)}, short)
			time.Sleep(3 * retryPeriod)
			if err := cmd.Process.Kill(); err != nil { // SIGKILL
				t.Fatal(err)
			}
			_ = cmd.Wait()
			killed := time.Now()
			// The kubelet: the container exited; its termination message is the file.
			msg, err := os.ReadFile(termLog)
			if err != nil {
				t.Fatal(err)
			}
			written := time.Now()
			setContainer(t, cs, pa, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 137, Reason: "Error", Message: string(msg)}}, corev1.ContainerState{})
			started := waitTerm(t, b, 2*leaseDuration)
			t.Logf("SIGKILL at +0, status write at +%v, next term at +%v (%v after the write); termination message %q",
				written.Sub(killed).Round(time.Millisecond), started.Sub(killed).Round(time.Millisecond),
				started.Sub(written).Round(time.Millisecond), strings.TrimSpace(string(msg)))
			if d := started.Sub(written); d > 100*time.Millisecond {
				t.Fatalf("next term %v after the status write, want within 100ms", d)
			}
		})
	}
}
