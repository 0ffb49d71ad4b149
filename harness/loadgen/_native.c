/* The load generator's native core: the per-connection send / receive / parse / record
 * loop of harness.loadgen.native, for the memcached text protocol, RESP and the course
 * KV protocol (one socket per server in each connection, ops routed by key; what the
 * core cannot settle, a refusal or a lost server, goes back to Python: the slow path).
 *
 * One Engine owns the hot path of one client process: an epoll loop over its
 * connections (file descriptors of asyncio transports whose reading is paused), run in a
 * thread without the GIL by `Engine.run`. Every op, success or failure, becomes a record
 * written straight into the Recorder's int64 columns. It returns to Python only for the
 * slow path: a connection failed (Python backs off and reconnects), the columns are full
 * (Python grows them), the open-loop schedule needs its next chunk, or the run is over.
 * Python talks to a running engine through a small command queue (attach a connection,
 * a failed reconnect, stop) and an eventfd that wakes it.
 *
 * Semantics follow the Python batched pipe (harness.loadgen.fastpaths._pipe): the replies
 * one read brings share their arrival time and are replaced in one write; a failure (an
 * unexpected reply, a timeout, a lost connection) fails every op in flight on that
 * connection (the oldest TIMEOUT on a timeout, the rest ERROR) and the connection is
 * handed back to Python. Open loop: an op is sent when its intended start has come and a
 * slot (connections x depth) is free; a timerfd wakes the loop SPIN_NS before it, and
 * the loop polls (epoll_wait with no timeout) through the rest.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/timerfd.h>

/* Open loop: the last 200 us before an intended start are polled, not slept, because a
 * timerfd wakes 30-150 us late even on an idle core (1 ns timer slack or not); polling
 * keeps the send within a few us of schedule, at the price of a busy client CPU when ops
 * are less than 200 us apart. Ops already due but without a free slot wait on epoll. */
#define SPIN_NS 200000LL
#include <time.h>
#include <unistd.h>

enum { PROTO_MEMCACHE = 0, PROTO_RESP = 1, PROTO_KVTEXT = 2 };
/* What one reply is, across protocols. R_REFUSED: the course protocol's refusals
 * (server_not_responsible, server_write_lock, server_stopped), which Python follows. */
enum { R_VALUE, R_MISS, R_STORED, R_OTHER, R_REFUSED };
/* What Engine.run returns (a bit set). EV_SLOW: ops wait for Python (take_slow). */
enum { EV_DONE = 1, EV_FAILED = 2, EV_FULL = 4, EV_TICKETS = 8, EV_SLOW = 16 };
/* Why a connection failed (Python makes the exception). */
enum { F_REPLY = 0, F_TIMEOUT = 1, F_LOST = 2 };
/* Why an op went to Python's slow path (routed protocols only). */
enum { WHY_REFUSED = 0, WHY_LOST = 1, WHY_NO_SOCKET = 2 };
enum { CMD_ATTACH = 0, CMD_CONNECT_FAILED = 1, CMD_RECORD = 2 };
/* CMD_ATTACH flags: the group's last socket; CMD_RECORD flags: */
enum { ATTACH_LAST = 1, REC_RELEASE = 1, REC_FAILURE = 2 };

#define MAX_CMDS 8192  /* slow-path records come through here too */
#define MSG_LEN 160
#define TAG_EVENT (-1)
#define TAG_TIMER (-2)

typedef struct {
    int fd;        /* -1: no connection */
    char *in;
    size_t in_len, in_cap;
    char *out;
    size_t out_len, out_off, out_cap;
    int want_out;
    /* ops in flight, oldest first, a ring of `depth` */
    int64_t *q_seq, *q_t0, *q_int;
    int q_head, q_count;
} Conn;

typedef struct { int kind, conn, flags; int64_t fd_or_t0, t1, seq, code, intended; } Cmd;
typedef struct { int conn, kind; char msg[MSG_LEN]; } Failure;
/* An op handed to Python: its group, why, its times, the refusal's line. */
typedef struct { int group, why; int64_t seq, t0, t1, intended; char *line; size_t len; } Slow;

typedef struct {
    PyObject_HEAD
    /* Sockets come in groups, one group per connection of the run (the slots of
     * `depth` ops in flight are the group's): a group of `S` sockets, one per server,
     * for a routed protocol (an op goes to the socket of its key's server, `routes`),
     * else of one. Socket ci belongs to group ci / S. */
    int proto, nconns, depth, S, ngroups;
    Conn *conns;
    int *g_count;  /* ops in flight per group, those with Python's slow path included */
    int *g_up;     /* the group is attached */
    uint8_t *routes, *routes_pending;  /* per key entry: its server (>= S: no socket) */
    const uint32_t *set_size;  /* per key entry: the set's value size, or NULL */
    Slow *slow; int nslow;
    /* ops: op code per seq (mod pattern length), the get op's code, requests per key pick */
    const uint8_t *pattern; Py_ssize_t pattern_len;
    int get_op;
    const char *gets, *sets, *tail;
    Py_ssize_t tail_len;
    const uint32_t *get_off, *set_off;
    Py_ssize_t nkeys;
    PyObject *keep; /* the objects the pointers above point into */
    /* outcome codes (harness.results.outcome) */
    int64_t hit, miss, set_ok, err, timeout_code, warm_flag;
    int bytes_shift;
    /* limits */
    int64_t seq, last, stop_ns, warm_ops, timeout_ns;
    int64_t max_consec;
    /* failure accounting, as ClientRun._count_failure */
    int64_t failures, served_at, consec;
    int aborted, stopping;
    volatile int stop_flag;
    /* open loop: intended starts (absolute ns) of seqs tk_first.. */
    int open_loop;
    int64_t *tk; Py_ssize_t tk_n, tk_pos; int64_t tk_first; int tk_last;
    int64_t timer_at;
    /* records: the Recorder's columns during a run */
    int64_t *c_start, *c_end, *c_out, *c_int;
    int64_t n, cap;
    /* `n` as published to other threads (Engine.published): stored with release order
     * once per pass of the loop, not per op, so a reader that loads it with acquire
     * order may read every record below it while the loop writes the next ones. */
    int64_t published;
    int inflight;
    int epfd, evfd, tmfd;
    pthread_mutex_t lock;
    Cmd cmds[MAX_CMDS]; int ncmds;
    Failure *failed; int nfailed;
    int running;
} Engine;

static inline int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);  /* time.perf_counter_ns's clock on Linux */
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int grow_buf(char **buf, size_t *cap, size_t need) {
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 4096;
    while (c < need) c *= 2;
    char *p = realloc(*buf, c);
    if (!p) return -1;
    *buf = p; *cap = c;
    return 0;
}

