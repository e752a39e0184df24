// Package testenv is the name this repository's tests knew package batontest's API
// server by, before the kit was public: Start is batontest.StartEnv, New
// batontest.NewEnv, and Env is batontest.Env.
//
// Deprecated: use github.com/baton-dev/baton/pkg/batontest. This package remains only
// until the tests that import it move; it adds nothing.
package testenv
