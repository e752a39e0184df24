//go:build !race

package leaderelection_test

const raceEnabled = false
