// dashboard_shape: decode a Grafana dashboard JSON model strictly with the Grafana Foundation SDK's types
// (unknown fields, wrong types and missing required fields are errors), then run its validation.
// Used by tests/e2e/test_dashboard_shape.py; Grafana itself is AGPL and is not used.
package main

import (
	"fmt"
	"os"

	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

func main() {
	plugins.RegisterDefaultPlugins() // panel options and queries decode as their plugin's types
	raw, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var d dashboard.Dashboard
	if err := d.UnmarshalJSONStrict(raw); err != nil {
		fmt.Fprintln(os.Stderr, "strict decode:", err)
		os.Exit(1)
	}
	if err := d.Validate(); err != nil {
		fmt.Fprintln(os.Stderr, "validate:", err)
		os.Exit(1)
	}
	fmt.Printf("ok: %d panels\n", len(d.Panels))
}
