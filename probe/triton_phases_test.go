package probe

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/connectivity"

	"github.com/llm-prober/llm-prober/simulator"
)

// killableListener remembers accepted connections so a test can drop
// them all, forcing the client to reconnect.
type killableListener struct {
	net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func (l *killableListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.conns = append(l.conns, c)
		l.mu.Unlock()
	}
	return c, err
}

func (l *killableListener) kill() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		_ = c.Close()
	}
	l.conns = nil
}

// startSimGRPC serves the simulator's Triton gRPC API on loopback, over
// TLS with cert when given, and returns its port.
func startSimGRPC(t *testing.T, cert *tls.Certificate) (port int, l *killableListener) {
	t.Helper()
	cfg := simulator.DefaultConfig()
	cfg.Latency = simulator.LatencyConfig{TTFTBase: 20 * time.Millisecond, DecodeBase: 2 * time.Millisecond}
	cfg.ShutdownTimeout = time.Second
	srv, err := simulator.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l = &killableListener{Listener: raw}
	var serve net.Listener = l
	if cert != nil {
		serve = tls.NewListener(l, &tls.Config{Certificates: []tls.Certificate{*cert}, NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS12})
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.ServeGRPC(ctx, serve) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ServeGRPC: %v", err)
		}
	})
	return raw.Addr().(*net.TCPAddr).Port, l
}

// selfSignedPEM returns a certificate for localhost and 127.0.0.1 and its
// PEM, to be trusted as its own CA.
func selfSignedPEM(t *testing.T) (tls.Certificate, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "llm-prober test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf},
		string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// checkPhaseSum: the phases are consecutive segments inside the probe, so
// together they fit in TTFT (and in end-to-end).
func checkPhaseSum(t *testing.T, name string, r *Result) {
	t.Helper()
	p := r.Phases
	sum := p.DNS + p.Connect + p.TLS + p.Write + p.FirstByte
	if sum > r.TTFT || sum > r.EndToEnd {
		t.Errorf("%s: phases sum %v > ttft %v or end-to-end %v (%+v)", name, sum, r.TTFT, r.EndToEnd, p)
	}
	for _, d := range []time.Duration{p.DNS, p.Connect, p.TLS, p.Write, p.FirstByte} {
		if d < 0 {
			t.Errorf("%s: negative phase in %+v", name, p)
		}
	}
}

type wantPhases struct{ dns, connect, tls, reused bool }

func checkPhases(t *testing.T, name string, r *Result, w wantPhases) {
	t.Helper()
	p := r.Phases
	t.Logf("%s: dns %v connect %v tls %v write %v first_byte %v reused %v | ttft %v", name,
		p.DNS, p.Connect, p.TLS, p.Write, p.FirstByte, p.ConnectionReused, r.TTFT)
	wantOutcome(t, r, OutcomeSuccess, "")
	if p.HasDNS != w.dns || p.HasConnect != w.connect || p.HasTLS != w.tls || p.ConnectionReused != w.reused {
		t.Errorf("%s: phases %+v, want dns %v connect %v tls %v reused %v", name, p, w.dns, w.connect, w.tls, w.reused)
	}
	if !p.HasWrite || !p.HasFirstByte || p.FirstByte <= 0 {
		t.Errorf("%s: write/first_byte missing: %+v", name, p)
	}
	if w.connect && p.Connect <= 0 || w.tls && p.TLS <= 0 {
		t.Errorf("%s: zero-length connect or tls: %+v", name, p)
	}
	checkPhaseSum(t, name, r)
}

// TestGRPCPhases: dns only for a name, connect (and tls when configured)
// only on a new connection, write and first_byte always; a pooled
// connection reports reuse and nothing of its setup.
func TestGRPCPhases(t *testing.T) {
	cert, caPEM := selfSignedPEM(t)
	for _, tc := range []struct {
		name string
		tls  bool
		host string
	}{
		{"plaintext/ip", false, "127.0.0.1"},
		{"plaintext/name", false, "localhost"},
		{"tls/ip", true, "127.0.0.1"},
		{"tls/name", true, "localhost"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c *tls.Certificate
			if tc.tls {
				c = &cert
			}
			port, _ := startSimGRPC(t, c)
			mod := func(perProbe bool) func(*TargetOptions) {
				return func(o *TargetOptions) {
					o.Address = net.JoinHostPort(tc.host, strconv.Itoa(port))
					o.Model = "sim-llm"
					o.NewConnectionPerProbe = perProbe
					if tc.tls {
						o.TLS.CA = caPEM
					}
				}
			}
			req := &Request{Prompt: "a few words of prompt", MaxTokens: 4, Stream: true, IgnoreEOS: true}
			dns := tc.host != "127.0.0.1"

			// New connection per probe: the first probe runs on the
			// connection the readiness check opened; later ones each dial.
			d, _ := newDriver(t, ProtocolTritonGRPC, "", mod(true))
			checkPhases(t, "per-probe #1", probeOnce(t, d, req, 10*time.Second), wantPhases{reused: true})
			for i := range 2 {
				r := probeOnce(t, d, req, 10*time.Second)
				checkPhases(t, "per-probe #"+strconv.Itoa(i+2), r, wantPhases{dns: dns, connect: true, tls: tc.tls})
			}
			// Pooled: reused from the second probe on too.
			d, _ = newDriver(t, ProtocolTritonGRPC, "", mod(false))
			for i := range 2 {
				r := probeOnce(t, d, req, 10*time.Second)
				checkPhases(t, "pooled #"+strconv.Itoa(i+1), r, wantPhases{reused: true})
			}
			// Non-streamed: first_byte holds the whole generation.
			r := probeOnce(t, d, &Request{Prompt: "x", MaxTokens: 4, IgnoreEOS: true}, 10*time.Second)
			wantOutcome(t, r, OutcomeSuccess, "")
			// The pooled channel's handshake gave the certificate's expiry.
			if want := cert.Leaf; tc.tls && (want == nil || !r.TLSCertExpiry.Equal(want.NotAfter)) {
				t.Errorf("TLS cert expiry %v, want the server certificate's", r.TLSCertExpiry)
			} else if !tc.tls && !r.TLSCertExpiry.IsZero() {
				t.Errorf("plaintext probe has a TLS cert expiry %v", r.TLSCertExpiry)
			}
			if !r.Phases.HasFirstByte || r.Phases.FirstByte < 20*time.Millisecond || r.Phases.FirstByte > r.EndToEnd {
				t.Errorf("unary first_byte %v, end-to-end %v", r.Phases.FirstByte, r.EndToEnd)
			}
		})
	}
}

