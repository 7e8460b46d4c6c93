package auth

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
)

// minRSABits is the smallest RSA modulus accepted, from PEM or JWKS.
const minRSABits = 2048

// Signing algorithms grouped by key family.
var (
	hmacAlgs       = []string{"HS256", "HS384", "HS512"}
	rsaAlgs        = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"}
	ecdsaAlgs      = []string{"ES256", "ES384", "ES512"}
	ed25519Algs    = []string{"EdDSA"}
	asymmetricAlgs = slices.Concat(rsaAlgs, ecdsaAlgs, ed25519Algs)
)

// ecdsaAlgByCurve maps a curve name to the only ES algorithm it may sign.
var ecdsaAlgByCurve = map[string]string{
	"P-256": "ES256",
	"P-384": "ES384",
	"P-521": "ES512",
}

// errNoKeyForAlg is returned by keyfuncs when no configured key belongs to
// the token algorithm's family.
var errNoKeyForAlg = errors.New("no configured key fits the token's signing algorithm")

// keySource is one configured key source: the algorithms the parser may
// accept and the keyfunc that picks the key(s) for a token.
type keySource struct {
	methods []string
	keyfunc jwt.Keyfunc
	// identity names the key material for trust domains ([trustDomain]).
	identity string
}

// newHMACSource accepts HS256/384/512 with any of secrets (several during a
// rotation), each of which must be long enough and must not look like a PEM
// document.
func newHMACSource(secrets ...[]byte) (keySource, error) {
	keys := make([]jwt.VerificationKey, 0, len(secrets))
	for i, secret := range secrets {
		if len(secret) < MinHMACSecretLen {
			return keySource{}, fmt.Errorf("HMAC secret %d is %d bytes, want at least %d", i+1, len(secret), MinHMACSecretLen)
		}
		if bytes.Contains(secret, []byte("-----BEGIN")) {
			return keySource{}, errors.New("HMAC secret looks like a PEM document; configure public keys with PublicKeysPEM")
		}
		keys = append(keys, bytes.Clone(secret))
	}
	var key any = jwt.VerificationKeySet{Keys: keys}
	if len(keys) == 1 {
		key = keys[0]
	}
	return keySource{
		identity: hmacIdentity(secrets...),
		methods:  slices.Clone(hmacAlgs),
		keyfunc: func(t *jwt.Token) (any, error) {
			if !slices.Contains(hmacAlgs, t.Method.Alg()) {
				return nil, errNoKeyForAlg
			}
			return key, nil
		},
	}, nil
}

// newPEMSource parses every PEM document and accepts the algorithms of the
// key families found.
func newPEMSource(docs [][]byte) (keySource, error) {
	keys, err := parsePublicKeysPEM(docs)
	if err != nil {
		return keySource{}, err
	}
	var methods []string
	for _, k := range keys {
		for _, alg := range algsForKey(k) {
			if !slices.Contains(methods, alg) {
				methods = append(methods, alg)
			}
		}
	}
	return keySource{
		identity: pemIdentity(keys),
		methods:  methods,
		keyfunc: func(t *jwt.Token) (any, error) {
			return keysForAlg(t.Method.Alg(), keys)
		},
	}, nil
}

// parsePublicKeysPEM returns the public keys of all PEM blocks of all docs.
// Text outside PEM blocks is ignored; a document without blocks, a block of
// an unsupported type, a private key or a weak key is an error.
func parsePublicKeysPEM(docs [][]byte) ([]crypto.PublicKey, error) {
	var keys []crypto.PublicKey
	for i, doc := range docs {
		n := 0
		for rest := doc; ; n++ {
			var block *pem.Block
			block, rest = pem.Decode(rest)
			if block == nil {
				break
			}
			key, err := parsePEMBlock(block)
			if err != nil {
				return nil, fmt.Errorf("PublicKeysPEM[%d], PEM block %d: %w", i, n, err)
			}
			keys = append(keys, key)
		}
		if n == 0 {
			return nil, fmt.Errorf("PublicKeysPEM[%d]: no PEM block found", i)
		}
	}
	return keys, nil
}

