/* The native core's reply parsers: memcached text, RESP and the course KV protocol
 * (see engine.h). */
#include "engine.h"

/* ---- parsing ---------------------------------------------------------------------- */

static inline const char *find_eol(const char *p, const char *end) {
    while (p + 1 < end) {
        const char *r = memchr(p, '\r', (size_t)(end - p - 1));
        if (!r) return NULL;
        if (r[1] == '\n') return r;
        p = r + 1;
    }
    return NULL;
}

static int64_t parse_int(const char *p, const char *end, int *ok) {
    int neg = 0; int64_t v = 0;
    *ok = 0;
    if (p < end && *p == '-') { neg = 1; p++; }
    if (p >= end) return 0;
    for (; p < end; p++) {
        if (*p < '0' || *p > '9') return 0;
        v = v * 10 + (*p - '0');
    }
    *ok = 1;
    return neg ? -v : v;
}

static inline int starts(const char *p, size_t n, const char *lit) {
    size_t k = strlen(lit);
    return n >= k && memcmp(p, lit, k) == 0;
}

/* The course protocol: one line per reply, "\n" or "\r\n" ended (harness.drivers.kvtext).
 * get_success <key> <value> is R_VALUE of the value's size (the key is checked by the
 * caller: the size is what follows the first space after the key). */
static size_t parse_kvtext(const char *buf, size_t len, int *kind, int64_t *size,
                           const char **line, size_t *line_len) {
    const char *nl = memchr(buf, '\n', len);
    if (!nl) return 0;
    size_t ll = (size_t)(nl - buf);
    if (ll && buf[ll - 1] == '\r') ll--;
    *line = buf; *line_len = ll;
    if (starts(buf, ll, "get_success ")) {
        const char *sp = memchr(buf + 12, ' ', ll - 12);
        if (sp) { *kind = R_VALUE; *size = (int64_t)(ll - (size_t)(sp + 1 - buf)); }
        else *kind = R_OTHER;
    } else if (starts(buf, ll, "get_error")) {
        *kind = R_MISS;
    } else if (starts(buf, ll, "put_success") || starts(buf, ll, "put_update")) {
        *kind = R_STORED;
    } else if (starts(buf, ll, "server_not_responsible")
               || (ll == 17 && memcmp(buf, "server_write_lock", 17) == 0)
               || (ll == 14 && memcmp(buf, "server_stopped", 14) == 0)) {
        *kind = R_REFUSED;
    } else {
        *kind = R_OTHER;
    }
    return (size_t)(nl - buf) + 1;
}

/* An array of bulk strings (HMGET's, HGETALL's): R_VALUE of the sum of its elements'
 * sizes (PROTO_RESP_HASH: of every second one, the values of field/value pairs); R_MISS
 * if empty or its one element is null (no such hash or field). `ll`: its first line's
 * length. 0 if incomplete. */
static size_t parse_resp_array(int proto, const char *buf, size_t len, size_t ll, int *kind,
                               int64_t *size) {
    const char *end = buf + len;
    int ok;
    int64_t n = parse_int(buf + 1, buf + ll, &ok);
    size_t pos = ll + 2;
    *kind = R_OTHER;
    if (!ok) return pos;
    if (n <= 0) { *kind = R_MISS; return pos; }
    int64_t total = 0;
    int nulls = 0;
    for (int64_t i = 0; i < n; i++) {
        const char *eol = find_eol(buf + pos, end);
        if (!eol) return 0;
        size_t el = (size_t)(eol - (buf + pos));
        if (el < 2 || buf[pos] != '$') return pos + el + 2;  /* not bulk: R_OTHER */
        int64_t m = parse_int(buf + pos + 1, eol, &ok);
        if (!ok) return pos + el + 2;
        pos += el + 2;
        if (m < 0) { nulls++; continue; }
        if (len < pos + (size_t)m + 2) return 0;
        if (proto != PROTO_RESP_HASH || i % 2 == 1) total += m;
        pos += (size_t)m + 2;
    }
    *kind = n == 1 && nulls == 1 ? R_MISS : R_VALUE;
    *size = total;
    return pos;
}

