//go:build !cgo

package events_test

func cgoKindValues[Tag any]() [][]kindValue { return nil }