// parsePEMBlock extracts and checks the public key of one PEM block.
func parsePEMBlock(block *pem.Block) (crypto.PublicKey, error) {
	var (
		key any
		err error
	)
	switch {
	case block.Type == "PUBLIC KEY":
		key, err = x509.ParsePKIXPublicKey(block.Bytes)
	case block.Type == "RSA PUBLIC KEY":
		key, err = x509.ParsePKCS1PublicKey(block.Bytes)
	case block.Type == "CERTIFICATE":
		var cert *x509.Certificate
		cert, err = x509.ParseCertificate(block.Bytes)
		if err == nil {
			key = cert.PublicKey
		}
	case strings.Contains(block.Type, "PRIVATE KEY"):
		return nil, fmt.Errorf("%q block refused: configure the public key, not the private key", block.Type)
	default:
		return nil, fmt.Errorf("unsupported PEM block type %q", block.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("parse %q block: %w", block.Type, err)
	}
	if err := checkPublicKey(key); err != nil {
		return nil, err
	}
	return key, nil
}

// checkPublicKey accepts RSA keys of at least minRSABits, ECDSA keys on
// P-256/P-384/P-521 and Ed25519 keys.
func checkPublicKey(key any) error {
	switch k := key.(type) {
	case *rsa.PublicKey:
		if k.N == nil || k.N.BitLen() < minRSABits {
			return fmt.Errorf("RSA key is shorter than %d bits", minRSABits)
		}
	case *ecdsa.PublicKey:
		if k.Curve == nil || ecdsaAlgByCurve[k.Curve.Params().Name] == "" {
			return errors.New("ECDSA key is not on P-256, P-384 or P-521")
		}
	case ed25519.PublicKey:
		if len(k) != ed25519.PublicKeySize {
			return errors.New("Ed25519 key has the wrong size")
		}
	default:
		return fmt.Errorf("unsupported public key type %T", key)
	}
	return nil
}

// algsForKey lists the signing algorithms key may verify.
func algsForKey(key crypto.PublicKey) []string {
	if checkPublicKey(key) != nil {
		return nil
	}
	switch k := key.(type) {
	case *rsa.PublicKey:
		return rsaAlgs
	case *ecdsa.PublicKey:
		return []string{ecdsaAlgByCurve[k.Curve.Params().Name]}
	case ed25519.PublicKey:
		return ed25519Algs
	}
	return nil
}

// keyFitsAlg reports whether key is an acceptable public key for alg.
// Symmetric keys ([]byte) never fit: they are only used by the HMAC source.
func keyFitsAlg(key any, alg string) bool {
	return slices.Contains(algsForKey(key), alg)
}

// keysForAlg returns the keys fitting alg: the key itself when there is one,
// a jwt.VerificationKeySet when there are several (the parser then accepts
// the token if any of them verifies it), or errNoKeyForAlg.
func keysForAlg(alg string, keys []crypto.PublicKey) (any, error) {
	var fit []jwt.VerificationKey
	for _, k := range keys {
		if keyFitsAlg(k, alg) {
			fit = append(fit, k)
		}
	}
	switch len(fit) {
	case 0:
		return nil, errNoKeyForAlg
	case 1:
		return fit[0], nil
	default:
		return jwt.VerificationKeySet{Keys: fit}, nil
	}
}

// filterKeyfuncResult restricts what an upstream keyfunc (the JWKS one)
// returned to the keys fitting alg.
func filterKeyfuncResult(alg string, got any) (any, error) {
	switch g := got.(type) {
	case jwt.VerificationKeySet:
		keys := make([]crypto.PublicKey, 0, len(g.Keys))
		for _, k := range g.Keys {
			keys = append(keys, k)
		}
		return keysForAlg(alg, keys)
	default:
		return keysForAlg(alg, []crypto.PublicKey{g})
	}
}

// newJWKSSource builds a keyfunc/v3 key source over the JWKS at o.JWKSURL.
//
// Behaviour (keyfunc v3 over jwkset):
//   - NewVerifier fetches the set once, bounded by JWKSFetchTimeout.
//     A failed first fetch is logged, not returned (NoErrorReturnFirstHTTPReq).
//   - A goroutine refreshes the set every JWKSRefreshInterval until ctx is
//     done; each refresh replaces the whole set, so removed keys stop
//     verifying.
//   - A token whose "kid" is unknown triggers a synchronous refresh, allowed
//     once per JWKSUnknownKIDRefreshInterval (burst 1), stretched up to
//     JWKSRefreshBackoffMax while fetches fail (refreshBackoff). The caller
//     waits for the limiter and the fetch for at most JWKSFetchTimeout in
//     total; when the limiter would need longer the token is rejected at
//     once. Failed fetches are logged at warn level.
//   - A token without "kid" is tried against every cached key of its
//     algorithm's family and never triggers a refresh.
//   - Keys whose JWK "alg" differs from the token's are refused by keyfunc;
//     keys whose "use" is neither "sig" nor absent are ignored; the key's
//     type must fit the token's algorithm (see keyFitsAlg).
func newJWKSSource(ctx context.Context, o Options) (keySource, error) {
	u, err := url.Parse(o.JWKSURL)
	if err != nil {
		return keySource{}, fmt.Errorf("JWKS URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return keySource{}, fmt.Errorf("JWKS URL %q: want an absolute http or https URL", o.JWKSURL)
	}
	if o.JWKSRefreshInterval < 0 || o.JWKSUnknownKIDRefreshInterval < 0 || o.JWKSRefreshBackoffMax < 0 {
		return keySource{}, errors.New("JWKS refresh intervals must not be negative")
	}

	client := o.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: JWKSFetchTimeout}
	}
	refreshEvery := o.JWKSRefreshInterval
	if refreshEvery == 0 {
		refreshEvery = DefaultJWKSRefreshInterval
	}
	unknownKIDEvery := o.JWKSUnknownKIDRefreshInterval
	if unknownKIDEvery == 0 {
		unknownKIDEvery = DefaultJWKSUnknownKIDRefreshInterval
	}
	backoffMax := o.JWKSRefreshBackoffMax
	if backoffMax == 0 {
		backoffMax = DefaultJWKSRefreshBackoffMax
	}
	backoff := newRefreshBackoff(unknownKIDEvery, backoffMax, o.JWKSURL, o.Logger)
	noErrorOnFirstFetch := true

	base, err := keyfunc.NewDefaultOverrideCtx(ctx, []string{o.JWKSURL}, keyfunc.Override{
		Client:                    client,
		HTTPTimeout:               JWKSFetchTimeout,
		NoErrorReturnFirstHTTPReq: &noErrorOnFirstFetch,
		// Bounds both the wait for the unknown-kid limiter and the fetch
		// that follows, so a request never blocks for long.
		RateLimitWaitMax: JWKSFetchTimeout,
		RefreshErrorHandlerFunc: func(string) func(context.Context, error) {
			return backoff.failed
		},
		RefreshInterval:   refreshEvery,
		RefreshUnknownKID: backoff.limiter,
	})
	if err != nil {
		return keySource{}, fmt.Errorf("JWKS %q: %w", o.JWKSURL, err)
	}
	// NewDefaultOverrideCtx offers no "use" filter; wrap its storage in a
	// keyfunc that ignores encryption keys.
	kf, err := keyfunc.New(keyfunc.Options{
		Ctx:          ctx,
		Storage:      base.Storage(),
		UseWhitelist: []jwkset.USE{jwkset.UseSig, ""},
	})
	if err != nil {
		return keySource{}, fmt.Errorf("JWKS %q: %w", o.JWKSURL, err)
	}
	return keySource{
		identity: jwksIdentity(o.JWKSURL),
		methods:  slices.Clone(asymmetricAlgs),
		keyfunc: func(t *jwt.Token) (any, error) {
			got, err := kf.Keyfunc(t)
			if err != nil {
				// The upstream error may quote the token's kid; keep it out.
				return nil, errNoJWKSKey
			}
			backoff.succeeded()
			return filterKeyfuncResult(t.Method.Alg(), got)
		},
	}, nil
}

// errNoJWKSKey hides keyfunc's lookup error, which names the token's kid.
var errNoJWKSKey = errors.New("no usable JWKS key for the token")
