package main

import (
	"cmp"
	"flag"
	"fmt"
	"strings"
)

// aliasOf maps each old name of a `baton run` flag (deploy/ uses them) to the
// name kubebuilder and component-base use, which is the flag's name now.
var aliasOf = map[string]string{
	"metrics-addr":    "metrics-bind-address",
	"probe-addr":      "health-probe-bind-address",
	"lease-duration":  "leader-elect-lease-duration",
	"renew-deadline":  "leader-elect-renew-deadline",
	"retry-period":    "leader-elect-retry-period",
	"lease-name":      "leader-elect-resource-name",
	"lease-namespace": "leader-elect-resource-namespace",
}

// addAliases defines each old name in aliasOf on fs, sharing the value of the
// flag of its new name.
func addAliases(fs *flag.FlagSet) {
	for old, name := range aliasOf {
		if f := fs.Lookup(name); f != nil {
			fs.Var(f.Value, old, "the old name of --"+name)
		}
	}
}

// typedNames returns the flags set on fs by their canonical name (aliases
// resolved), each to the name the user typed.
func typedNames(fs *flag.FlagSet) map[string]string {
	typed := map[string]string{}
	if fs == nil {
		return typed
	}
	fs.Visit(func(f *flag.Flag) {
		name := f.Name
		if c := aliasOf[name]; c != "" && fs.Lookup(c) != nil { // the demo has no aliases
			name = c
		}
		typed[name] = f.Name
	})
	return typed
}

// flagNamer returns the function that names a flag, by its canonical name, as
// the user typed it ("--" and the alias used, or the canonical name).
func flagNamer(fs *flag.FlagSet) func(name string) string {
	typed := typedNames(fs)
	return func(name string) string { return "--" + cmp.Or(typed[name], name) }
}

// timingBlame returns the function that names the flag an election duration
// error of field (a k8sle.ConfigError's Field) is reported under: the flag of
// that field, or, for a relation between two durations of which the user set
// only the second (--renew-deadline above the default lease duration, a
// --retry-period too long for the default renew deadline), the flag the user
// set. names maps LeaseDuration, RenewDeadline and RetryPeriod to the flags'
// canonical names.
func timingBlame(fs *flag.FlagSet, names map[string]string) func(field string) string {
	typed := typedNames(fs)
	named := flagNamer(fs)
	set := func(field string) bool { return typed[names[field]] != "" }
	return func(field string) string {
		switch {
		case names[field] == "":
			return field
		case field == "LeaseDuration" && !set("LeaseDuration") && set("RenewDeadline"):
			field = "RenewDeadline"
		case field == "RenewDeadline" && !set("RenewDeadline") && set("RetryPeriod"):
			field = "RetryPeriod"
		}
		return named(names[field])
	}
}

// suggest returns " (did you mean --name?)" for the flag of fs nearest to
// the unknown one in err (flag's "flag provided but not defined: -x"), or "".
func suggest(fs *flag.FlagSet, err error) string {
	unknown, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: ")
	if !ok {
		return ""
	}
	unknown = strings.TrimLeft(unknown, "-")
	best, bestDist := "", len(unknown)/2+1 // at most about half the name changed
	fs.VisitAll(func(f *flag.Flag) {
		d := editDistance(unknown, f.Name)
		if strings.HasPrefix(f.Name, unknown) { // a name cut short
			d = min(d, 1)
		}
		if d < bestDist || (d == bestDist && best != "" && f.Name < best) {
			best, bestDist = f.Name, d
		}
	})
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean --%s?)", best)
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
