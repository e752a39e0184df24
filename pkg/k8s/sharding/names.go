package sharding

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// checkNames returns an error wrapping ErrInvalidConfig, naming the field, for each
// name the API server would refuse among those config produces: the Namespace (a
// DNS-1123 label), the ring's Name as the value of RingLabel (a label value), and
// every Lease name, each shard's "<Name>-shard-<i>" and this replica's
// "<Name>-member-<Identity>" (DNS-1123 subdomains). A Lease name the API server
// refuses is never written: its shard would stay without owner, or the member would
// never be seen, with WARN lines only. Empty fields are reported by check.
func (config Config) checkNames() []error {
	var errs []error
	bad := func(field, value string, reasons []string) {
		errs = append(errs, fmt.Errorf("%w: %s: %q is not valid: %s", ErrInvalidConfig, field, value, strings.Join(reasons, "; ")))
	}
	if config.Namespace != "" {
		if r := validation.IsDNS1123Label(config.Namespace); len(r) > 0 {
			bad("Namespace", config.Namespace, r)
		}
	}
	if config.Name == "" {
		return errs
	}
	if r := validation.IsValidLabelValue(config.Name); len(r) > 0 {
		bad("Name", config.Name, append(r, "the ring's name is the value of the label "+RingLabel))
		return errs
	}
	// The last shard's name is the longest; the others differ only in digits.
	if n := ShardLeaseName(config.Name, max(config.Shards, 1)-1); len(validation.IsDNS1123Subdomain(n)) > 0 {
		bad("Name", config.Name, append(validation.IsDNS1123Subdomain(n), "in the shard Lease name "+n))
	}
	if config.Identity != "" {
		if n := MemberLeaseName(config.Name, config.Identity); len(validation.IsDNS1123Subdomain(n)) > 0 {
			bad("Identity", config.Identity, append(validation.IsDNS1123Subdomain(n), "in the member Lease name "+n))
		}
	}
	return errs
}
