/* TLS in the native core, through OpenSSL: a client context per engine, a session per
 * socket, and reads and writes that are TLS records where the socket has a session.
 *
 * Python connects a plain TCP socket and hands its descriptor over (as for plaintext);
 * the core makes the TLS handshake on it and sends the connection's greeting (Redis's
 * AUTH) before the socket joins the loop, blocking in the loop's thread up to
 * TLS_OPEN_MS: this happens at connect and reconnect time only, never per op. From then
 * on, reads and writes go through SSL_read / SSL_write with partial writes, and a read
 * drains what OpenSSL holds decrypted (epoll knows only the socket's own buffer).
 *
 * Built without OpenSSL's headers (KVBENCH_TLS undefined), the functions say so and
 * Python measures TLS on its own engine.
 */
#include "engine.h"

#include <poll.h>

#define TLS_OPEN_MS 10000

#ifdef KVBENCH_TLS
#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

static void ssl_reason(char *err, size_t len, const char *what) {
    unsigned long code = ERR_get_error();
    char buf[200] = "";
    if (code) ERR_error_string_n(code, buf, sizeof buf);
    snprintf(err, len, "%s%s%s", what, code ? ": " : "", buf);
    ERR_clear_error();
}

int tls_setup(Engine *e, const char *ca, const char *cert, const char *key,
              const char *name, int verify, const char *hello, size_t hello_len,
              char *err, size_t errlen) {
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx) { ssl_reason(err, errlen, "SSL_CTX_new"); return -1; }
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_verify(ctx, verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, NULL);
    if (ca && *ca) {
        BIO *bio = BIO_new_mem_buf(ca, -1);
        X509_STORE *store = SSL_CTX_get_cert_store(ctx);
        X509 *x; int n = 0;
        while (bio && (x = PEM_read_bio_X509(bio, NULL, NULL, NULL))) {
            X509_STORE_add_cert(store, x);
            X509_free(x);
            n++;
        }
        BIO_free(bio);
        ERR_clear_error();  /* the end of the PEM text reads as an error */
        if (!n) { snprintf(err, errlen, "no certificate in the CA given"); goto fail; }
    } else if (verify && !SSL_CTX_set_default_verify_paths(ctx)) {
        ssl_reason(err, errlen, "the system's CAs"); goto fail;
    }
    if (cert && *cert) {
        BIO *bio = BIO_new_mem_buf(cert, -1);
        X509 *x = bio ? PEM_read_bio_X509(bio, NULL, NULL, NULL) : NULL;
        BIO_free(bio);
        if (!x || SSL_CTX_use_certificate(ctx, x) != 1) {
            X509_free(x); ssl_reason(err, errlen, "the client certificate"); goto fail;
        }
        X509_free(x);
        bio = BIO_new_mem_buf(key ? key : "", -1);
        EVP_PKEY *k = bio ? PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL) : NULL;
        BIO_free(bio);
        if (!k || SSL_CTX_use_PrivateKey(ctx, k) != 1) {
            EVP_PKEY_free(k); ssl_reason(err, errlen, "the client key"); goto fail;
        }
        EVP_PKEY_free(k);
    }
    e->ssl_ctx = ctx;
    free(e->tls_name);
    e->tls_name = strdup(name ? name : "");
    free(e->hello);
    e->hello = NULL; e->hello_len = 0;
    if (hello_len) {
        e->hello = malloc(hello_len);
        if (!e->hello) { snprintf(err, errlen, "out of memory"); goto fail; }
        memcpy(e->hello, hello, hello_len);
        e->hello_len = hello_len;
    }
    return 0;
fail:
    SSL_CTX_free(ctx);
    e->ssl_ctx = NULL;
    return -1;
}

/* Wait for fd to be ready for what the last SSL call wanted; -1 past the deadline. */
static int await_io(int fd, int want_write, int64_t deadline) {
    int64_t left = (deadline - now_ns()) / 1000000;
    if (left <= 0) return -1;
    struct pollfd p = {.fd = fd, .events = want_write ? POLLOUT : POLLIN};
    return poll(&p, 1, (int)left) > 0 ? 0 : -1;
}

/* Drive `op` (a handshake, a write, a read) until it completes; its result, or -1 with
 * `err` set. */
static int settle(SSL *ssl, int fd, int r, int64_t deadline, const char *what, char *err,
                  size_t errlen) {
    for (;;) {
        if (r > 0) return r;
        int why = SSL_get_error(ssl, r);
        if ((why == SSL_ERROR_WANT_READ || why == SSL_ERROR_WANT_WRITE)
            && await_io(fd, why == SSL_ERROR_WANT_WRITE, deadline) == 0)
            return 0;  /* try again */
        if (why == SSL_ERROR_WANT_READ || why == SSL_ERROR_WANT_WRITE) {
            snprintf(err, errlen, "%s: no answer within %d s", what, TLS_OPEN_MS / 1000);
        } else if (SSL_get_verify_result(ssl) != X509_V_OK) {
            snprintf(err, errlen, "%s: certificate verify failed: %s", what,
                     X509_verify_cert_error_string(SSL_get_verify_result(ssl)));
        } else if (why == SSL_ERROR_ZERO_RETURN || (why == SSL_ERROR_SYSCALL && !errno)) {
            snprintf(err, errlen, "%s: the server closed the connection", what);
        } else {
            ssl_reason(err, errlen, what);
        }
        return -1;
    }
}

