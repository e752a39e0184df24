package main

import (
	"flag"
	"fmt"
	"io"
	"runtime/debug"
	"strings"
)

func versionMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: baton version\n\nPrints the module version and the VCS revision baton was built from.\n")
	}
	if code, done := parse(fs, args); done {
		return code
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		fmt.Fprintln(stderr, "baton version: no build information in this binary")
		return exitFailed
	}
	fmt.Fprintln(stdout, versionString(info))
	return exitOK
}

// versionString is "baton <module version> (<revision>[, modified], <commit
// time>) <go version>"; what the build did not record is left out.
// `go install ...@v1.2.3` records v1.2.3, a build in a checkout "(devel)"
// and the revision of the checkout.
func versionString(info *debug.BuildInfo) string {
	version := info.Main.Version
	if version == "" {
		version = "(unknown)"
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	var vcs []string
	if rev := settings["vcs.revision"]; rev != "" {
		vcs = append(vcs, rev)
		if settings["vcs.modified"] == "true" {
			vcs = append(vcs, "modified")
		}
		if t := settings["vcs.time"]; t != "" {
			vcs = append(vcs, t)
		}
	}
	s := "baton " + version
	switch {
	case len(vcs) > 0:
		s += " (" + strings.Join(vcs, ", ") + ")"
	case version == "(devel)":
		// A build in a checkout records the revision unless -buildvcs=false
		// (or a checkout go does not recognise) kept it out.
		s += " (no VCS revision recorded)"
	}
	if info.GoVersion != "" {
		s += " " + info.GoVersion
	}
	return s
}
