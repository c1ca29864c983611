// Package hydratest runs a real Ory Hydra (an OAuth 2.1 authorization
// server) on loopback ports for tests, in memory, issuing JWT access
// tokens (docs/identity.md, "Running Hydra as the tests do"). The binary is
// built once by test/hydra/build.sh from hydra's Go module and cached by
// version; .ci/run builds it before the tests, and a test that finds no
// binary runs the script itself (a few minutes on 2 cores, under a lock).
package hydratest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
)

// Version is the Hydra release the tests run (docs/identity.md).
const Version = "v2.3.0"

// AccessTokenSet is the JWK Set Hydra signs JWT access tokens with.
const AccessTokenSet = "hydra.jwt.access-token"

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// Binary returns the hydra binary: $TOOLFS_HYDRA_BIN when set, else the
// one test/hydra/build.sh caches (running the script when it is absent).
func Binary() (string, error) {
	binOnce.Do(func() {
		if p := os.Getenv("TOOLFS_HYDRA_BIN"); p != "" {
			binPath = p
			return
		}
		script, err := buildScript()
		if err != nil {
			binErr = err
			return
		}
		cmd := exec.Command("bash", script)
		cmd.Env = append(os.Environ(), "TOOLFS_HYDRA_VERSION="+Version)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			binErr = fmt.Errorf("%s: %v\n%s", script, err, stderr.Bytes())
			return
		}
		binPath = strings.TrimSpace(string(out))
	})
	return binPath, binErr
}

// buildScript finds test/hydra/build.sh above the working directory (a
// package's folder under go test).
func buildScript() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, "test", "hydra", "build.sh")
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if _, err := os.Stat(p); err != nil {
				return "", fmt.Errorf("hydratest: %s: %w", p, err)
			}
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("hydratest: no go.mod above the working directory")
		}
		dir = parent
	}
}

// Server is one hydra serve all process: its public (OAuth 2) and admin
// APIs on loopback ports, its data in memory.
type Server struct {
	// Issuer is the issuer URL (URLS_SELF_ISSUER), also the public API.
	Issuer string
	// AdminURL is the admin API.
	AdminURL string
	Dir      string

	cmd    *exec.Cmd
	exited chan struct{}
	client *http.Client
}

// Start runs a Hydra for t, stopped at cleanup. extraEnv are more
// KEY=value settings (Hydra reads its configuration from the environment,
// e.g. STRATEGIES_JWT_SCOPE_CLAIM=string). A missing binary that cannot be
// built fails t.
func Start(t testing.TB, extraEnv ...string) *Server {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	var last error
	for range 3 {
		s, err := start(bin, t.TempDir(), extraEnv)
		if err == nil {
			t.Cleanup(s.Stop)
			return s
		}
		last = err
	}
	t.Fatal(last)
	return nil
}

func start(bin, dir string, extraEnv []string) (*Server, error) {
	public, admin := freePort(), freePort()
	if public == 0 || admin == 0 || public == admin {
		return nil, errors.New("hydratest: no free loopback ports")
	}
	secret := make([]byte, 24)
	rand.Read(secret)
	s := &Server{
		Issuer:   "http://127.0.0.1:" + strconv.Itoa(public),
		AdminURL: "http://127.0.0.1:" + strconv.Itoa(admin),
		Dir:      dir,
		exited:   make(chan struct{}),
		client:   &http.Client{Timeout: 10 * time.Second},
	}
	logf, err := os.Create(filepath.Join(dir, "hydra.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(bin, "serve", "all", "--dev", "--sqa-opt-out")
	cmd.Env = append([]string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + dir,
		"DSN=memory",
		"SECRETS_SYSTEM=" + hex.EncodeToString(secret),
		"URLS_SELF_ISSUER=" + s.Issuer,
		"SERVE_PUBLIC_HOST=127.0.0.1", "SERVE_PUBLIC_PORT=" + strconv.Itoa(public),
		"SERVE_ADMIN_HOST=127.0.0.1", "SERVE_ADMIN_PORT=" + strconv.Itoa(admin),
		"STRATEGIES_ACCESS_TOKEN=jwt",
		"LOG_LEVEL=warn",
	}, extraEnv...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s.cmd = cmd
	go func() { cmd.Wait(); close(s.exited) }()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-s.exited:
			log, _ := os.ReadFile(filepath.Join(dir, "hydra.log"))
			return nil, fmt.Errorf("hydratest: hydra exited at start-up: %s", log)
		case <-time.After(50 * time.Millisecond):
		}
		if s.ready(s.AdminURL+"/health/ready") && s.ready(s.Issuer+"/health/ready") {
			// Hydra would generate its keys on first use: RSA 4096, which
			// takes longer than its 10 s write timeout on a busy machine.
			// Give it RSA 2048 keys made here instead.
			if err := s.installKeys(); err != nil {
				s.Stop()
				return nil, err
			}
			return s, nil
		}
	}
	s.Stop()
	log, _ := os.ReadFile(filepath.Join(dir, "hydra.log"))
	return nil, fmt.Errorf("hydratest: hydra not ready within 60s: %s", log)
}