int tls_open(Engine *e, Conn *c, int fd, char *err, size_t errlen) {
    int64_t deadline = now_ns() + (int64_t)TLS_OPEN_MS * 1000000;
    SSL *ssl = SSL_new((SSL_CTX *)e->ssl_ctx);
    if (!ssl || SSL_set_fd(ssl, fd) != 1) { ssl_reason(err, errlen, "SSL_new"); goto fail; }
    const char *name = e->tls_name;
    unsigned char addr[16];
    int is_ip = inet_pton(AF_INET, name, addr) == 1 || inet_pton(AF_INET6, name, addr) == 1;
    if (*name && !is_ip) SSL_set_tlsext_host_name(ssl, name);
    if (*name) {
        X509_VERIFY_PARAM *param = SSL_get0_param(ssl);
        if (is_ip) X509_VERIFY_PARAM_set1_ip_asc(param, name);
        else SSL_set1_host(ssl, name);
    }
    int r;
    do { r = settle(ssl, fd, SSL_connect(ssl), deadline, "TLS handshake", err, errlen); }
    while (r == 0);
    if (r < 0) goto fail;
    if (e->hello_len) {  /* the greeting (AUTH), then its one-line answer */
        size_t off = 0;
        while (off < e->hello_len) {
            do {
                r = settle(ssl, fd, SSL_write(ssl, e->hello + off, (int)(e->hello_len - off)),
                           deadline, "AUTH", err, errlen);
            } while (r == 0);
            if (r < 0) goto fail;
            off += (size_t)r;
        }
        char line[256]; size_t got = 0;
        while (got < sizeof line - 1 && !memchr(line, '\n', got)) {
            do {
                r = settle(ssl, fd, SSL_read(ssl, line + got, (int)(sizeof line - 1 - got)),
                           deadline, "AUTH", err, errlen);
            } while (r == 0);
            if (r < 0) goto fail;
            got += (size_t)r;
        }
        line[got] = 0;
        if (strncmp(line, "+OK", 3) != 0) {
            char *nl = strpbrk(line, "\r\n"); if (nl) *nl = 0;
            snprintf(err, errlen, "AUTH refused: %s", line);
            goto fail;
        }
    }
    c->ssl = ssl;
    c->tls_retry = 0;
    return 0;
fail:
    SSL_free(ssl);
    return -1;
}

void tls_close(Conn *c) {
    if (c->ssl) { SSL_free((SSL *)c->ssl); c->ssl = NULL; }
}

void tls_free_ctx(Engine *e) {
    if (e->ssl_ctx) SSL_CTX_free((SSL_CTX *)e->ssl_ctx);
    e->ssl_ctx = NULL;
    free(e->tls_name); e->tls_name = NULL;
    free(e->hello); e->hello = NULL;
}

/* An SSL call's failure as read(2) / write(2) report theirs. */
static ssize_t as_syscall(SSL *ssl, int r) {
    int why = SSL_get_error(ssl, r);
    if (why == SSL_ERROR_WANT_READ || why == SSL_ERROR_WANT_WRITE) { errno = EAGAIN; return -1; }
    if (why == SSL_ERROR_ZERO_RETURN) return 0;
    if (why == SSL_ERROR_SYSCALL && errno) return -1;
    if (why == SSL_ERROR_SYSCALL) return 0;  /* EOF without close_notify: closed */
    ERR_clear_error();
    errno = EPROTO;
    return -1;
}

ssize_t conn_read(Conn *c, void *buf, size_t n) {
    if (!c->ssl) return read(c->fd, buf, n);
    int r = SSL_read((SSL *)c->ssl, buf, n > INT32_MAX ? INT32_MAX : (int)n);
    return r > 0 ? r : as_syscall((SSL *)c->ssl, r);
}

ssize_t conn_write(Conn *c, const void *buf, size_t n) {
    if (!c->ssl) return write(c->fd, buf, n);
    /* a write OpenSSL could not finish is repeated with the same length */
    int len = c->tls_retry ? c->tls_retry : (n > 1 << 20 ? 1 << 20 : (int)n);
    int r = SSL_write((SSL *)c->ssl, buf, len);
    if (r > 0) { c->tls_retry = 0; return r; }
    ssize_t out = as_syscall((SSL *)c->ssl, r);
    if (out < 0 && errno == EAGAIN) c->tls_retry = len;
    return out;
}

int conn_pending(Conn *c) {
    return c->ssl ? SSL_pending((SSL *)c->ssl) > 0 : 0;
}

int tls_built(void) { return 1; }

#else  /* no OpenSSL headers at build time */

int tls_setup(Engine *e, const char *ca, const char *cert, const char *key,
              const char *name, int verify, const char *hello, size_t hello_len,
              char *err, size_t errlen) {
    (void)e; (void)ca; (void)cert; (void)key; (void)name; (void)verify; (void)hello;
    (void)hello_len;
    snprintf(err, errlen, "the native core was built without OpenSSL");
    return -1;
}
int tls_open(Engine *e, Conn *c, int fd, char *err, size_t errlen) {
    (void)e; (void)c; (void)fd;
    snprintf(err, errlen, "the native core was built without OpenSSL");
    return -1;
}
void tls_close(Conn *c) { (void)c; }
void tls_free_ctx(Engine *e) { (void)e; }
ssize_t conn_read(Conn *c, void *buf, size_t n) { return read(c->fd, buf, n); }
ssize_t conn_write(Conn *c, const void *buf, size_t n) { return write(c->fd, buf, n); }
int conn_pending(Conn *c) { (void)c; return 0; }
int tls_built(void) { return 0; }

#endif