/* ---- records and failure accounting ---------------------------------------------- */

static inline void record(Engine *e, int64_t seq, int64_t t0, int64_t t1, int64_t code,
                          int64_t intended) {
    int64_t i = e->n++;
    e->c_start[i] = t0;
    e->c_end[i] = t1;
    e->c_out[i] = seq < e->warm_ops ? code | e->warm_flag : code;
    if (e->open_loop) e->c_int[i] = intended;
}

static inline int op_of(Engine *e, int64_t seq) {
    return e->pattern[seq % e->pattern_len];
}

static void count_failure(Engine *e) {
    e->failures++;
    int64_t served = e->n - e->failures;
    if (served != e->served_at) { e->served_at = served; e->consec = 0; }
    if (++e->consec >= e->max_consec) { e->aborted = 1; e->stopping = 1; }
}

static void add_failure(Engine *e, int conn, int kind, const char *msg) {
    Failure *f = &e->failed[e->nfailed++];
    f->conn = conn; f->kind = kind;
    snprintf(f->msg, MSG_LEN, "%s", msg);
}

/* The oldest op in flight on socket ci leaves its queue (still counted in flight). */
static inline int pop_oldest(Engine *e, Conn *c) {
    int h = c->q_head;
    c->q_head = (h + 1) % e->depth;
    c->q_count--;
    return h;
}

static inline void done_op(Engine *e, int ci) {
    e->g_count[ci / e->S]--;
    e->inflight--;
}

static void drop_socket(Engine *e, Conn *c) {
    if (c->fd >= 0) epoll_ctl(e->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    c->fd = -1;
    c->in_len = c->out_len = c->out_off = 0;
    c->want_out = 0;
}

/* Every op in flight on group g's sockets failed: the oldest with `first`, the rest
 * ERROR; the group leaves the loop and goes back to Python (which reconnects it). */
static void fail_group(Engine *e, int g, int64_t first, int kind, const char *msg,
                       int64_t t1) {
    int64_t status = first;
    for (int ci = g * e->S; ci < (g + 1) * e->S; ci++) {
        Conn *c = &e->conns[ci];
        while (c->q_count) {
            int h = pop_oldest(e, c);
            int64_t seq = c->q_seq[h];
            record(e, seq, c->q_t0[h], t1, status | op_of(e, seq), c->q_int[h]);
            count_failure(e);
            status = e->err;
            done_op(e, ci);
        }
        drop_socket(e, c);
    }
    e->g_up[g] = 0;
    add_failure(e, g, kind, msg);
}

static inline void fail_conn(Engine *e, int ci, int64_t first, int kind, const char *msg,
                             int64_t t1) {
    fail_group(e, ci / e->S, first, kind, msg, t1);
}

/* Op `seq` goes to Python's slow path (routed protocols): it stays counted in flight
 * (its group's slot is taken) until Python records it (Engine.record, release). */
static void hand_slow(Engine *e, int g, int64_t seq, int64_t t0, int64_t t1,
                      int64_t intended, int why, const char *line, size_t len) {
    Slow *sl = &e->slow[e->nslow++];
    sl->group = g; sl->why = why; sl->seq = seq; sl->t0 = t0; sl->t1 = t1;
    sl->intended = intended;
    sl->line = NULL; sl->len = 0;
    if (len && (sl->line = malloc(len))) { memcpy(sl->line, line, len); sl->len = len; }
}

/* A routed protocol's socket was lost: its ops in flight go to the slow path (Python
 * retries them at their server, as its own client does), the others' keep going. */
static void lose_socket(Engine *e, int ci, int64_t t1) {
    Conn *c = &e->conns[ci];
    while (c->q_count) {
        int h = pop_oldest(e, c);
        hand_slow(e, ci / e->S, c->q_seq[h], c->q_t0[h], t1, c->q_int[h], WHY_LOST, NULL, 0);
    }
    drop_socket(e, c);
}

/* A socket failed (a write or read error, the server closed it). */
static void socket_failed(Engine *e, int ci, const char *msg, int64_t t1) {
    if (e->routes) lose_socket(e, ci, t1);
    else fail_conn(e, ci, e->err, F_LOST, msg, t1);
}

/* ---- sending ---------------------------------------------------------------------- */

static int append_request(Engine *e, Conn *c, int64_t seq) {
    Py_ssize_t k = (Py_ssize_t)(seq % e->nkeys);
    const char *src; size_t len;
    int get = op_of(e, seq) == e->get_op;
    if (get) { src = e->gets + e->get_off[k]; len = e->get_off[k + 1] - e->get_off[k]; }
    else { src = e->sets + e->set_off[k]; len = e->set_off[k + 1] - e->set_off[k]; }
    size_t need = c->out_len + len + (get ? 0 : (size_t)e->tail_len);
    if (grow_buf(&c->out, &c->out_cap, need) < 0) return -1;
    memcpy(c->out + c->out_len, src, len);
    c->out_len += len;
    if (!get) { memcpy(c->out + c->out_len, e->tail, e->tail_len); c->out_len += e->tail_len; }
    return 0;
}

static void push(Engine *e, int ci, int64_t seq, int64_t t0, int64_t intended) {
    Conn *c = &e->conns[ci];
    int t = (c->q_head + c->q_count) % e->depth;
    c->q_seq[t] = seq; c->q_t0[t] = t0; c->q_int[t] = intended;
    c->q_count++;
    e->g_count[ci / e->S]++;
    e->inflight++;
}

/* The socket of group g for op `seq`, or -1: its server has no socket here (the slow
 * path then). */
static inline int target(Engine *e, int g, int64_t seq) {
    if (!e->routes) return g;
    int r = e->routes[seq % e->nkeys];
    if (r >= e->S) return -1;
    int ci = g * e->S + r;
    return e->conns[ci].fd >= 0 ? ci : -1;
}

static void set_out_interest(Engine *e, Conn *c, int ci, int want) {
    if (c->want_out == want) return;
    struct epoll_event ev = {.events = EPOLLIN | (want ? EPOLLOUT : 0), .data.u64 = (uint64_t)ci};
    epoll_ctl(e->epfd, EPOLL_CTL_MOD, c->fd, &ev);
    c->want_out = want;
}

/* Write what is queued; 0, or -1 if the connection failed (already handled). */
static int flush(Engine *e, int ci) {
    Conn *c = &e->conns[ci];
    while (c->out_off < c->out_len) {
        ssize_t w = write(c->fd, c->out + c->out_off, c->out_len - c->out_off);
        if (w > 0) { c->out_off += (size_t)w; continue; }
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            set_out_interest(e, c, ci, 1);
            return 0;
        }
        char msg[MSG_LEN];
        snprintf(msg, MSG_LEN, "[Errno %d] %s", errno, strerror(errno));
        socket_failed(e, ci, msg, now_ns());
        return -1;
    }
    c->out_off = c->out_len = 0;
    set_out_interest(e, c, ci, 0);
    return 0;
}

