package testutil

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Listen opens a TCP listener on a free loopback port, closed when the test
// ends (closing it earlier, or handing it to a server that does, is fine).
func Listen(t testing.TB) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listening on a loopback port: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// FreeAddr returns a loopback host:port that was free a moment ago, for a
// child process to listen on. Where the listener can be handed over, use
// Listen.
//
// The port is drawn below the kernel's ephemeral range: a port that
// bind(":0") handed out and that is closed again goes back to the pool
// from which every other test process's listeners draw theirs, and one of
// them took it before the child could bind (another test's llm-prober
// answering for the Prometheus the test then queried). Ports below the range are handed out
// by nobody but callers of this function, so only two of them drawing the
// same port in the same moment can collide. Ports under 10000 are left
// alone: services and the project's own defaults (8300, 9090, 9847) live
// there.
func FreeAddr(t testing.TB) string {
	t.Helper()
	if lo := ephemeralLow(); lo > firstDrawnPort {
		for range 64 {
			port, err := rand.Int(rand.Reader, big.NewInt(int64(lo-firstDrawnPort)))
			if err != nil {
				break
			}
			addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(firstDrawnPort+int(port.Int64())))
			if l, err := net.Listen("tcp", addr); err == nil {
				_ = l.Close()
				return addr
			}
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("looking for a free loopback port: %v", err)
	}
	defer l.Close()
	return l.Addr().String()
}

// firstDrawnPort is the lowest port FreeAddr draws.
const firstDrawnPort = 10000

// ephemeralLow is the lowest port of the kernel's range for bind(":0")
// and outgoing connections (Linux's /proc/sys/net/ipv4/ip_local_port_range;
// its default where that cannot be read).
func ephemeralLow() int {
	const linuxDefault = 32768
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return linuxDefault
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return linuxDefault
	}
	lo, err := strconv.Atoi(f[0])
	if err != nil || lo < 1 {
		return linuxDefault
	}
	return lo
}

// HungServer is an HTTP server that answers no request until the test ends
// (or the request's context ends); arrived counts the requests it received.
// Its cleanups run after those registered later (t.Cleanup is last in,
// first out), so a daemon started after it stops first; then the held
// handlers are released and the server closed.
func HungServer(t testing.TB) (ts *httptest.Server, arrived *atomic.Int64) {
	t.Helper()
	arrived = new(atomic.Int64)
	release := make(chan struct{})
	ts = httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		arrived.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(ts.Close)
	t.Cleanup(func() { close(release) })
	return ts, arrived
}

// TLSCert is a self-signed certificate for 127.0.0.1 and localhost, valid
// for an hour either side of now.
type TLSCert struct {
	Cert    tls.Certificate
	CertPEM []byte         // the certificate, PEM-encoded
	KeyPEM  []byte         // its EC private key, PEM-encoded
	Pool    *x509.CertPool // trusts the certificate
}

// SelfSignedCert makes a TLSCert.
func SelfSignedCert(t testing.TB) TLSCert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("generating a TLS key: %v", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "llm-prober test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("creating a self-signed certificate: %v", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatalf("encoding the TLS key: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("parsing the self-signed certificate: %v", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return TLSCert{
		Cert:    tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert},
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		Pool:    pool,
	}
}
