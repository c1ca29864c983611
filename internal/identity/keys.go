package identity

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/MicahParks/jwkset"
)

// keySet is the issuer's JWK Set as last fetched: a jwkset storage whose
// KeyRead refetches the set when asked for a kid it does not hold, at most
// once per minInterval whatever asks (an unknown kid, or keys older than
// maxAge), so a flood of tokens with made-up kids costs the issuer one
// request per interval. Concurrent askers share one fetch. keyfunc (the
// jwt.Keyfunc over it) checks alg against the key and takes the public key.
type keySet struct {
	jwkset.Storage // the keys of the last successful fetch

	url         string
	client      *http.Client
	minInterval time.Duration
	maxAge      time.Duration
	timeout     time.Duration
	now         func() time.Time
	onFetch     func(KeyFetch)

	mu      sync.Mutex   // held for the whole of a fetch
	tried   time.Time    // last fetch attempt, successful or not; under mu
	fetched atomic.Int64 // last successful fetch (Unix ns), read without mu
}

// KeyFetch reports one fetch of the issuer's JWK Set, for logs and
// metrics: why it ran ("start", "unknown kid", "max age"), how many
// usable keys it found, and its error (the old keys stay in use then).
type KeyFetch struct {
	URL    string
	Reason string
	Keys   int
	Err    error
}

// KeyRead returns the key kid, refetching the set once (rate-limited) when
// it is unknown.
func (k *keySet) KeyRead(ctx context.Context, kid string) (jwkset.JWK, error) {
	jwk, err := k.Storage.KeyRead(ctx, kid)
	if !errors.Is(err, jwkset.ErrKeyNotFound) {
		return jwk, err
	}
	k.refresh(ctx, "unknown kid")
	jwk, err = k.Storage.KeyRead(ctx, kid)
	if errors.Is(err, jwkset.ErrKeyNotFound) {
		return jwk, refuse(ErrUnknownKey, fmt.Sprintf("kid %q", clip(kid)), err)
	}
	return jwk, err
}

// refreshIfOld refetches the set when the last successful fetch is older
// than maxAge, so a key the issuer withdrew stops verifying.
func (k *keySet) refreshIfOld(ctx context.Context) {
	if k.now().Sub(time.Unix(0, k.fetched.Load())) >= k.maxAge {
		k.refresh(ctx, "max age")
	}
}

// refresh fetches the set unless a fetch started less than minInterval
// ago; it reports whether it fetched. A caller that waited for another's
// fetch reads the keys that one loaded.
func (k *keySet) refresh(ctx context.Context, reason string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := k.now()
	if !k.tried.IsZero() && now.Sub(k.tried) < k.minInterval {
		return false
	}
	k.tried = now
	// The fetch outlives the request that asked for it: the next askers
	// within minInterval depend on its result.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), k.timeout)
	defer cancel()
	n, err := k.fetch(ctx)
	if err == nil {
		k.fetched.Store(now.UnixNano())
	}
	if k.onFetch != nil {
		k.onFetch(KeyFetch{URL: k.url, Reason: reason, Keys: n, Err: err})
	}
	return true
}

// fetch replaces the keys with the set at url. Keys of a type jwkset does
// not support, or that fail its checks, are left out; an empty result
// keeps the old keys.
func (k *keySet) fetch(ctx context.Context) (int, error) {
	var set jwkset.JWKSMarshal
	status, err := getJSON(ctx, k.client, k.url, &set)
	if err != nil {
		return 0, err
	}
	if status != http.StatusOK {
		return 0, fmt.Errorf("JWK Set %s: status %d", k.url, status)
	}
	keys := make([]jwkset.JWK, 0, len(set.Keys))
	for _, m := range set.Keys {
		if m.USE == jwkset.UseEnc {
			continue
		}
		jwk, err := jwkset.NewJWKFromMarshal(m, jwkset.JWKMarshalOptions{}, jwkset.JWKValidateOptions{})
		if err != nil {
			continue
		}
		keys = append(keys, jwk)
	}
	if len(keys) == 0 {
		return 0, fmt.Errorf("JWK Set %s holds no usable signing key", k.url)
	}
	return len(keys), k.Storage.KeyReplaceAll(ctx, keys)
}
