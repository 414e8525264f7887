package simulator

import (
	"encoding/json"
	"net/http"
	"slices"
)

// ServedModel is one entry of the simulator's model list. A Parent makes
// it a LoRA adapter of that base model, listed as vLLM lists adapters
// loaded with --lora-modules or /v1/load_lora_adapter.
type ServedModel struct {
	Name   string
	Parent string
}

// Model-list faults (SetModelListFault): what /v1/models, /api/tags and
// /v2/repository/index answer instead of the list.
const (
	ModelListOK      = ""
	ModelListGarbage = "garbage" // 200 with a body that is not JSON
	ModelListEmpty   = "empty"   // 200 with an empty body
	ModelListError   = "error"   // 503
)

func (s *Server) initModels() {
	list := make([]ServedModel, len(s.cfg.ServedModelNames))
	for i, n := range s.cfg.ServedModelNames {
		list[i] = ServedModel{Name: n}
	}
	s.served.Store(&list)
	ok := ModelListOK
	s.listFault.Store(&ok)
}

// SetModels replaces the served models at run time, as loading or
// unloading a model or LoRA adapter does: the lists change at once, and
// requests for a model no longer listed are refused as unknown. The
// /metrics model_name label stays the configured first name.
func (s *Server) SetModels(models ...ServedModel) {
	list := slices.Clone(models)
	s.served.Store(&list)
}

// Models is the current model list.
func (s *Server) Models() []ServedModel { return slices.Clone(*s.served.Load()) }

// SetModelListFault makes the list endpoints answer with f (one of the
// ModelList* values) until it is set back to ModelListOK.
func (s *Server) SetModelListFault(f string) { s.listFault.Store(&f) }

func (s *Server) servedNames() []string {
	list := *s.served.Load()
	names := make([]string, len(list))
	for i, m := range list {
		names[i] = m.Name
	}
	return names
}

func (s *Server) servesModel(name string) bool {
	return slices.ContainsFunc(*s.served.Load(), func(m ServedModel) bool { return m.Name == name })
}

// modelListFault answers a list request with the configured fault, if
// any, and reports whether it did.
func (s *Server) modelListFault(w http.ResponseWriter) bool {
	switch *s.listFault.Load() {
	case ModelListGarbage:
		writeBody(w, http.StatusOK, "application/json", []byte("<html>upstream proxy says hello</html>"))
	case ModelListEmpty:
		writeBody(w, http.StatusOK, "application/json", nil)
	case ModelListError:
		writeBody(w, http.StatusServiceUnavailable, "application/json", []byte(`{"error":"model list unavailable"}`))
	default:
		return false
	}
	return true
}

// handleTritonIndex answers POST /v2/repository/index as Triton does:
// every model of the repository with its version and state.
func (s *Server) handleTritonIndex(w http.ResponseWriter, _ *http.Request) {
	if s.modelListFault(w) {
		return
	}
	type entry struct {
		Name    string `json:"name"`
		Version string `json:"version"`
		State   string `json:"state"`
	}
	out := []entry{}
	for _, n := range s.servedNames() {
		out = append(out, entry{Name: n, Version: tritonVersion, State: "READY"})
	}
	b, _ := json.Marshal(out)
	writeBody(w, http.StatusOK, "application/json", b)
}

// handleSetModels answers PUT /debug/models: {"models": [{"name",
// "parent"}], "fault": ""} replaces the model list and its fault, so a
// simulator running as its own process (make run, the e2e tests) can be
// driven as SetModels and SetModelListFault drive one in a test. Models
// absent leaves the list; fault absent leaves the fault.
func (s *Server) handleSetModels(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Models *[]struct {
			Name   string `json:"name"`
			Parent string `json:"parent"`
		} `json:"models"`
		Fault *string `json:"fault"`
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		http.Error(w, "want {\"models\": [{\"name\", \"parent\"}], \"fault\": \"\"|garbage|empty|error}: "+err.Error(), http.StatusBadRequest)
		return
	}
	if f := req.Fault; f != nil && !slices.Contains([]string{ModelListOK, ModelListGarbage, ModelListEmpty, ModelListError}, *f) {
		http.Error(w, "fault: want \"\", garbage, empty or error", http.StatusBadRequest)
		return
	}
	if req.Models != nil {
		list := make([]ServedModel, 0, len(*req.Models))
		for _, m := range *req.Models {
			if m.Name == "" {
				http.Error(w, "every model needs a name", http.StatusBadRequest)
				return
			}
			list = append(list, ServedModel(m))
		}
		s.SetModels(list...)
	}
	if req.Fault != nil {
		s.SetModelListFault(*req.Fault)
	}
	w.WriteHeader(http.StatusNoContent)
}
