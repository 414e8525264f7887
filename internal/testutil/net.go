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
// child process to listen on. Another process could take it in between;
// where the listener can be handed over, use Listen.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("looking for a free loopback port: %v", err)
	}
	defer l.Close()
	return l.Addr().String()
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
