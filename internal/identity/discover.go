package identity

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// maxDocumentBytes bounds a metadata document and a JWK Set.
const maxDocumentBytes = 1 << 20

// serverMetadata is what the verifier needs of an authorization server's
// metadata (RFC 8414 §2; OpenID Connect Discovery uses the same names).
type serverMetadata struct {
	Issuer  string `json:"issuer"`
	JWKSURI string `json:"jwks_uri"`
}

// metadataURLs are the places an issuer's metadata may live, in the order
// they are tried: RFC 8414 §3.1 (the well-known suffix inserted before the
// issuer's path), the same insertion for OpenID Connect, then OpenID
// Connect Discovery 1.0 §4 (appended to the issuer). Without a path the
// last two coincide.
func metadataURLs(issuer *url.URL) []string {
	path := strings.TrimSuffix(issuer.EscapedPath(), "/")
	at := func(p string) string {
		u := *issuer
		u.RawPath, u.Path, u.RawQuery, u.Fragment = "", "", "", ""
		return u.String() + p
	}
	urls := []string{
		at("/.well-known/oauth-authorization-server" + path),
		at("/.well-known/openid-configuration" + path),
	}
	if path != "" {
		urls = append(urls, at(path+"/.well-known/openid-configuration"))
	}
	return urls
}

// discover reads the issuer's metadata from the first place that has it
// and checks it: its issuer must be the one configured (a trailing slash
// apart: the metadata's spelling is the one tokens carry) and its jwks_uri
// must be safe to fetch keys from.
func discover(ctx context.Context, client *http.Client, issuer string) (serverMetadata, error) {
	u, err := parseServerURL(issuer)
	if err != nil {
		return serverMetadata{}, fmt.Errorf("issuer %q: %w", issuer, err)
	}
	var tried []string
	for _, m := range metadataURLs(u) {
		var meta serverMetadata
		status, err := getJSON(ctx, client, m, &meta)
		if err != nil {
			return serverMetadata{}, fmt.Errorf("issuer metadata %s: %w", m, err)
		}
		if status == http.StatusNotFound || status == http.StatusMethodNotAllowed || status == http.StatusBadRequest {
			tried = append(tried, fmt.Sprintf("%s: %d", m, status))
			continue
		}
		if status != http.StatusOK {
			return serverMetadata{}, fmt.Errorf("issuer metadata %s: status %d", m, status)
		}
		if strings.TrimSuffix(meta.Issuer, "/") != strings.TrimSuffix(issuer, "/") {
			return serverMetadata{}, fmt.Errorf("issuer metadata %s names issuer %q, not %q", m, meta.Issuer, issuer)
		}
		if meta.JWKSURI == "" {
			return serverMetadata{}, fmt.Errorf("issuer metadata %s has no jwks_uri", m)
		}
		if _, err := parseServerURL(meta.JWKSURI); err != nil {
			return serverMetadata{}, fmt.Errorf("issuer metadata %s: jwks_uri %q: %w", m, meta.JWKSURI, err)
		}
		return meta, nil
	}
	return serverMetadata{}, fmt.Errorf("issuer %q publishes no metadata (%s)", issuer, strings.Join(tried, ", "))
}

// parseServerURL accepts an absolute https URL, or http to a loopback
// host: keys fetched in clear text from elsewhere could be anyone's.
func parseServerURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, err
	}
	if u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, errors.New("it must be an absolute URL with a host, no user, query or fragment")
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !isLoopback(u.Hostname()) {
			return nil, errors.New("plain http is allowed for loopback hosts only: use https")
		}
	default:
		return nil, errors.New("it must be an https:// URL")
	}
	return u, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// getJSON GETs url and decodes a 200 answer into v (at most
// maxDocumentBytes); other statuses are returned without decoding.
func getJSON(ctx context.Context, client *http.Client, url string, v any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return resp.StatusCode, nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDocumentBytes+1))
	if err != nil {
		return 0, err
	}
	if len(body) > maxDocumentBytes {
		return 0, fmt.Errorf("document over %d bytes", maxDocumentBytes)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return 0, fmt.Errorf("not a JSON document: %w", err)
	}
	return http.StatusOK, nil
}
