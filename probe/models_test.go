package probe_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llm-prober/llm-prober/probe"
	"github.com/llm-prober/llm-prober/simulator"
	"github.com/llm-prober/llm-prober/simulator/simtest"
)

func listModels(t *testing.T, api, url string) ([]string, error) {
	t.Helper()
	l, err := probe.NewModelLister(api, probe.TargetOptions{Name: "sim", URL: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return l.List(ctx)
}

// TestModelListsAgainstSimulator: each API lists the simulator's models,
// LoRA adapters included, follows changes at run time, and reports
// garbage, an empty body and an error status as errors, never as an
// empty list.
func TestModelListsAgainstSimulator(t *testing.T) {
	sim := simtest.Start(t, simulator.DefaultConfig())
	sim.Server.SetModels(simulator.ServedModel{Name: "base"}, simulator.ServedModel{Name: "sql-lora", Parent: "base"})
	for _, api := range probe.ModelsAPIs() {
		got, err := listModels(t, api, sim.URL)
		want := []string{"base", "sql-lora"}
		if api == probe.ModelsAPIOllama {
			want = []string{"base:latest", "sql-lora:latest"}
		}
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("%s: %v, %v; want %v", api, got, err, want)
		}
	}
	sim.Server.SetModels(simulator.ServedModel{Name: "other"})
	if got, err := listModels(t, probe.ModelsAPIOpenAI, sim.URL); err != nil || !slices.Equal(got, []string{"other"}) {
		t.Errorf("after the change: %v, %v", got, err)
	}
	for fault, want := range map[string]string{
		simulator.ModelListGarbage: "not JSON", simulator.ModelListEmpty: "no body", simulator.ModelListError: "HTTP 503",
	} {
		sim.Server.SetModelListFault(fault)
		for _, api := range probe.ModelsAPIs() {
			got, err := listModels(t, api, sim.URL)
			if err == nil || !strings.Contains(err.Error(), want) || got != nil {
				t.Errorf("%s with %s: %v, %v; want an error mentioning %q", api, fault, got, err, want)
			}
		}
	}
	sim.Server.SetModelListFault(simulator.ModelListOK)
	sim.Server.SetModels()
	if _, err := listModels(t, probe.ModelsAPITriton, sim.URL); err == nil || !strings.Contains(err.Error(), "no model") {
		t.Errorf("empty list: %v", err)
	}
}

func TestDefaultModelsAPI(t *testing.T) {
	for proto, want := range map[string]string{
		probe.ProtocolOpenAIChat: probe.ModelsAPIOpenAI, probe.ProtocolOllama: probe.ModelsAPIOllama,
		probe.ProtocolTritonGRPC: probe.ModelsAPITriton, probe.ProtocolTEIEmbed: probe.ModelsAPIOpenAI,
	} {
		if got := probe.DefaultModelsAPI(proto); got != want {
			t.Errorf("%s: %s, want %s", proto, got, want)
		}
	}
	if _, err := probe.NewModelLister("grpc", probe.TargetOptions{Name: "t", URL: "http://127.0.0.1:1"}, nil); err == nil {
		t.Error("unknown api accepted")
	}
}

// FuzzParseModelList: no list panics the parser; a parsed list is never
// empty and holds only usable, distinct names.
func FuzzParseModelList(f *testing.F) {
	for _, seed := range []string{
		`{"object":"list","data":[{"id":"a"},{"id":"b","parent":"a"}]}`,
		`{"data":[]}`, `{"data":null}`, `{"models":[{"name":"x:latest"},{"model":"y"}]}`,
		`[{"name":"m","version":"1","state":"READY"},{"name":"n","state":"UNAVAILABLE"}]`,
		`<html>`, ``, `null`, `[]`, `{"data":[{"id":"\u0000"},{"id":"ok"},{"id":"ok"}]}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		for _, api := range probe.ModelsAPIs() {
			names, err := probe.ParseModelList(api, []byte(body))
			if err != nil {
				if names != nil {
					t.Fatalf("%s: names %q with error %v", api, names, err)
				}
				continue
			}
			if len(names) == 0 {
				t.Fatalf("%s: empty list without an error", api)
			}
			seen := map[string]bool{}
			for _, n := range names {
				if n == "" || len(n) > probe.MaxModelNameBytes || seen[n] {
					t.Fatalf("%s: unusable or repeated name %q", api, n)
				}
				seen[n] = true
			}
		}
	})
}
