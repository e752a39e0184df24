package batontest

import (
	"os"
	"path/filepath"
	"testing"
)

// TestAuditTo: BATON_TESTENV_AUDIT's flags name the log and a policy file that
// logs every request at the Metadata level once answered.
func TestAuditTo(t *testing.T) {
	dir := t.TempDir()
	flags := map[string]string{}
	if err := auditTo(func(flag, value string) { flags[flag] = value }, dir, "/some/audit.log"); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"audit-policy-file": filepath.Join(dir, "audit-policy.yaml"), "audit-log-path": "/some/audit.log",
		"audit-log-format": "json", "audit-log-mode": "blocking",
	}
	for flag, value := range want {
		if flags[flag] != value {
			t.Errorf("--%s=%q, want %q", flag, flags[flag], value)
		}
	}
	if len(flags) != len(want) {
		t.Errorf("flags %v, want exactly %v", flags, want)
	}
	policy, err := os.ReadFile(flags["audit-policy-file"])
	if err != nil || string(policy) != auditPolicy {
		t.Errorf("policy file holds %q (%v), want %q", policy, err, auditPolicy)
	}
	if err := auditTo(func(string, string) {}, filepath.Join(dir, "missing"), "x"); err == nil {
		t.Error("auditTo into a directory that does not exist: no error")
	}
}
