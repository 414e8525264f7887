// Package tritonpb holds the Go code generated from grpc_service.proto, the
// subset of Triton Inference Server's gRPC API (package inference) that the
// triton_grpc driver and the simulator speak. Run `make proto` after
// editing the .proto; the generated files are committed so that building
// and testing never need protoc.
package tritonpb
