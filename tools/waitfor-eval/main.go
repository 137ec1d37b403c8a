// Command waitfor-eval evaluates a `pulumi.com/waitFor` expression exactly as the pulumi-kubernetes provider in
// the toolchain does (its own pkg/jsonpath: the "=" split, the first {...}, theory/jsonpath's RFC 9535
// parser, and "the first result wins"), so that tests can check gpupool's rollout waits without a cluster.
//
// Input on stdin: {"expr": "jsonpath={...}=value", "objects": [{...}, ...]}.
// Output on stdout: one JSON line per object: {"matched": bool, "found": "...", "message": "...", "error": "..."}.
// A parse error of the expression is printed as {"parseError": "..."} and exits 1.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/jsonpath"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

type input struct {
	Expr    string           `json:"expr"`
	Objects []map[string]any `json:"objects"`
}

type result struct {
	Matched bool   `json:"matched"`
	Found   string `json:"found,omitempty"`
	Message string `json:"message,omitempty"`
	Error   string `json:"error,omitempty"`
}

func main() {
	var in input
	if err := json.NewDecoder(os.Stdin).Decode(&in); err != nil {
		fmt.Fprintln(os.Stderr, "waitfor-eval: bad input:", err)
		os.Exit(2)
	}
	out := json.NewEncoder(os.Stdout)
	parsed, err := jsonpath.Parse(in.Expr)
	if err != nil {
		_ = out.Encode(map[string]string{"parseError": err.Error()})
		os.Exit(1)
	}
	for _, obj := range in.Objects {
		r, err := parsed.Matches(&unstructured.Unstructured{Object: obj})
		res := result{Matched: r.Matched, Found: r.Found, Message: r.Message}
		if err != nil {
			res.Error = err.Error()
		}
		_ = out.Encode(res)
	}
}