/* Closed loop: may another op start now? Takes its seq if so. */
static inline int take_closed(Engine *e, int64_t t, int64_t *seq) {
    if (e->stopping || e->seq >= e->last || t >= e->stop_ns) return 0;
    *seq = e->seq++;
    return 1;
}

/* Send the sockets' queued requests (those not waiting for EPOLLOUT). */
static void flush_group(Engine *e, int g) {
    for (int ci = g * e->S; ci < (g + 1) * e->S; ci++) {
        Conn *c = &e->conns[ci];
        if (c->fd >= 0 && !c->want_out && c->out_len > c->out_off && flush(e, ci) < 0
            && !e->g_up[g])
            return;  /* the group failed */
    }
}

/* Op `seq` starts on group g at t0: queued on its socket, or handed to the slow path. */
static int start_op(Engine *e, int g, int64_t seq, int64_t t0, int64_t intended) {
    int ci = target(e, g, seq);
    if (ci < 0) {
        e->g_count[g]++;
        e->inflight++;
        hand_slow(e, g, seq, t0, t0, intended, WHY_NO_SOCKET, NULL, 0);
        return 0;
    }
    if (append_request(e, &e->conns[ci], seq) < 0) return -1;
    push(e, ci, seq, t0, intended);
    return 0;
}

static void refill_closed(Engine *e, int g) {
    if (!e->g_up[g] || e->g_count[g] >= e->depth) return;
    int64_t t0 = now_ns(), seq;
    while (e->g_count[g] < e->depth && take_closed(e, t0, &seq)) {
        if (start_op(e, g, seq, t0, 0) < 0) { e->seq--; break; }
    }
    flush_group(e, g);
}

/* Open loop: start every due op that has a free slot, round robin over connections. */
static void dispatch_open(Engine *e) {
    if (e->stopping || e->tk_pos >= e->tk_n) return;
    int64_t t0 = now_ns();
    if (t0 >= e->stop_ns) return;
    int start = 0;
    while (e->tk_pos < e->tk_n && e->tk[e->tk_pos] <= t0) {
        int found = -1;
        for (int k = 0; k < e->ngroups; k++) {
            int g = (start + k) % e->ngroups;
            if (e->g_up[g] && e->g_count[g] < e->depth) { found = g; break; }
        }
        if (found < 0) break;  /* every slot busy: the op waits, and its latency shows it */
        int64_t seq = e->tk_first + e->tk_pos;
        if (start_op(e, found, seq, t0, e->tk[e->tk_pos]) < 0) break;
        e->tk_pos++;
        start = found + 1;
        flush_group(e, found);
    }
}

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

/* One reply at buf[0..len): its kind, its value size (R_VALUE) and its length in bytes;
 * 0 if incomplete. `line`/`line_len`: the reply's first line, for error messages. */
static size_t parse_reply(int proto, const char *buf, size_t len, int *kind, int64_t *size,
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
    if (ll == 3 && memcmp(buf, "+OK", 3) == 0) *kind = R_STORED;
    else *kind = R_OTHER;  /* an error, an integer, an array: not a GET/SET reply here */
    return ll + 2;
}

static const char *server_name(Engine *e) {
    return e->proto == PROTO_MEMCACHE ? "memcached"
         : e->proto == PROTO_RESP ? "redis" : "the kv server";
}

/* Does the get_success line name the key op `seq` asked for? (its request is
 * "get <key>\r\n"; the Python client checks the same) */
static int same_key(Engine *e, int64_t seq, const char *line, size_t line_len, int64_t size) {
    Py_ssize_t k = (Py_ssize_t)(seq % e->nkeys);
    const char *req = e->gets + e->get_off[k] + 4;
    size_t klen = e->get_off[k + 1] - e->get_off[k] - 6;
    return line_len == 12 + klen + 1 + (size_t)size && memcmp(line + 12, req, klen) == 0;
}

