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
