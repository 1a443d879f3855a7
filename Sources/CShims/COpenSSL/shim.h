// OpenSSL 3: TLS for the WebSocket client, DTLS for the WebRTC transport,
// ECDSA certificates, SHA-1/SHA-256/HMAC for STUN and WebSocket.
#pragma once
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/bio.h>
#include <openssl/rand.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>
#include <openssl/ec.h>
#include <openssl/pem.h>

// OpenSSL macros Swift cannot import.
static inline long castd_ssl_set_tlsext_host_name(SSL *s, const char *name) { return SSL_set_tlsext_host_name(s, name); }
static inline long castd_bio_set_mem_eof_return(BIO *b, long v) { return BIO_set_mem_eof_return(b, v); }
static inline long castd_bio_ctrl_pending(BIO *b) { return (long)BIO_ctrl_pending(b); }
static inline long castd_dtls_get_timeout(SSL *s, struct timeval *tv) { return DTLSv1_get_timeout(s, tv); }
static inline long castd_dtls_handle_timeout(SSL *s) { return DTLSv1_handle_timeout(s); }
static inline long castd_ssl_set_mtu(SSL *s, long mtu) { return SSL_set_mtu(s, mtu); }

// SHA-1 on a caller-owned SHA_CTX (a plain struct: copying it is a memcpy), for the
// per-packet HMAC-SHA1 of SRTP (issue 19). OpenSSL 3 deprecates these low-level
// calls, but EVP_MAC and EVP_MD_CTX_copy allocate a provider context on every
// re-init; a precomputed inner/outer state copied per packet allocates nothing.
// Wrapped here so that the deprecation stays inside this system header.
static inline int castd_sha1_init(SHA_CTX *c) { return SHA1_Init(c); }
static inline int castd_sha1_update(SHA_CTX *c, const void *data, size_t len) { return SHA1_Update(c, data, len); }
static inline int castd_sha1_final(unsigned char *md, SHA_CTX *c) { return SHA1_Final(md, c); }
