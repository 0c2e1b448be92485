package controlplane

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// credentials are made once per state directory and kept, so a restarted
// control plane (make up after make down) is reachable with the same
// kubeconfig.
type credentials struct {
	servingCert, servingKey string // apiserver TLS
	saKey                   string // service-account signing key (PEM, EC)
	tokenFile               string // static token file: the admin token
	token                   string
	caData                  []byte
}

func ensureCredentials(dir string) (*credentials, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	c := &credentials{
		servingCert: filepath.Join(dir, "apiserver.crt"),
		servingKey:  filepath.Join(dir, "apiserver.key"),
		saKey:       filepath.Join(dir, "service-account.key"),
		tokenFile:   filepath.Join(dir, "tokens.csv"),
	}
	if !exists(c.servingCert) || !exists(c.servingKey) {
		cert, key, err := certutil.GenerateSelfSignedCertKey("localhost",
			[]net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1")}, []string{"kubernetes.default.svc"})
		if err != nil {
			return nil, fmt.Errorf("serving certificate: %w", err)
		}
		if err := writeFiles(map[string][]byte{c.servingCert: cert, c.servingKey: key}); err != nil {
			return nil, err
		}
	}
	if _, _, err := keyutil.LoadOrGenerateKeyFile(c.saKey); err != nil {
		return nil, fmt.Errorf("service-account key: %w", err)
	}
	if !exists(c.tokenFile) {
		b := make([]byte, 16)
		if _, err := rand.Read(b); err != nil {
			return nil, err
		}
		line := fmt.Sprintf("%s,admin,admin,system:masters\n", hex.EncodeToString(b))
		if err := writeFiles(map[string][]byte{c.tokenFile: []byte(line)}); err != nil {
			return nil, err
		}
	}
	raw, err := os.ReadFile(c.tokenFile)
	if err != nil {
		return nil, err
	}
	if _, err := fmt.Sscanf(string(raw), "%32s", &c.token); err != nil || len(c.token) != 32 {
		return nil, fmt.Errorf("malformed token file %s", c.tokenFile)
	}
	if c.caData, err = os.ReadFile(c.servingCert); err != nil {
		return nil, err
	}
	return c, nil
}

// writeKubeconfig writes an admin kubeconfig for the apiserver on port.
func writeKubeconfig(path string, port int, c *credentials) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{
		Server:                   fmt.Sprintf("https://127.0.0.1:%d", port),
		CertificateAuthorityData: c.caData,
	}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: c.token}
	cfg.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "admin"}
	cfg.CurrentContext = "local"
	return clientcmd.WriteToFile(*cfg, path)
}

func writeFiles(files map[string][]byte) error {
	for path, data := range files {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