static void describe(Engine *e, char *msg, const char *line, size_t line_len, int get) {
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

/* ---- reading ---------------------------------------------------------------------- */

static void on_readable(Engine *e, int ci) {
    Conn *c = &e->conns[ci];
    if (grow_buf(&c->in, &c->in_cap, c->in_len + 65536) < 0) return;
    ssize_t r = read(c->fd, c->in + c->in_len, c->in_cap - c->in_len);
    int64_t t1 = now_ns();
    if (r == 0) {
        char msg[MSG_LEN];
        snprintf(msg, MSG_LEN, "%s closed the connection", server_name(e));
        socket_failed(e, ci, msg, t1);
        return;
    }
    if (r < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return;
        char msg[MSG_LEN];
        snprintf(msg, MSG_LEN, "[Errno %d] %s", errno, strerror(errno));
        socket_failed(e, ci, msg, t1);
        return;
    }
    c->in_len += (size_t)r;
    size_t pos = 0;
    int done = 0;
    while (c->q_count) {
        int kind; int64_t size = 0; const char *line; size_t line_len;
        size_t used = parse_reply(e->proto, c->in + pos, c->in_len - pos, &kind, &size,
                                  &line, &line_len);
        if (!used) break;
        int h = c->q_head;
        int64_t seq = c->q_seq[h];
        int op = op_of(e, seq);
        int get = op == e->get_op;
        int64_t code;
        if (kind == R_REFUSED) {  /* Python follows it (routes, back-off) and records */
            pop_oldest(e, c);
            hand_slow(e, ci / e->S, seq, c->q_t0[h], t1, c->q_int[h], WHY_REFUSED, line,
                      line_len);
            pos += used;
            continue;
        }
        if (get && kind == R_VALUE && (e->proto != PROTO_KVTEXT
                                       || same_key(e, seq, line, line_len, size)))
            code = e->hit | (size << e->bytes_shift);
        else if (get && kind == R_MISS) code = e->miss;
        else if (!get && kind == R_STORED)
            code = e->set_size ? e->set_ok | ((int64_t)e->set_size[seq % e->nkeys]
                                               << e->bytes_shift)
                               : e->set_ok;
        else if (!get && e->proto == PROTO_KVTEXT) code = e->err;  /* put_error: a status */
        else {
            char msg[MSG_LEN];
            describe(e, msg, line, line_len, get);
            fail_conn(e, ci, e->err, F_REPLY, msg, t1);  /* records this op and the rest */
            return;
        }
        record(e, seq, c->q_t0[h], t1, code | op, c->q_int[h]);
        pop_oldest(e, c);
        done_op(e, ci);
        pos += used;
        done++;
    }
    if (pos) {
        memmove(c->in, c->in + pos, c->in_len - pos);
        c->in_len -= pos;
    }
    if (done && !e->open_loop) refill_closed(e, ci / e->S);
}

/* ---- commands from Python ---------------------------------------------------------- */

/* Socket ci is fd (-1: none, its server's ops take the slow path). */
static int attach(Engine *e, int ci, int fd) {
    Conn *c = &e->conns[ci];
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (uint64_t)ci};
    if (fd >= 0 && epoll_ctl(e->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) return -1;
    c->fd = fd;
    c->in_len = c->out_len = c->out_off = 0;
    c->q_head = c->q_count = 0;
    c->want_out = 0;
    return 0;
}

/* Records the commands may still write before the columns must grow: the loop keeps
 * room for every op in flight to be recorded twice over (replies, then failures). */
static inline int64_t reserve(Engine *e) { return 2 * (int64_t)e->nconns * e->depth + 2; }

static void run_commands(Engine *e) {
    pthread_mutex_lock(&e->lock);
    if (e->routes_pending) {  /* Python learnt a new ring */
        free(e->routes);
        e->routes = e->routes_pending;
        e->routes_pending = NULL;
    }
    int k = 0;
    for (; k < e->ncmds && e->cap - e->n > reserve(e); k++) {
        Cmd m = e->cmds[k];
        if (m.kind == CMD_ATTACH) {
            int g = m.conn / e->S;
            if (attach(e, m.conn, (int)m.fd_or_t0) < 0) {
                char msg[MSG_LEN];
                snprintf(msg, MSG_LEN, "[Errno %d] %s", errno, strerror(errno));
                for (int ci = g * e->S; ci < (g + 1) * e->S; ci++) drop_socket(e, &e->conns[ci]);
                add_failure(e, g, F_LOST, msg);
            } else if (m.flags & ATTACH_LAST) {
                e->g_up[g] = 1;
                if (!e->open_loop) refill_closed(e, g);
            }
            continue;
        }
        if (m.kind == CMD_RECORD) {  /* Python's record of an op of the slow path */
            record(e, m.seq, m.fd_or_t0, m.t1, m.code, m.intended);
            if (m.flags & REC_FAILURE) count_failure(e);
            if (m.flags & REC_RELEASE) {
                e->g_count[m.conn]--;
                e->inflight--;
                if (!e->open_loop) refill_closed(e, m.conn);
            }
            continue;
        }
        /* a failed reconnect is the failure of the op it was for */
        int64_t seq = -1, intended = 0;
        if (!e->open_loop) {
            if (!take_closed(e, m.fd_or_t0, &seq)) seq = -1;
        } else if (!e->stopping && e->tk_pos < e->tk_n && e->tk[e->tk_pos] <= m.t1
                   && m.fd_or_t0 < e->stop_ns) {
            seq = e->tk_first + e->tk_pos;
            intended = e->tk[e->tk_pos++];
        }
        if (seq >= 0) {
            record(e, seq, m.fd_or_t0, m.t1, e->err | op_of(e, seq), intended);
            count_failure(e);
        }
    }
    /* what did not fit waits for the columns to grow */
    memmove(e->cmds, e->cmds + k, sizeof(Cmd) * (size_t)(e->ncmds - k));
    e->ncmds -= k;
    pthread_mutex_unlock(&e->lock);
}

/* ---- the loop ---------------------------------------------------------------------- */

static int no_more_ops(Engine *e, int64_t t) {
    if (e->stopping || t >= e->stop_ns) return 1;
    if (!e->open_loop) return e->seq >= e->last;
    return e->tk_last && e->tk_pos >= e->tk_n;
}

static int loop(Engine *e) {
    struct epoll_event evs[256];
    for (;;) {
        __atomic_store_n(&e->published, e->n, __ATOMIC_RELEASE);
        if (e->stop_flag) e->stopping = 1;
        int64_t t = now_ns();
        if (e->cap - e->n <= reserve(e)) return EV_FULL;
        run_commands(e);
        if (e->nfailed) return EV_FAILED | (e->nslow ? EV_SLOW : 0);
        if (e->nslow) return EV_SLOW;
        if (e->open_loop) {
            dispatch_open(e);
            if (e->nfailed) return EV_FAILED | (e->nslow ? EV_SLOW : 0);
            if (e->nslow) return EV_SLOW;
            if (!e->tk_last && e->tk_pos >= e->tk_n && !e->stopping) return EV_TICKETS;
        }
        if (e->inflight == 0 && no_more_ops(e, t)) return EV_DONE;
        /* how long to wait: the oldest op's deadline, the next intended start */
        int64_t wait_ns = 100000000;
        if (e->timeout_ns) {
            for (int ci = 0; ci < e->nconns; ci++) {
                Conn *c = &e->conns[ci];
                if (c->fd >= 0 && c->q_count) {
                    int64_t left = c->q_t0[c->q_head] + e->timeout_ns - t;
                    if (left < wait_ns) wait_ns = left;
                }
            }
        }
        int poll_only = 0;
        if (e->open_loop && !e->stopping && e->tk_pos < e->tk_n) {
            int64_t next = e->tk[e->tk_pos];
            if (next > t && next - t <= SPIN_NS) {
                poll_only = 1;
            } else if (next > t && next - SPIN_NS != e->timer_at) {
                int64_t at = next - SPIN_NS;
                struct itimerspec its = {{0, 0}, {at / 1000000000LL, at % 1000000000LL}};
                timerfd_settime(e->tmfd, TFD_TIMER_ABSTIME, &its, NULL);
                e->timer_at = at;
            }
        }
        int nev = 0;
        if (wait_ns > 0) {
            int ms = poll_only ? 0 : (int)((wait_ns + 999999) / 1000000);
            nev = epoll_wait(e->epfd, evs, 256, ms);
            if (nev < 0 && errno != EINTR) return -1;
        }
        for (int j = 0; j < nev; j++) {
            if (evs[j].data.u64 == (uint64_t)TAG_EVENT) {
                uint64_t v; ssize_t rr = read(e->evfd, &v, sizeof v); (void)rr;
                continue;  /* commands run at the top of the loop */
            }
            if (evs[j].data.u64 == (uint64_t)TAG_TIMER) {
                uint64_t v; ssize_t rr = read(e->tmfd, &v, sizeof v); (void)rr;
                e->timer_at = 0;
                continue;
            }
            int ci = (int)evs[j].data.u64;
            Conn *c = &e->conns[ci];
            if (c->fd < 0) continue;  /* failed earlier in this batch */
            if (evs[j].events & EPOLLOUT) {
                if (flush(e, ci) < 0) continue;
            }
            if (evs[j].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) on_readable(e, ci);
            /* an op due while this batch of events is handled goes out now, not after it */
            if (e->open_loop && e->tk_pos < e->tk_n && e->tk[e->tk_pos] <= now_ns())
                dispatch_open(e);
        }
        if (e->timeout_ns) {
            int64_t t1 = now_ns();
            for (int ci = 0; ci < e->nconns; ci++) {
                Conn *c = &e->conns[ci];
                if (c->fd >= 0 && c->q_count && c->q_t0[c->q_head] + e->timeout_ns <= t1) {
                    char msg[MSG_LEN];
                    snprintf(msg, MSG_LEN, "no reply within %g s", (double)e->timeout_ns / 1e9);
                    fail_conn(e, ci, e->timeout_code, F_TIMEOUT, msg, t1);
                }
            }
        }
    }
}

/* ---- the Python type --------------------------------------------------------------- */

static int get_col(PyObject *obj, Py_buffer *view, int64_t **ptr, Py_ssize_t *len) {
    if (PyObject_GetBuffer(obj, view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) return -1;
    if (view->itemsize != 8) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_TypeError, "record columns must hold 8-byte integers");
        return -1;
    }
    *ptr = (int64_t *)view->buf;
    *len = view->len / 8;
    return 0;
}