/* One reply at buf[0..len): its kind, its value size (R_VALUE) and its length in bytes;
 * 0 if incomplete. `line`/`line_len`: the reply's first line, for error messages. */
size_t parse_reply(int proto, const char *buf, size_t len, int *kind, int64_t *size,
                          const char **line, size_t *line_len) {
    const char *end = buf + len;
    const char *eol = find_eol(buf, end);
    if (!eol) return 0;
    size_t ll = (size_t)(eol - buf);
    *line = buf; *line_len = ll;
    int ok;
    if (proto == PROTO_MEMCACHE) {
        if (ll >= 6 && memcmp(buf, "VALUE ", 6) == 0) {
            /* "VALUE <key> <flags> <bytes>": the size is the last field */
            const char *sp = eol;
            while (sp > buf && sp[-1] != ' ') sp--;
            int64_t n = parse_int(sp, eol, &ok);
            if (!ok || n < 0) { *kind = R_OTHER; return ll + 2; }
            size_t total = ll + 2 + (size_t)n + 7;  /* data, "\r\n", "END\r\n" */
            if (len < total) return 0;
            *kind = R_VALUE; *size = n;
            return total;
        }
        if (ll == 3 && memcmp(buf, "END", 3) == 0) *kind = R_MISS;
        else if (ll == 6 && memcmp(buf, "STORED", 6) == 0) *kind = R_STORED;
        /* a replace of a key that is not there (ycsb's update): a miss, as in Python */
        else if (ll == 10 && memcmp(buf, "NOT_STORED", 10) == 0) *kind = R_MISS;
        else *kind = R_OTHER;
        return ll + 2;
    }
    if (proto == PROTO_KVTEXT) return parse_kvtext(buf, len, kind, size, line, line_len);
    /* RESP */
    if (ll >= 1 && buf[0] == '$') {
        int64_t n = parse_int(buf + 1, eol, &ok);
        if (!ok) { *kind = R_OTHER; return ll + 2; }
        if (n < 0) { *kind = R_MISS; return ll + 2; }
        size_t total = ll + 2 + (size_t)n + 2;
        if (len < total) return 0;
        *kind = R_VALUE; *size = n;
        return total;
    }
    if (ll >= 1 && buf[0] == '*') return parse_resp_array(proto, buf, len, ll, kind, size);
    if (ll == 3 && memcmp(buf, "+OK", 3) == 0) *kind = R_STORED;
    else *kind = R_OTHER;  /* an error, an integer: not a GET/SET reply here */
    return ll + 2;
}

const char *server_name(const Engine *e) {
    return e->proto == PROTO_MEMCACHE ? "memcached"
         : e->proto == PROTO_RESP || e->proto == PROTO_RESP_HASH ? "redis" : "the kv server";
}

/* Does the get_success line name the key op `seq` asked for? (its request is
 * "get <key>\r\n"; the Python client checks the same) */
int same_key(const Engine *e, int64_t seq, const char *line, size_t line_len, int64_t size) {
    Py_ssize_t k = (Py_ssize_t)(seq % e->nkeys);
    const char *req = e->gets + e->get_off[k] + 4;
    size_t klen = e->get_off[k + 1] - e->get_off[k] - 6;
    return line_len == 12 + klen + 1 + (size_t)size && memcmp(line + 12, req, klen) == 0;
}

void describe(const Engine *e, char *msg, const char *line, size_t line_len, int get) {
    char shown[96];
    size_t k = 0;
    for (size_t j = 0; j < line_len && k + 4 < sizeof shown; j++) {
        unsigned char ch = (unsigned char)line[j];
        if (ch >= 32 && ch < 127 && ch != '\'' && ch != '\\') shown[k++] = (char)ch;
        else k += (size_t)snprintf(shown + k, sizeof shown - k, "\\x%02x", ch);
    }
    shown[k] = 0;
    snprintf(msg, MSG_LEN, "%s answered b'%s' to %s", server_name(e), shown,
             get ? "get" : "set");
}
