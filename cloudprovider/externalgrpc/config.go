package externalgrpc

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// DefaultTimeout bounds each call when the config sets no grpc_timeout
// (upstream's default).
const DefaultTimeout = 5 * time.Second

// Config is the --cloud-config file, in upstream's format: the same file
// works with upstream's autoscaler and with ours. Unknown keys are ignored
// (as upstream does), so the keys of ours below are ignored there.
type Config struct {
	// Address is host:port of the server; the host is the TLS server name.
	Address string `json:"address"`
	// Key, Cert and CACert are PEM files: the client's key and certificate
	// and the CA that signed the server's. CACert is required unless
	// Insecure is set; Cert and Key go together (mutual TLS, as upstream's
	// example server requires); CACert alone is TLS that authenticates
	// the server only.
	Key    string `json:"key"`
	Cert   string `json:"cert"`
	CACert string `json:"cacert"`
	// GRPCTimeout bounds each call.
	GRPCTimeout metav1.Duration `json:"grpc_timeout"`

	// Insecure is ours: a plaintext connection, with no TLS files. It
	// must be asked for: upstream falls back to plaintext whenever cert is
	// empty, so a forgotten certificate would silently send node groups,
	// scale-ups and deletions unauthenticated over the network. The
	// connection is then warned about at start and in the status.
	Insecure bool `json:"insecure,omitempty"`

	// Extension is ours: "auto" (default) probes the server for
	// dra-autoscaler's extension at every Refresh, "off" speaks upstream's
	// service only.
	Extension string `json:"extension,omitempty"`
}

// Extension modes.
const (
	ExtensionAuto = "auto"
	ExtensionOff  = "off"
)

// LoadConfig reads and checks a config file.
func LoadConfig(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	cfg := &Config{}
	if err := yaml.Unmarshal(b, cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// Validate checks the config and fills the defaults.
func (c *Config) Validate() error {
	if c.Address == "" {
		return fmt.Errorf("address is required")
	}
	if _, _, err := net.SplitHostPort(c.Address); err != nil {
		return fmt.Errorf("address %q: %w", c.Address, err)
	}
	if c.GRPCTimeout.Duration < 0 {
		return fmt.Errorf("grpc_timeout %s is negative", c.GRPCTimeout.Duration)
	}
	if c.GRPCTimeout.Duration == 0 {
		c.GRPCTimeout.Duration = DefaultTimeout
	}
	switch c.Extension {
	case "":
		c.Extension = ExtensionAuto
	case ExtensionAuto, ExtensionOff:
	default:
		return fmt.Errorf("extension %q: want %q or %q", c.Extension, ExtensionAuto, ExtensionOff)
	}
	return c.validateTLS()
}

// validateTLS checks that the config asks for TLS, or for plaintext
// explicitly, and not for both.
func (c *Config) validateTLS() error {
	tlsFiles := c.Cert != "" || c.Key != "" || c.CACert != ""
	switch {
	case c.Insecure && tlsFiles:
		return fmt.Errorf("insecure: true and TLS files (cert, key, cacert) both set: remove insecure, or the files for a plaintext connection")
	case c.Insecure:
		return nil
	case !tlsFiles:
		return fmt.Errorf("no TLS: set cacert (the CA that signed the server's certificate) and, for mutual TLS, cert and key; " +
			"or set insecure: true to accept a plaintext connection that anyone on the network path can read and forge")
	case c.CACert == "":
		return fmt.Errorf("cacert is required to verify the server (cert and key only identify this client)")
	case (c.Cert == "") != (c.Key == ""):
		return fmt.Errorf("cert and key go together: set both for mutual TLS, or neither")
	}
	return nil
}

// InsecureReason says why the connection is not secure ("" when it is),
// for the start-up warning and the status.
func (c *Config) InsecureReason() string {
	if !c.Insecure {
		return ""
	}
	return fmt.Sprintf("externalgrpc %s: plaintext connection (insecure: true): the server is not authenticated and the calls are not encrypted", c.Address)
}

// tlsConfig loads the TLS files, or returns nil for the insecure
// connection the config asks for.
func (c *Config) tlsConfig() (*tls.Config, error) {
	if c.Insecure {
		return nil, nil
	}
	var certs []tls.Certificate
	if c.Cert != "" {
		pair, err := tls.LoadX509KeyPair(c.Cert, c.Key)
		if err != nil {
			return nil, fmt.Errorf("cert/key: %w", err)
		}
		certs = append(certs, pair)
	}
	ca, err := os.ReadFile(c.CACert)
	if err != nil {
		return nil, fmt.Errorf("cacert: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("cacert %s: no PEM certificate in it", c.CACert)
	}
	host, _, _ := net.SplitHostPort(c.Address)
	return &tls.Config{Certificates: certs, RootCAs: pool, ServerName: host, MinVersion: tls.VersionTLS12}, nil
}