static PyObject *Engine_run(Engine *e, PyObject *args) {
    PyObject *cols[4];
    long long n;
    if (!PyArg_ParseTuple(args, "OOOOL", &cols[0], &cols[1], &cols[2], &cols[3], &n))
        return NULL;
    if (e->running) { PyErr_SetString(PyExc_RuntimeError, "engine already running"); return NULL; }
    Py_buffer views[4];
    int64_t *ptrs[4];
    Py_ssize_t lens[4];
    int k;
    for (k = 0; k < 4; k++) {
        if (get_col(cols[k], &views[k], &ptrs[k], &lens[k]) < 0) {
            while (k--) PyBuffer_Release(&views[k]);
            return NULL;
        }
    }
    e->c_start = ptrs[0]; e->c_end = ptrs[1]; e->c_out = ptrs[2]; e->c_int = ptrs[3];
    e->cap = lens[0];
    for (k = 1; k < 4; k++) if (lens[k] < e->cap) e->cap = lens[k];
    e->n = n;
    __atomic_store_n(&e->published, n, __ATOMIC_RELEASE);
    e->running = 1;
    int ev;
    Py_BEGIN_ALLOW_THREADS
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);  /* open loop wakes within us, not 50 us */
    ev = loop(e);
    __atomic_store_n(&e->published, e->n, __ATOMIC_RELEASE);
    Py_END_ALLOW_THREADS
    e->running = 0;
    for (k = 0; k < 4; k++) PyBuffer_Release(&views[k]);
    e->c_start = e->c_end = e->c_out = e->c_int = NULL;
    if (ev < 0) return PyErr_SetFromErrno(PyExc_OSError);
    return PyLong_FromLong(ev);
}

/* Queue commands for the loop, all or none, under one lock (a group's sockets arrive
 * together). */
static int push_cmds(Engine *e, const Cmd *cmds, int n) {
    pthread_mutex_lock(&e->lock);
    if (e->ncmds + n > MAX_CMDS) {
        pthread_mutex_unlock(&e->lock);
        PyErr_SetString(PyExc_RuntimeError, "engine command queue full");
        return -1;
    }
    for (int j = 0; j < n; j++) e->cmds[e->ncmds++] = cmds[j];
    pthread_mutex_unlock(&e->lock);
    uint64_t one = 1;
    ssize_t w = write(e->evfd, &one, sizeof one); (void)w;
    return 0;
}

