package tritonpb

import (
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// The reference tables of Triton's grpc_service.proto (package inference).
// A regeneration from an edited .proto that renames or renumbers anything
// fails here instead of silently breaking compatibility with real servers.
var wantMessages = map[string]map[string]int32{
	"ServerLiveRequest":                    {},
	"ServerLiveResponse":                   {"live": 1},
	"ServerReadyRequest":                   {},
	"ServerReadyResponse":                  {"ready": 1},
	"ModelReadyRequest":                    {"name": 1, "version": 2},
	"ModelReadyResponse":                   {"ready": 1},
	"ServerMetadataRequest":                {},
	"ServerMetadataResponse":               {"name": 1, "version": 2, "extensions": 3},
	"ModelMetadataRequest":                 {"name": 1, "version": 2},
	"ModelMetadataResponse":                {"name": 1, "versions": 2, "platform": 3, "inputs": 4, "outputs": 5},
	"ModelMetadataResponse.TensorMetadata": {"name": 1, "datatype": 2, "shape": 3},
	"InferParameter":                       {"bool_param": 1, "int64_param": 2, "string_param": 3, "double_param": 4, "uint64_param": 5},
	"InferTensorContents": {"bool_contents": 1, "int_contents": 2, "int64_contents": 3, "uint_contents": 4,
		"uint64_contents": 5, "fp32_contents": 6, "fp64_contents": 7, "bytes_contents": 8},
	"ModelInferRequest": {"model_name": 1, "model_version": 2, "id": 3, "parameters": 4, "inputs": 5,
		"outputs": 6, "raw_input_contents": 7},
	"ModelInferRequest.InferInputTensor":           {"name": 1, "datatype": 2, "shape": 3, "parameters": 4, "contents": 5},
	"ModelInferRequest.InferRequestedOutputTensor": {"name": 1, "parameters": 2},
	"ModelInferResponse": {"model_name": 1, "model_version": 2, "id": 3, "parameters": 4, "outputs": 5,
		"raw_output_contents": 6},
	"ModelInferResponse.InferOutputTensor": {"name": 1, "datatype": 2, "shape": 3, "parameters": 4, "contents": 5},
	"ModelStreamInferResponse":             {"error_message": 1, "infer_response": 2},
}

func TestDescriptorsMatchReference(t *testing.T) {
	fd := File_grpc_service_proto
	if got := fd.Package(); got != "inference" {
		t.Fatalf("package = %q, want inference", got)
	}
	svc := fd.Services().ByName("GRPCInferenceService")
	if svc == nil {
		t.Fatal("no service GRPCInferenceService")
	}
	if got := string(svc.FullName()); got != "inference.GRPCInferenceService" {
		t.Errorf("service full name %q", got)
	}
	methods := []struct {
		name, in, out           string
		clientStream, srvStream bool
	}{
		{"ServerLive", "ServerLiveRequest", "ServerLiveResponse", false, false},
		{"ServerReady", "ServerReadyRequest", "ServerReadyResponse", false, false},
		{"ModelReady", "ModelReadyRequest", "ModelReadyResponse", false, false},
		{"ServerMetadata", "ServerMetadataRequest", "ServerMetadataResponse", false, false},
		{"ModelMetadata", "ModelMetadataRequest", "ModelMetadataResponse", false, false},
		{"ModelInfer", "ModelInferRequest", "ModelInferResponse", false, false},
		{"ModelStreamInfer", "ModelInferRequest", "ModelStreamInferResponse", true, true},
	}
	for _, m := range methods {
		md := svc.Methods().ByName(protoreflect.Name(m.name))
		if md == nil {
			t.Errorf("no method %s", m.name)
			continue
		}
		if string(md.Input().FullName()) != "inference."+m.in || string(md.Output().FullName()) != "inference."+m.out {
			t.Errorf("%s: %s -> %s, want %s -> %s", m.name, md.Input().FullName(), md.Output().FullName(), m.in, m.out)
		}
		if md.IsStreamingClient() != m.clientStream || md.IsStreamingServer() != m.srvStream {
			t.Errorf("%s: streaming client=%v server=%v", m.name, md.IsStreamingClient(), md.IsStreamingServer())
		}
	}
	// The generated client must call Triton's method paths.
	if GRPCInferenceService_ModelStreamInfer_FullMethodName != "/inference.GRPCInferenceService/ModelStreamInfer" ||
		GRPCInferenceService_ModelInfer_FullMethodName != "/inference.GRPCInferenceService/ModelInfer" {
		t.Error("generated method paths differ from Triton's")
	}

	seen := 0
	var walk func(protoreflect.MessageDescriptors, string)
	walk = func(msgs protoreflect.MessageDescriptors, prefix string) {
		for i := range msgs.Len() {
			md := msgs.Get(i)
			if md.IsMapEntry() {
				continue
			}
			name := prefix + string(md.Name())
			want, ok := wantMessages[name]
			if !ok {
				t.Errorf("message %s is not in the reference tables", name)
				continue
			}
			seen++
			fields := md.Fields()
			if fields.Len() != len(want) {
				t.Errorf("%s has %d fields, want %d", name, fields.Len(), len(want))
			}
			for fname, num := range want {
				f := fields.ByName(protoreflect.Name(fname))
				if f == nil {
					t.Errorf("%s: no field %s", name, fname)
				} else if int32(f.Number()) != num {
					t.Errorf("%s.%s = %d, want %d", name, fname, f.Number(), num)
				}
			}
			walk(md.Messages(), name+".")
		}
	}
	walk(fd.Messages(), "")
	if seen != len(wantMessages) {
		t.Errorf("checked %d messages, reference has %d", seen, len(wantMessages))
	}

	// Spot-check kinds the wire format depends on.
	req := fd.Messages().ByName("ModelInferRequest")
	if f := req.Fields().ByName("raw_input_contents"); f.Kind() != protoreflect.BytesKind || !f.IsList() {
		t.Error("raw_input_contents must be repeated bytes")
	}
	if f := req.Fields().ByName("parameters"); !f.IsMap() || f.MapValue().Message().FullName() != "inference.InferParameter" {
		t.Error("parameters must be map<string, InferParameter>")
	}
	p := fd.Messages().ByName("InferParameter")
	if o := p.Oneofs().ByName("parameter_choice"); o == nil || o.Fields().Len() != 5 {
		t.Error("InferParameter must have the oneof parameter_choice with 5 fields")
	}
}
