// dashboard_shape: decode a Grafana dashboard JSON model strictly with the Grafana Foundation SDK's types
// (unknown fields, wrong types and missing required fields are errors), then run its validation.
// Used by tests/e2e/test_dashboard_shape.py; Grafana itself is AGPL and is not used.
package main

import (
	"fmt"
	"os"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
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
	if err := d.UnmarshalJSONStrict(raw); failed(err) {
		fmt.Fprintln(os.Stderr, "strict decode:", err)
		os.Exit(1)
	}
	if err := d.Validate(); failed(err) {
		fmt.Fprintln(os.Stderr, "validate:", err)
		os.Exit(1)
	}
	fmt.Printf("ok: %d panels\n", len(d.Panels))
}

// failed: the SDK returns its error list as a cog.BuildErrors, nil or empty when nothing is wrong (a typed
// nil inside the error interface, so err != nil is not the test).
func failed(err error) bool {
	if errs, ok := err.(cog.BuildErrors); ok {
		return len(errs) > 0
	}
	return err != nil
}
