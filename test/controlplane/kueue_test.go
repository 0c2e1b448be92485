package controlplane

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"testing"
	"time"
)

// The certificates StartKueueManager writes must pass the checks of
// Kueue's rotator (cert-controller's ValidCert, 90 days ahead), or it
// replaces them with its own, valid for the Service name only, which the
// API server, calling 127.0.0.1, would refuse.
func TestKueueCertsPassTheRotatorsCheck(t *testing.T) {
	c, err := newKueueCerts()
	if err != nil {
		t.Fatal(err)
	}
	parse := func(what string, data []byte) *x509.Certificate {
		b, _ := pem.Decode(data)
		if b == nil {
			t.Fatalf("%s: no PEM", what)
		}
		cert, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return cert
	}
	ca, leaf := parse("CA", c.ca), parse("serving", c.cert)
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	at := time.Now().Add(90 * 24 * time.Hour)
	if _, err := ca.Verify(x509.VerifyOptions{DNSName: "kueue-ca", Roots: roots, CurrentTime: at}); err != nil {
		t.Errorf("the CA as the rotator checks it: %v", err)
	}
	for _, name := range []string{kueueServiceDNS, "127.0.0.1"} {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: roots, CurrentTime: at}); err != nil {
			t.Errorf("the serving certificate for %s: %v", name, err)
		}
	}
	if b, _ := pem.Decode(c.caKey); b == nil || b.Type != "RSA PRIVATE KEY" {
		t.Error("the CA key is not PKCS#1, which the rotator parses")
	} else if _, err := x509.ParsePKCS1PrivateKey(b.Bytes); err != nil {
		t.Errorf("the CA key: %v", err)
	}
	if _, err := tls.X509KeyPair(c.cert, c.key); err != nil {
		t.Errorf("the serving pair: %v", err)
	}
}
