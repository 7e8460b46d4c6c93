package auth

import (
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"slices"
	"strconv"
)

// Trust domains: the owner key of a principal includes a digest of the
// verifier configuration that authenticated it, so that the same "sub"
// vouched for by different keys, issuers or audiences is never the same
// owner. The digest is computed from configuration only (never from random
// or time), so the same configuration after a restart or a reload yields
// the same owner keys.

// trustDomainPrefix marks JWT trust domains; the gateway's other caller
// sources use other prefixes, so the namespaces never meet.
const trustDomainPrefix = "jwt:"

// trustDomain digests o's trust-relevant settings. identity is the key
// source's identity (see keySource.identity); an explicit o.TrustDomain
// takes its place, so keys can rotate without changing owner keys.
func trustDomain(o Options, identity, principalClaim string) string {
	source := identity
	if o.TrustDomain != "" {
		source = "named\x00" + o.TrustDomain
	}
	return trustDomainPrefix + digest("td1", source, o.Issuer, o.Audience, principalClaim, o.TenantClaim)
}

// digest hashes length-prefixed fields: distinct field lists never collide
// by concatenation.
func digest(fields ...string) string {
	h := sha256.New()
	for _, f := range fields {
		h.Write([]byte(strconv.Itoa(len(f))))
		h.Write([]byte{':'})
		h.Write([]byte(f))
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// hmacIdentity identifies a set of HMAC secrets by their digests, in an
// order-independent way; the secrets themselves never leave this package.
func hmacIdentity(secrets ...[]byte) string {
	sums := make([]string, 0, len(secrets))
	for _, s := range secrets {
		sum := sha256.Sum256(s)
		sums = append(sums, hex.EncodeToString(sum[:]))
	}
	slices.Sort(sums)
	return "hmac\x00" + digest(sums...)
}

// pemIdentity identifies a set of public keys by the digests of their
// PKIX encodings, in an order-independent way, so reformatting a PEM file
// or wrapping a key in a certificate does not change it.
func pemIdentity(keys []crypto.PublicKey) string {
	sums := make([]string, 0, len(keys))
	for _, k := range keys {
		der, err := x509.MarshalPKIXPublicKey(k)
		if err != nil { // unreachable for the key types checkPublicKey accepts
			continue
		}
		sum := sha256.Sum256(der)
		sums = append(sums, hex.EncodeToString(sum[:]))
	}
	slices.Sort(sums)
	sums = slices.Compact(sums)
	return "pem\x00" + digest(sums...)
}

// jwksIdentity identifies a JWKS by its URL: the keys in it rotate under
// the identity provider's control without changing the trust domain.
func jwksIdentity(url string) string { return "jwks\x00" + url }
