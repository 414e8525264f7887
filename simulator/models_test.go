package simulator

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

// TestSetModelsOverHTTP: PUT /debug/models changes the list every list
// endpoint serves and which models requests may use; bad bodies are
// refused and change nothing.
func TestSetModelsOverHTTP(t *testing.T) {
	s, err := New(DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	do := func(method, path, body string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader(body)))
		return rec
	}
	if rec := do("PUT", "/debug/models", `{"models":[{"name":"base"},{"name":"ad","parent":"base"}]}`); rec.Code != http.StatusNoContent {
		t.Fatalf("PUT: %d %s", rec.Code, rec.Body)
	}
	if got := s.Models(); !slices.Equal(got, []ServedModel{{Name: "base"}, {Name: "ad", Parent: "base"}}) {
		t.Errorf("models %v", got)
	}
	body := do("GET", "/v1/models", "").Body.String()
	if !strings.Contains(body, `"id":"ad"`) || !strings.Contains(body, `"parent":"base"`) || strings.Contains(body, "sim-llm") {
		t.Errorf("/v1/models: %s", body)
	}
	if idx := do("POST", "/v2/repository/index", `{"ready":true}`).Body.String(); idx != `[{"name":"base","version":"1","state":"READY"},{"name":"ad","version":"1","state":"READY"}]` {
		t.Errorf("index: %s", idx)
	}
	if rec := do("POST", "/v1/chat/completions", `{"model":"sim-llm","messages":[{"role":"user","content":"hi"}]}`); rec.Code != http.StatusNotFound {
		t.Errorf("a model no longer listed answered %d", rec.Code)
	}
	for _, bad := range []string{`{"models":[{"name":""}]}`, `{"fault":"weird"}`, `{"modelz":[]}`, `nope`} {
		if rec := do("PUT", "/debug/models", bad); rec.Code != http.StatusBadRequest {
			t.Errorf("%s: %d", bad, rec.Code)
		}
	}
	if rec := do("PUT", "/debug/models", `{"fault":"error"}`); rec.Code != http.StatusNoContent {
		t.Fatal(rec.Code)
	}
	if rec := do("GET", "/api/tags", ""); rec.Code != http.StatusServiceUnavailable || len(s.Models()) != 2 {
		t.Errorf("fault: %d, models %v", rec.Code, s.Models())
	}
}

// TestPooledDeterminism: vectors depend on the text only, have unit
// length, and rerank scores favour shared words.
func TestPooledDeterminism(t *testing.T) {
	a, b := Embedding("lighthouse"), Embedding("lighthouse")
	if !slices.Equal(a, b) || len(a) != DefaultEmbeddingDimension || slices.Equal(a, Embedding("harbour")) {
		t.Error("vectors are not a function of the text")
	}
	var norm float64
	for _, x := range a {
		norm += x * x
	}
	if norm < 0.999 || norm > 1.001 {
		t.Errorf("norm² %v", norm)
	}
	if RerankScore("a lighthouse keeper", "the lighthouse keeper") <= RerankScore("a lighthouse keeper", "rye bread") {
		t.Error("shared words do not score higher")
	}
}
