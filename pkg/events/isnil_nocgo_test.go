//go:build !cgo

package events_test

func cgoKindValues() [][]kindValue { return nil }
