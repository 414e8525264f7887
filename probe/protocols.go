package probe

import (
	"log/slog"
	"slices"
)

// Endpoint says how a protocol's target is reached, and so which of the
// config keys url and address it takes.
type Endpoint string

// Endpoint kinds.
const (
	// EndpointURL is an http(s) base URL (TargetOptions.URL, config url:).
	EndpointURL Endpoint = "url"
	// EndpointAddress is a gRPC host:port (TargetOptions.Address, config
	// address:).
	EndpointAddress Endpoint = "address"
)

// Transport names what the endpoint speaks, for messages: HTTP or gRPC.
func (e Endpoint) Transport() string {
	if e == EndpointAddress {
		return "gRPC"
	}
	return "HTTP"
}

// Protocol describes one protocol the prober speaks. Protocols() is the one
// list of them: NewDriver, config validation, the simulator test, the
// examples test and the docs test all read it, so a protocol added here is
// checked everywhere and one added anywhere else is not accepted.
type Protocol struct {
	// Name is the value of a target's protocol: key (a Protocol* constant).
	Name string
	// Server is who answers, for messages ("Triton's gRPC port").
	Server string
	// Endpoint is the kind of target address: url or address.
	Endpoint Endpoint
	// Streams reports whether the protocol can stream answers (and so
	// measure TTFT and ITL).
	Streams bool
	// DefaultPort is the server's usual port, for examples in messages.
	DefaultPort int
	// Outcomes are the outcome values the protocol's driver can produce.
	Outcomes []Outcome
	// Settings names the protocol's own part of TargetOptions, if any:
	// SettingsTriton (Triton), SettingsOllama (OllamaAPI),
	// SettingsEmbedding or SettingsRerank (Pooling). Config
	// accepts a target's triton: or ollama: block by it.
	Settings string
	// newDriver builds the driver from options with defaults applied.
	newDriver func(TargetOptions, *slog.Logger) (Driver, error)
}

// Protocol-specific settings (Protocol.Settings).
const (
	SettingsTriton = "triton"
	SettingsOllama = "ollama"
)

// httpOutcomes and grpcOutcomes are what HTTP and gRPC drivers can end
// with: only gRPC has grpc_error, only HTTP has status classes. Every
// driver can be cancelled by its caller.
var (
	httpOutcomes = []Outcome{OutcomeSuccess, OutcomeTimeout, OutcomeConnectError, OutcomeHTTP4xx, OutcomeHTTP5xx,
		OutcomeProtocolError, OutcomeStreamStalled, OutcomeIncomplete, OutcomeCancelled}
	grpcOutcomes = []Outcome{OutcomeSuccess, OutcomeTimeout, OutcomeConnectError, OutcomeGRPCError,
		OutcomeProtocolError, OutcomeStreamStalled, OutcomeIncomplete, OutcomeCancelled}
	// pooledOutcomes: embedding and rerank answers are checked, so they
	// can be wrong as well as broken.
	pooledOutcomes = []Outcome{OutcomeSuccess, OutcomeTimeout, OutcomeConnectError, OutcomeHTTP4xx, OutcomeHTTP5xx,
		OutcomeProtocolError, OutcomeStreamStalled, OutcomeIncomplete, OutcomeWrongAnswer, OutcomeCancelled}
)

