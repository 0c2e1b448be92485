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
	// and the CA that signed the server's. An empty Cert means an
	// insecure connection (the other two are then not read).
	Key    string `json:"key"`
	Cert   string `json:"cert"`
	CACert string `json:"cacert"`
	// GRPCTimeout bounds each call.
	GRPCTimeout metav1.Duration `json:"grpc_timeout"`

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
	if c.Cert != "" && (c.Key == "" || c.CACert == "") {
		return fmt.Errorf("cert is set, so key and cacert are required too")
	}
	return nil
}

// tlsConfig loads the mTLS files, or returns nil for an insecure
// connection (no cert, as upstream reads it).
func (c *Config) tlsConfig() (*tls.Config, error) {
	if c.Cert == "" {
		return nil, nil
	}
	pair, err := tls.LoadX509KeyPair(c.Cert, c.Key)
	if err != nil {
		return nil, fmt.Errorf("cert/key: %w", err)
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
	return &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: pool, ServerName: host, MinVersion: tls.VersionTLS12}, nil
}
