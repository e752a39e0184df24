package config

import (
	"fmt"
	"regexp"

	yaml3 "go.yaml.in/yaml/v3"
)

// plainDecimal is a number as the renderer writes it, and the only way a
// document may write one.
var plainDecimal = regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`)

// numberSpelling returns an error naming the first number field (maxConn,
// a backend's port) the document writes other than in plain decimal, or
// nil. The decoder reads
// YAML 1.1, where "0120" is octal (80), and it takes "+80", "0x50" and
// "8_0" as 80 too: a port written 0120 would silently be 80. c is the
// decoded document, for the value the decoder read.
func numberSpelling(raw []byte, c *Config) error {
	var doc yaml3.Node
	if yaml3.Unmarshal(raw, &doc) != nil || doc.Kind != yaml3.DocumentNode || len(doc.Content) != 1 {
		// The strict decoder accepted what this parser does not: the
		// spelling of numbers is then not this check's to judge.
		return nil
	}
	var first error
	check := func(field string, n *yaml3.Node, read int) {
		if n.Kind == yaml3.AliasNode && n.Alias != nil {
			n = n.Alias
		}
		if first != nil || n.Kind != yaml3.ScalarNode || n.Style != 0 || plainDecimal.MatchString(n.Value) {
			return
		}
		first = fmt.Errorf("%s: %s is not written in plain decimal, and YAML reads it as %d: write the number you mean in decimal",
			field, quote(n.Value), read)
	}
	for key, value := range pairs(doc.Content[0]) {
		switch key {
		case "maxConn":
			check("maxConn", value, c.MaxConn)
		case "backends":
			if value.Kind != yaml3.SequenceNode || len(value.Content) != len(c.Backends) {
				continue
			}
			for i, b := range value.Content {
				for k, v := range pairs(b) {
					if k == "port" {
						check(fmt.Sprintf("backends[%d].port", i), v, c.Backends[i].Port)
					}
				}
			}
		}
	}
	return first
}

// pairs yields the keys and values of a mapping node (nothing for another
// kind of node).
func pairs(n *yaml3.Node) func(yield func(string, *yaml3.Node) bool) {
	return func(yield func(string, *yaml3.Node) bool) {
		if n.Kind != yaml3.MappingNode {
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if !yield(n.Content[i].Value, n.Content[i+1]) {
				return
			}
		}
	}
}