// protocols is the table, in the order messages and docs list protocols.
var protocols = []Protocol{
	{Name: ProtocolOpenAIChat, Server: "the OpenAI-compatible server", Endpoint: EndpointURL, Streams: true, DefaultPort: 8000,
		Outcomes: httpOutcomes, newDriver: newOpenAIChatDriver},
	{Name: ProtocolOpenAICompletions, Server: "the OpenAI-compatible server", Endpoint: EndpointURL, Streams: true, DefaultPort: 8000,
		Outcomes: httpOutcomes, newDriver: newOpenAICompletionsDriver},
	{Name: ProtocolOpenAIResponses, Server: "the OpenAI Responses API server", Endpoint: EndpointURL, Streams: true, DefaultPort: 8000,
		Outcomes: httpOutcomes, newDriver: newOpenAIResponsesDriver},
	{Name: ProtocolTGI, Server: "TGI", Endpoint: EndpointURL, Streams: true, DefaultPort: 8080,
		Outcomes: httpOutcomes, newDriver: newTGIDriver},
	{Name: ProtocolOllama, Server: "Ollama", Endpoint: EndpointURL, Streams: true, DefaultPort: 11434,
		Outcomes: httpOutcomes, Settings: SettingsOllama, newDriver: newOllamaDriver},
	{Name: ProtocolTritonGenerate, Server: "Triton", Endpoint: EndpointURL, Streams: true, DefaultPort: 8000,
		Outcomes: httpOutcomes, Settings: SettingsTriton, newDriver: newTritonGenerateDriver},
	{Name: ProtocolTritonGRPC, Server: "Triton", Endpoint: EndpointAddress, Streams: true, DefaultPort: 8001,
		Outcomes: grpcOutcomes, Settings: SettingsTriton, newDriver: newTritonGRPCDriver},
	{Name: ProtocolOpenAIEmbeddings, Server: "the OpenAI-compatible server", Endpoint: EndpointURL, DefaultPort: 8000,
		Outcomes: pooledOutcomes, Settings: SettingsEmbedding, newDriver: newPooledDriver(openAIEmbeddingsKind)},
	{Name: ProtocolOllamaEmbed, Server: "Ollama", Endpoint: EndpointURL, DefaultPort: 11434,
		Outcomes: pooledOutcomes, Settings: SettingsEmbedding, newDriver: newPooledDriver(ollamaEmbedKind)},
	{Name: ProtocolTEIEmbed, Server: "text-embeddings-inference", Endpoint: EndpointURL, DefaultPort: 8080,
		Outcomes: pooledOutcomes, Settings: SettingsEmbedding, newDriver: newPooledDriver(teiEmbedKind)},
	{Name: ProtocolOpenAIRerank, Server: "the rerank server (vLLM, llama.cpp)", Endpoint: EndpointURL, DefaultPort: 8000,
		Outcomes: pooledOutcomes, Settings: SettingsRerank, newDriver: newPooledDriver(openAIRerankKind)},
	{Name: ProtocolTEIRerank, Server: "text-embeddings-inference", Endpoint: EndpointURL, DefaultPort: 8080,
		Outcomes: pooledOutcomes, Settings: SettingsRerank, newDriver: newPooledDriver(teiRerankKind)},
}

// Protocols returns the protocol table (a copy), in table order.
func Protocols() []Protocol {
	out := slices.Clone(protocols)
	for i := range out {
		out[i].Outcomes = slices.Clone(out[i].Outcomes)
	}
	return out
}

// LookupProtocol returns the table row of name.
func LookupProtocol(name string) (Protocol, bool) {
	p := lookupProtocol(name)
	if p == nil {
		return Protocol{}, false
	}
	out := *p
	out.Outcomes = slices.Clone(p.Outcomes)
	return out, true
}

func lookupProtocol(name string) *Protocol {
	for i := range protocols {
		if protocols[i].Name == name {
			return &protocols[i]
		}
	}
	return nil
}

// SupportedProtocols lists the protocols NewDriver can build, for config
// validation and help texts.
func SupportedProtocols() []string {
	names := make([]string, len(protocols))
	for i, p := range protocols {
		names[i] = p.Name
	}
	return names
}

func newOpenAIChatDriver(opts TargetOptions, logger *slog.Logger) (Driver, error) {
	return newOpenAIDriver(opts, logger, true)
}

func newOpenAICompletionsDriver(opts TargetOptions, logger *slog.Logger) (Driver, error) {
	return newOpenAIDriver(opts, logger, false)
}

func newOpenAIDriver(opts TargetOptions, logger *slog.Logger, chat bool) (Driver, error) {
	t, err := newHTTPTarget(opts, logger)
	if err != nil {
		return nil, err
	}
	endpoint := "/completions"
	if chat {
		endpoint = "/chat/completions"
	}
	return &openAIDriver{t: t, chat: chat, url: endpointURL(t.base, endpoint), bodies: new(encoderKey)}, nil
}
