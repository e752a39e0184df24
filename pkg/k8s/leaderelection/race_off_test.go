//go:build !race

package leaderelection

const raceEnabled = false