static PyObject *Engine_attach(Engine *e, PyObject *args) {
    int g; PyObject *fds;
    if (!PyArg_ParseTuple(args, "iO", &g, &fds)) return NULL;
    if (g < 0 || g >= e->ngroups) return PyErr_Format(PyExc_IndexError, "no connection %d", g);
    PyObject *seq = PySequence_Fast(fds, "fds must be a sequence");
    if (!seq) return NULL;
    if (PySequence_Fast_GET_SIZE(seq) != e->S) {
        Py_DECREF(seq);
        return PyErr_Format(PyExc_ValueError, "%d sockets per connection, not %zd", e->S,
                            PySequence_Fast_GET_SIZE(seq));
    }
    Cmd cmds[256];
    for (int j = 0; j < e->S; j++) {
        long fd = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, j));
        if (fd == -1 && PyErr_Occurred()) { Py_DECREF(seq); return NULL; }
        cmds[j] = (Cmd){.kind = CMD_ATTACH, .conn = g * e->S + j, .fd_or_t0 = fd,
                        .flags = j == e->S - 1 ? ATTACH_LAST : 0};
    }
    Py_DECREF(seq);
    if (push_cmds(e, cmds, e->S) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *Engine_connect_failed(Engine *e, PyObject *args) {
    int g; long long t0, t1;
    if (!PyArg_ParseTuple(args, "iLL", &g, &t0, &t1)) return NULL;
    Cmd cmd = {.kind = CMD_CONNECT_FAILED, .conn = g, .fd_or_t0 = t0, .t1 = t1};
    if (push_cmds(e, &cmd, 1) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *Engine_record(Engine *e, PyObject *args) {
    int g, release, failure; long long seq, t0, t1, code, intended;
    if (!PyArg_ParseTuple(args, "iLLLLLpp", &g, &seq, &t0, &t1, &code, &intended, &release,
                          &failure))
        return NULL;
    if (g < 0 || g >= e->ngroups) return PyErr_Format(PyExc_IndexError, "no connection %d", g);
    Cmd cmd = {.kind = CMD_RECORD, .conn = g, .seq = seq, .fd_or_t0 = t0, .t1 = t1,
               .code = code, .intended = intended,
               .flags = (release ? REC_RELEASE : 0) | (failure ? REC_FAILURE : 0)};
    if (push_cmds(e, &cmd, 1) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *Engine_set_routes(Engine *e, PyObject *args) {
    const char *buf; Py_ssize_t len;
    if (!PyArg_ParseTuple(args, "y#", &buf, &len)) return NULL;
    if (!e->routes) { PyErr_SetString(PyExc_ValueError, "not a routed protocol"); return NULL; }
    if (len != e->nkeys) return PyErr_Format(PyExc_ValueError, "%zd routes for %zd keys", len, e->nkeys);
    uint8_t *copy = malloc((size_t)len);
    if (!copy) return PyErr_NoMemory();
    memcpy(copy, buf, (size_t)len);
    pthread_mutex_lock(&e->lock);
    free(e->routes_pending);
    e->routes_pending = copy;
    pthread_mutex_unlock(&e->lock);
    uint64_t one = 1;
    ssize_t w = write(e->evfd, &one, sizeof one); (void)w;
    Py_RETURN_NONE;
}

static PyObject *Engine_take_slow(Engine *e, PyObject *Py_UNUSED(ignored)) {
    if (e->running) { PyErr_SetString(PyExc_RuntimeError, "engine running"); return NULL; }
    PyObject *out = PyList_New(e->nslow);
    if (!out) return NULL;
    for (int j = 0; j < e->nslow; j++) {
        Slow *sl = &e->slow[j];
        PyObject *item = Py_BuildValue("(iLLLLiy#)", sl->group, (long long)sl->seq,
                                       (long long)sl->t0, (long long)sl->t1,
                                       (long long)sl->intended, sl->why,
                                       sl->line ? sl->line : "", (Py_ssize_t)sl->len);
        if (!item) { Py_DECREF(out); return NULL; }
        PyList_SET_ITEM(out, j, item);
    }
    for (int j = 0; j < e->nslow; j++) free(e->slow[j].line);
    e->nslow = 0;
    return out;
}

static PyObject *Engine_stop(Engine *e, PyObject *Py_UNUSED(ignored)) {
    e->stop_flag = 1;
    uint64_t one = 1;
    ssize_t w = write(e->evfd, &one, sizeof one); (void)w;
    Py_RETURN_NONE;
}

static PyObject *Engine_take_failed(Engine *e, PyObject *Py_UNUSED(ignored)) {
    PyObject *out = PyList_New(e->nfailed);
    if (!out) return NULL;
    for (int j = 0; j < e->nfailed; j++) {
        PyObject *item = Py_BuildValue("(iis)", e->failed[j].conn, e->failed[j].kind,
                                       e->failed[j].msg);
        if (!item) { Py_DECREF(out); return NULL; }
        PyList_SET_ITEM(out, j, item);
    }
    e->nfailed = 0;
    return out;
}

static PyObject *Engine_feed(Engine *e, PyObject *args) {
    PyObject *arr; long long first; int last;
    if (!PyArg_ParseTuple(args, "OLp", &arr, &first, &last)) return NULL;
    if (e->running) { PyErr_SetString(PyExc_RuntimeError, "engine running"); return NULL; }
    Py_buffer v;
    if (PyObject_GetBuffer(arr, &v, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    Py_ssize_t cnt = v.len / 8;
    int64_t *copy = PyMem_RawMalloc((size_t)(cnt ? cnt : 1) * 8);
    if (!copy) { PyBuffer_Release(&v); return PyErr_NoMemory(); }
    memcpy(copy, v.buf, (size_t)cnt * 8);
    PyBuffer_Release(&v);
    PyMem_RawFree(e->tk);
    e->tk = copy; e->tk_n = cnt; e->tk_pos = 0; e->tk_first = first; e->tk_last = last;
    Py_RETURN_NONE;
}

static PyObject *Engine_state(Engine *e, PyObject *Py_UNUSED(ignored)) {
    int64_t seq = e->open_loop ? e->tk_first + e->tk_pos : e->seq;
    return Py_BuildValue("{s:L,s:L,s:L,s:L,s:L,s:i,s:i,s:i}", "n", (long long)e->n,
                         "seq", (long long)seq, "failures", (long long)e->failures,
                         "served_at", (long long)e->served_at, "consec", (long long)e->consec,
                         "aborted", e->aborted, "stopping", e->stopping,
                         "inflight", e->inflight);
}

/* Safe from any thread while the loop runs: the records below the returned count are
 * written (see `published`); `n` itself is the loop's and may be mid-update. */
static PyObject *Engine_published(Engine *e, PyObject *Py_UNUSED(ignored)) {
    return PyLong_FromLongLong(__atomic_load_n(&e->published, __ATOMIC_ACQUIRE));
}

static void Engine_dealloc(Engine *e) {
    if (e->conns) {
        for (int ci = 0; ci < e->nconns; ci++) {
            Conn *c = &e->conns[ci];
            free(c->in); free(c->out);
            PyMem_RawFree(c->q_seq); PyMem_RawFree(c->q_t0); PyMem_RawFree(c->q_int);
        }
        PyMem_RawFree(e->conns);
    }
    if (e->slow) for (int j = 0; j < e->nslow; j++) free(e->slow[j].line);
    PyMem_RawFree(e->slow);
    PyMem_RawFree(e->g_count);
    PyMem_RawFree(e->g_up);
    free(e->routes);
    free(e->routes_pending);
    PyMem_RawFree(e->failed);
    PyMem_RawFree(e->tk);
    if (e->epfd >= 0) close(e->epfd);
    if (e->evfd >= 0) close(e->evfd);
    if (e->tmfd >= 0) close(e->tmfd);
    pthread_mutex_destroy(&e->lock);
    Py_XDECREF(e->keep);
    Py_TYPE(e)->tp_free((PyObject *)e);
}

static const char *bytes_of(PyObject *o, Py_ssize_t *len) {
    char *p;
    if (PyBytes_AsStringAndSize(o, &p, len) < 0) return NULL;
    return p;
}

/* Engine(proto, connections, depth, pattern, get_op, gets, get_off, sets, set_off, tail,
 *        codes=(hit, miss, set_ok, err, timeout, warm_flag, bytes_shift),
 *        limits=(seq, last, stop_ns, warm_ops, timeout_ns, max_consec),
 *        accounting=(failures, served_at, consec), open_loop,
 *        routing=(servers, routes, set_sizes)): routes b"" (one socket per connection)
 *        or a server per key entry; set_sizes b"" (set_ok is the set's outcome) or a
 *        native-endian uint32 value size per key entry */
static int Engine_init(Engine *e, PyObject *args, PyObject *kw) {
    PyObject *pattern, *gets, *get_off, *sets, *set_off, *tail, *routes, *set_sizes;
    long long hit, miss, set_ok, err, tmo, warm, seq, last, stop_ns, warm_ops, tmo_ns, maxc;
    long long failures, served_at, consec;
    int bshift, open_loop;
    e->epfd = e->evfd = e->tmfd = -1;
    pthread_mutex_init(&e->lock, NULL);
    if (!PyArg_ParseTuple(args, "iiiOiOOOOO(LLLLLLi)(LLLLLL)(LLL)p(iSS)", &e->proto,
                          &e->ngroups, &e->depth, &pattern, &e->get_op, &gets, &get_off, &sets,
                          &set_off, &tail, &hit, &miss, &set_ok, &err, &tmo, &warm, &bshift,
                          &seq, &last, &stop_ns, &warm_ops, &tmo_ns, &maxc, &failures,
                          &served_at, &consec, &open_loop, &e->S, &routes, &set_sizes))
        return -1;
    if (e->proto != PROTO_MEMCACHE && e->proto != PROTO_RESP && e->proto != PROTO_KVTEXT) {
        PyErr_Format(PyExc_ValueError, "unknown protocol %d", e->proto);
        return -1;
    }
    if (e->ngroups < 1 || e->depth < 1 || e->S < 1 || e->S > 255) {
        PyErr_SetString(PyExc_ValueError,
                        "connections and depth must be at least 1, servers 1 to 255");
        return -1;
    }
    e->nconns = e->ngroups * e->S;
    Py_ssize_t glen, slen, golen, solen;
    e->pattern = (const uint8_t *)bytes_of(pattern, &e->pattern_len);
    e->gets = bytes_of(gets, &glen);
    e->sets = bytes_of(sets, &slen);
    e->tail = bytes_of(tail, &e->tail_len);
    e->get_off = (const uint32_t *)bytes_of(get_off, &golen);
    e->set_off = (const uint32_t *)bytes_of(set_off, &solen);
    if (!e->pattern || !e->gets || !e->sets || !e->tail || !e->get_off || !e->set_off)
        return -1;
    e->nkeys = golen / 4 - 1;
    if (e->pattern_len < 1 || e->nkeys < 1 || solen != golen) {
        PyErr_SetString(PyExc_ValueError, "empty op pattern or request tables of unequal size");
        return -1;
    }
    Py_ssize_t nroutes = PyBytes_GET_SIZE(routes), nsizes = PyBytes_GET_SIZE(set_sizes);
    if ((nroutes && nroutes != e->nkeys) || (nsizes && nsizes != 4 * e->nkeys)
        || (!nroutes && e->S != 1)) {
        PyErr_SetString(PyExc_ValueError, "routes or set sizes do not match the key tables");
        return -1;
    }
    if (nroutes) {
        e->routes = malloc((size_t)nroutes);
        if (!e->routes) { PyErr_NoMemory(); return -1; }
        memcpy(e->routes, PyBytes_AS_STRING(routes), (size_t)nroutes);
    }
    if (nsizes) e->set_size = (const uint32_t *)PyBytes_AS_STRING(set_sizes);
    e->keep = Py_BuildValue("(OOOOOOO)", pattern, gets, get_off, sets, set_off, tail,
                            set_sizes);
    if (!e->keep) return -1;
    e->hit = hit; e->miss = miss; e->set_ok = set_ok; e->err = err; e->timeout_code = tmo;
    e->warm_flag = warm; e->bytes_shift = bshift;
    e->seq = seq; e->last = last; e->stop_ns = stop_ns; e->warm_ops = warm_ops;
    e->timeout_ns = tmo_ns; e->max_consec = maxc;
    e->failures = failures; e->served_at = served_at; e->consec = consec;
    e->open_loop = open_loop;
    e->conns = PyMem_RawCalloc((size_t)e->nconns, sizeof(Conn));
    e->failed = PyMem_RawCalloc((size_t)e->nconns + MAX_CMDS, sizeof(Failure));
    e->g_count = PyMem_RawCalloc((size_t)e->ngroups, sizeof(int));
    e->g_up = PyMem_RawCalloc((size_t)e->ngroups, sizeof(int));
    /* every op in flight may be waiting for Python at once */
    e->slow = PyMem_RawCalloc((size_t)e->ngroups * (size_t)e->depth + 1, sizeof(Slow));
    if (!e->conns || !e->failed || !e->g_count || !e->g_up || !e->slow) {
        PyErr_NoMemory();
        return -1;
    }
    for (int ci = 0; ci < e->nconns; ci++) {
        Conn *c = &e->conns[ci];
        c->fd = -1;
        c->q_seq = PyMem_RawMalloc(8 * (size_t)e->depth);
        c->q_t0 = PyMem_RawMalloc(8 * (size_t)e->depth);
        c->q_int = PyMem_RawMalloc(8 * (size_t)e->depth);
        if (!c->q_seq || !c->q_t0 || !c->q_int) { PyErr_NoMemory(); return -1; }
    }
    e->epfd = epoll_create1(EPOLL_CLOEXEC);
    e->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    e->tmfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (e->epfd < 0 || e->evfd < 0 || e->tmfd < 0) { PyErr_SetFromErrno(PyExc_OSError); return -1; }
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (uint64_t)TAG_EVENT};
    struct epoll_event tv = {.events = EPOLLIN, .data.u64 = (uint64_t)TAG_TIMER};
    if (epoll_ctl(e->epfd, EPOLL_CTL_ADD, e->evfd, &ev) < 0
        || epoll_ctl(e->epfd, EPOLL_CTL_ADD, e->tmfd, &tv) < 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    return 0;
}

/* What timing and recording one op costs the core: two clock reads and `record` (as the
 * loop does them), minus an empty loop, in thread CPU time, the least of `repeats`. For
 * benchmarks/ (the issue's "recorder overhead" figure). */
static int64_t thread_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static PyObject *record_cost_ns(PyObject *Py_UNUSED(m), PyObject *args) {
    Py_ssize_t iters; int repeats;
    if (!PyArg_ParseTuple(args, "ni", &iters, &repeats)) return NULL;
    if (iters < 1 || repeats < 1) { PyErr_SetString(PyExc_ValueError, "must be >= 1"); return NULL; }
    Engine e;
    memset(&e, 0, sizeof e);
    int64_t *cols = PyMem_RawCalloc((size_t)iters * 4, 8);
    if (!cols) return PyErr_NoMemory();
    e.c_start = cols; e.c_end = cols + iters; e.c_out = cols + 2 * iters;
    e.c_int = cols + 3 * iters;
    e.warm_ops = 0; e.warm_flag = 0x80;
    double best[2] = {1e30, 1e30};
    volatile int64_t sink = 0;
    Py_BEGIN_ALLOW_THREADS
    for (int r = 0; r < repeats; r++) {
        for (int kind = 0; kind < 2; kind++) {
            e.n = 0;
            int64_t t = thread_cpu_ns();
            if (kind == 0) {
                for (Py_ssize_t i = 0; i < iters; i++) {
                    int64_t t0 = now_ns();
                    int64_t t1 = now_ns();
                    record(&e, i, t0, t1, (100 << 16) | (i & 1), 0);
                }
            } else {
                for (Py_ssize_t i = 0; i < iters; i++) sink += i;
            }
            double per = (double)(thread_cpu_ns() - t) / (double)iters;
            if (per < best[kind]) best[kind] = per;
        }
    }
    Py_END_ALLOW_THREADS
    (void)sink;
    PyMem_RawFree(cols);
    return PyFloat_FromDouble(best[0] - best[1]);
}

/* parse_replies(proto, data) -> ([(kind, size), ...], consumed): the core's parser on
 * captured bytes, for tests against the Python drivers. */
static PyObject *parse_replies(PyObject *Py_UNUSED(m), PyObject *args) {
    int proto; const char *buf; Py_ssize_t len;
    if (!PyArg_ParseTuple(args, "iy#", &proto, &buf, &len)) return NULL;
    PyObject *out = PyList_New(0);
    if (!out) return NULL;
    size_t pos = 0;
    while (pos < (size_t)len) {
        int kind; int64_t size = 0; const char *line; size_t line_len;
        size_t used = parse_reply(proto, buf + pos, (size_t)len - pos, &kind, &size, &line,
                                  &line_len);
        if (!used) break;
        PyObject *item = Py_BuildValue("(iL)", kind, (long long)size);
        if (!item || PyList_Append(out, item) < 0) { Py_XDECREF(item); Py_DECREF(out); return NULL; }
        Py_DECREF(item);
        pos += used;
    }
    return Py_BuildValue("(Nn)", out, (Py_ssize_t)pos);
}

static PyMethodDef module_methods[] = {
    {"parse_replies", parse_replies, METH_VARARGS,
     "parse_replies(proto, data) -> ([(kind, size)], consumed): the core's reply parser"},
    {"record_cost_ns", record_cost_ns, METH_VARARGS,
     "record_cost_ns(iterations, repeats) -> ns per op of two clock reads and a record"},
    {NULL, NULL, 0, NULL},
};

static PyMethodDef Engine_methods[] = {
    {"run", (PyCFunction)Engine_run, METH_VARARGS,
     "run(start, end, outcome, intended, n) -> events: run ops until something needs Python"},
    {"attach", (PyCFunction)Engine_attach, METH_VARARGS,
     "attach(conn, fd): connection `conn` is (re)connected (thread-safe)"},
    {"connect_failed", (PyCFunction)Engine_connect_failed, METH_VARARGS,
     "connect_failed(conn, t0, t1): a reconnect failed: an error record (thread-safe)"},
    {"stop", (PyCFunction)Engine_stop, METH_NOARGS, "stop(): start no more ops (thread-safe)"},
    {"record", (PyCFunction)Engine_record, METH_VARARGS,
     "record(conn, seq, t0, t1, code, intended, release, failure): Python's record of a "
     "slow-path op or attempt; release frees its slot (thread-safe)"},
    {"set_routes", (PyCFunction)Engine_set_routes, METH_VARARGS,
     "set_routes(routes): a server per key entry, from now on (thread-safe)"},
    {"take_slow", (PyCFunction)Engine_take_slow, METH_NOARGS,
     "take_slow() -> [(conn, seq, t0, t1, intended, why, line)] of ops for the slow path"},
    {"take_failed", (PyCFunction)Engine_take_failed, METH_NOARGS,
     "take_failed() -> [(conn, kind, message)] of connections that failed"},
    {"feed", (PyCFunction)Engine_feed, METH_VARARGS,
     "feed(intended, first_seq, last): the next chunk of the open-loop schedule"},
    {"state", (PyCFunction)Engine_state, METH_NOARGS, "state() -> dict of counters"},
    {"published", (PyCFunction)Engine_published, METH_NOARGS,
     "published() -> records written so far; any thread, while it runs (acquire order)"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject EngineType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "harness.loadgen._native.Engine",
    .tp_basicsize = sizeof(Engine),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Engine_init,
    .tp_dealloc = (destructor)Engine_dealloc,
    .tp_methods = Engine_methods,
    .tp_doc = "The native hot path of one client process (see the module source).",
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_native", "The load generator's native core.", -1, module_methods,
};

PyMODINIT_FUNC PyInit__native(void) {
    if (PyType_Ready(&EngineType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&EngineType);
    if (PyModule_AddObject(m, "Engine", (PyObject *)&EngineType) < 0) return NULL;
    PyModule_AddIntConstant(m, "EV_DONE", EV_DONE);
    PyModule_AddIntConstant(m, "EV_FAILED", EV_FAILED);
    PyModule_AddIntConstant(m, "EV_FULL", EV_FULL);
    PyModule_AddIntConstant(m, "EV_TICKETS", EV_TICKETS);
    PyModule_AddIntConstant(m, "EV_SLOW", EV_SLOW);
    PyModule_AddIntConstant(m, "WHY_REFUSED", WHY_REFUSED);
    PyModule_AddIntConstant(m, "WHY_LOST", WHY_LOST);
    PyModule_AddIntConstant(m, "WHY_NO_SOCKET", WHY_NO_SOCKET);
    PyModule_AddIntConstant(m, "KVTEXT", PROTO_KVTEXT);
    PyModule_AddIntConstant(m, "F_REPLY", F_REPLY);
    PyModule_AddIntConstant(m, "F_TIMEOUT", F_TIMEOUT);
    PyModule_AddIntConstant(m, "F_LOST", F_LOST);
    PyModule_AddIntConstant(m, "MEMCACHE", PROTO_MEMCACHE);
    PyModule_AddIntConstant(m, "RESP", PROTO_RESP);
    PyModule_AddIntConstant(m, "R_VALUE", R_VALUE);
    PyModule_AddIntConstant(m, "R_MISS", R_MISS);
    PyModule_AddIntConstant(m, "R_STORED", R_STORED);
    PyModule_AddIntConstant(m, "R_OTHER", R_OTHER);
    PyModule_AddIntConstant(m, "R_REFUSED", R_REFUSED);
    return m;
}
