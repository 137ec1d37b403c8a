// Command await-eval runs the pulumi-kubernetes provider's own await code (the toolchain's module version) on
// one patch apply, so that tests can check what the provider returns as a patch's outputs without a cluster:
// metadata.ReadyCondition picks the condition from the patch's inputs and the API server's answer (skipAwait,
// then the live object's pulumi.com/waitFor), and internal.Awaiter runs it, as await.Creation and await.Update do
// (pkg/await/await.go 280-333 and 436-500), with a source that delivers the informer events the test gives.
//
// It is built inside pkg/await of a copy of the provider module (tools/build.sh), so that it may import
// pkg/await/internal.
//
// Input on stdin: {"inputs": {...}, "applied": {...}, "informer": [{...}, ...]}: the patch as registered, the
// object the apply returned, and the objects the informer delivers, in order (an informer cache shared by every
// await of the run can first deliver a Node from before this apply).
// Output on stdout: {"outputs": {...}, "custom": bool, "error": "..."}: what the provider keeps as outputs.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/await/internal"
	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/logging"
	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/metadata"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
)

type input struct {
	Inputs   map[string]any   `json:"inputs"`
	Applied  map[string]any   `json:"applied"`
	Informer []map[string]any `json:"informer"`
}

type result struct {
	Outputs map[string]any `json:"outputs"`
	Custom  bool           `json:"custom"`
	Error   string         `json:"error,omitempty"`
}

// source stands in for the provider's DynamicSource (pkg/await/condition/source.go): the given objects as Added
// events, then a closed channel (the awaiter then evaluates its condition one last time).
type source struct{ objects []map[string]any }

func (s source) Watch(context.Context, schema.GroupVersionKind) (<-chan watch.Event, error) {
	events := make(chan watch.Event, len(s.objects))
	for _, obj := range s.objects {
		events <- watch.Event{Type: watch.Added, Object: &unstructured.Unstructured{Object: obj}}
	}
	close(events)
	return events, nil
}

func (source) Stop() {}

func main() {
	var in input
	if err := json.NewDecoder(os.Stdin).Decode(&in); err != nil {
		fmt.Fprintln(os.Stderr, "await-eval: bad input:", err)
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	logger := logging.NewLogger(ctx, nil, "") // no host: messages go nowhere
	inputs := &unstructured.Unstructured{Object: in.Inputs}
	applied := &unstructured.Unstructured{Object: in.Applied}
	ready, custom, err := metadata.ReadyCondition(ctx, source{in.Informer}, nil, logger, inputs, applied)
	if err != nil {
		fmt.Fprintln(os.Stderr, "await-eval: ReadyCondition:", err)
		os.Exit(1)
	}
	awaiter, err := internal.NewAwaiter(internal.WithCondition(ready), internal.WithLogger(logger))
	if err != nil {
		fmt.Fprintln(os.Stderr, "await-eval: NewAwaiter:", err)
		os.Exit(1)
	}
	live, err := awaiter.Await(ctx)
	res := result{Custom: custom}
	if live != nil {
		res.Outputs = live.Object
	}
	if err != nil {
		res.Error = err.Error()
	}
	_ = json.NewEncoder(os.Stdout).Encode(res)
}
