// Package certs writes a throw-away CA and the server and client
// certificates it signs, for tests of mutual TLS.
package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Files are PEM files for a test CA, a server (localhost) and a client.
type Files struct{ CA, ServerCert, ServerKey, ClientCert, ClientKey string }

// Write writes a fresh CA and certificates signed by it.
func Write(t testing.TB, dir string) Files {
	t.Helper()
	caKey := must[*ecdsa.PrivateKey](t)(ecdsa.GenerateKey(elliptic.P256(), rand.Reader))
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca := must[*x509.Certificate](t)(x509.ParseCertificate(caDER))
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	leaf := func(serial int64, usage x509.ExtKeyUsage, dns []string) ([]byte, []byte) {
		key := must[*ecdsa.PrivateKey](t)(ecdsa.GenerateKey(elliptic.P256(), rand.Reader))
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "test"}, DNSNames: dns,
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{usage}, KeyUsage: x509.KeyUsageDigitalSignature}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kd := must[[]byte](t)(x509.MarshalECPrivateKey(key))
		return der, kd
	}
	sc, sk := leaf(2, x509.ExtKeyUsageServerAuth, []string{"localhost"})
	cc, ck := leaf(3, x509.ExtKeyUsageClientAuth, nil)
	return Files{
		CA:         write("ca.crt", "CERTIFICATE", caDER),
		ServerCert: write("server.crt", "CERTIFICATE", sc), ServerKey: write("server.key", "EC PRIVATE KEY", sk),
		ClientCert: write("client.crt", "CERTIFICATE", cc), ClientKey: write("client.key", "EC PRIVATE KEY", ck),
	}
}

// ServerTLS is the server side of mutual TLS over files: the server's
// certificate, and every client must present one the CA signed.
func ServerTLS(t testing.TB, files Files) *tls.Config {
	t.Helper()
	pair := must[tls.Certificate](t)(tls.LoadX509KeyPair(files.ServerCert, files.ServerKey))
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(must[[]byte](t)(os.ReadFile(files.CA))) {
		t.Fatalf("%s: no PEM certificate", files.CA)
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
}

// must fails the test on err and returns v.
func must[T any](t testing.TB) func(v T, err error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}