// TestGRPCPhasesReconnect: after the server dropped the pooled connection
// the next probe dials again and reports that setup, the one after it
// reuses.
func TestGRPCPhasesReconnect(t *testing.T) {
	cert, caPEM := selfSignedPEM(t)
	port, l := startSimGRPC(t, &cert)
	d, _ := newDriver(t, ProtocolTritonGRPC, "", func(o *TargetOptions) {
		o.Address = net.JoinHostPort("localhost", strconv.Itoa(port))
		o.Model = "sim-llm"
		o.TLS.CA = caPEM
	})
	req := &Request{Prompt: "hello there", MaxTokens: 4, Stream: true, IgnoreEOS: true}
	checkPhases(t, "first", probeOnce(t, d, req, 10*time.Second), wantPhases{reused: true})
	l.kill()
	conn := d.(*tritonGRPCDriver).conn
	deadline := time.Now().Add(5 * time.Second)
	for conn.GetState() == connectivity.Ready && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	checkPhases(t, "after reconnect", probeOnce(t, d, req, 10*time.Second), wantPhases{dns: true, connect: true, tls: true})
	checkPhases(t, "reused", probeOnce(t, d, req, 10*time.Second), wantPhases{reused: true})
}

// TestGRPCPhasesOnFailure: a refused connection reports the DNS it did;
// a rejected certificate the DNS and TCP connect but no tls.
func TestGRPCPhasesOnFailure(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := raw.Addr().(*net.TCPAddr).Port
	raw.Close()
	d, _ := newDriver(t, ProtocolTritonGRPC, "", func(o *TargetOptions) {
		o.Address = net.JoinHostPort("localhost", strconv.Itoa(port))
		o.ConnectTimeout = time.Second
	})
	r := probeOnce(t, d, streamReq(), 5*time.Second)
	wantOutcome(t, r, OutcomeConnectError, "")
	if !r.Phases.HasDNS || r.Phases.HasConnect || r.Phases.HasWrite || r.Phases.HasFirstByte {
		t.Errorf("refused: phases %+v", r.Phases)
	}

	cert, _ := selfSignedPEM(t)
	_, otherCA := selfSignedPEM(t)
	port, _ = startSimGRPC(t, &cert)
	d, _ = newDriver(t, ProtocolTritonGRPC, "", func(o *TargetOptions) {
		o.Address = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		o.TLS.CA = otherCA
		o.ConnectTimeout = time.Second
	})
	r = probeOnce(t, d, streamReq(), 5*time.Second)
	wantOutcome(t, r, OutcomeConnectError, "")
	if r.Phases.HasDNS || !r.Phases.HasConnect || r.Phases.HasTLS || r.Phases.HasWrite {
		t.Errorf("bad certificate: phases %+v", r.Phases)
	}
}
