package testenv

import (
	"testing"

	"github.com/baton-dev/baton/pkg/batontest"
)

// Env is batontest.Env.
type Env = batontest.Env

// The versions, errors and binary lookup of batontest.
const (
	KubernetesVersion = batontest.KubernetesVersion
	EtcdVersion       = batontest.EtcdVersion
)

var (
	ErrNoBinaries = batontest.ErrNoBinaries
	ErrClosed     = batontest.ErrClosed
)

// Start is batontest.StartEnv.
func Start(t testing.TB) *Env {
	t.Helper()
	return batontest.StartEnv(t)
}

// New is batontest.NewEnv.
func New() (*Env, error) { return batontest.NewEnv() }

// AssetsDir is batontest.AssetsDir.
func AssetsDir() (string, error) { return batontest.AssetsDir() }