// installKeys puts one new RS256 key (2048 bits) in each of Hydra's two
// signing key sets (PUT /admin/keys/{set}).
func (s *Server) installKeys() error {
	for _, set := range []string{"hydra.openid.id-token", AccessTokenSet} {
		key, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			return err
		}
		id := make([]byte, 8)
		rand.Read(id)
		jwk, err := jwkset.NewJWKFromKey(key, jwkset.JWKOptions{
			Marshal:  jwkset.JWKMarshalOptions{Private: true},
			Metadata: jwkset.JWKMetadataOptions{ALG: jwkset.AlgRS256, KID: set + "-" + hex.EncodeToString(id), USE: jwkset.UseSig},
		})
		if err != nil {
			return err
		}
		body, err := json.Marshal(map[string]any{"keys": []jwkset.JWKMarshal{jwk.Marshal()}})
		if err != nil {
			return err
		}
		if err := s.adminDo(http.MethodPut, "/admin/keys/"+set, body, http.StatusOK, nil); err != nil {
			return err
		}
	}
	return nil
}

func (s *Server) ready(u string) bool {
	resp, err := s.client.Get(u)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func freePort() int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Stop ends Hydra with SIGTERM (SIGKILL after 10s) and waits for it.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		<-s.exited
	}
	s.cmd = nil
}

// Client is an OAuth 2 client registered with Hydra for the
// client_credentials grant.
type Client struct {
	// Scopes and Audience are what the client may ask for.
	Scopes   []string
	Audience []string
	// Lifespan, when set, is its access tokens' lifespan (a Go duration
	// such as "1s"): client_credentials_grant_access_token_lifespan.
	Lifespan string
}

// Credentials are a registered client's id and secret.
type Credentials struct{ ID, Secret string }

// CreateClient registers c through the admin API (POST /admin/clients).
func (s *Server) CreateClient(t testing.TB, c Client) Credentials {
	t.Helper()
	body := map[string]any{
		"grant_types":                []string{"client_credentials"},
		"token_endpoint_auth_method": "client_secret_post",
		"scope":                      strings.Join(c.Scopes, " "),
		"audience":                   c.Audience,
	}
	if c.Lifespan != "" {
		body["client_credentials_grant_access_token_lifespan"] = c.Lifespan
	}
	var out struct {
		ID     string `json:"client_id"`
		Secret string `json:"client_secret"`
	}
	s.admin(t, http.MethodPost, "/admin/clients", body, http.StatusCreated, &out)
	if out.ID == "" || out.Secret == "" {
		t.Fatalf("hydratest: created client has no id or secret")
	}
	return Credentials(out)
}

// Token asks the token endpoint for a client_credentials access token
// with scopes and audience, and returns it (a JWT).
func (s *Server) Token(t testing.TB, c Credentials, scopes, audience []string) string {
	t.Helper()
	tok, err := s.TryToken(c, scopes, audience)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TryToken is Token returning its error.
func (s *Server) TryToken(c Credentials, scopes, audience []string) (string, error) {
	form := url.Values{
		"grant_type":    {"client_credentials"},
		"client_id":     {c.ID},
		"client_secret": {c.Secret},
	}
	if len(scopes) > 0 {
		form.Set("scope", strings.Join(scopes, " "))
	}
	if len(audience) > 0 {
		form.Set("audience", strings.Join(audience, " "))
	}
	resp, err := s.client.PostForm(s.Issuer+"/oauth2/token", form)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("hydratest: token endpoint: %d %s", resp.StatusCode, b)
	}
	var out struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.Unmarshal(b, &out); err != nil || out.AccessToken == "" {
		return "", fmt.Errorf("hydratest: token endpoint answered %s", b)
	}
	return out.AccessToken, nil
}

// RotateKeys has Hydra generate a new signing key with id kid and
// algorithm alg in the access-token key set (POST
// /admin/keys/hydra.jwt.access-token); Hydra signs new tokens with the
// newest key (its keys are ordered by creation time, in seconds) and
// publishes all of them. Hydra makes RS* keys of 4096 bits, which a busy
// machine may not generate within Hydra's 10 s write timeout: ES256 is
// instant.
func (s *Server) RotateKeys(t testing.TB, kid, alg string) {
	t.Helper()
	s.admin(t, http.MethodPost, "/admin/keys/"+AccessTokenSet, map[string]string{"alg": alg, "kid": kid, "use": "sig"}, http.StatusCreated, nil)
}

func (s *Server) admin(t testing.TB, method, path string, body any, want int, out any) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.adminDo(method, path, b, want, out); err != nil {
		t.Fatal(err)
	}
}

func (s *Server) adminDo(method, path string, body []byte, want int, out any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, s.AdminURL+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return fmt.Errorf("hydratest: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	rb, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != want {
		return fmt.Errorf("hydratest: %s %s: %d %s", method, path, resp.StatusCode, rb)
	}
	if out != nil {
		if err := json.Unmarshal(rb, out); err != nil {
			return fmt.Errorf("hydratest: %s %s: %w", method, path, err)
		}
	}
	return nil
}
