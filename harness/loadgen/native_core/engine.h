#ifndef KVBENCH_NATIVE_ENGINE_H
#define KVBENCH_NATIVE_ENGINE_H
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

/* PROTO_RESP_HASH: RESP whose gets are HGETALLs: a value is the field/value array's
 * values (every second element), as the ycsb workload's Python client counts them. */
enum { PROTO_MEMCACHE = 0, PROTO_RESP = 1, PROTO_KVTEXT = 2, PROTO_RESP_HASH = 3 };
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
    /* TLS (tls.c): the socket's session (an SSL *), NULL for plain TCP; the length of a
     * write OpenSSL must be asked to finish */
    void *ssl;
    int tls_retry;
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
    /* a routed protocol's sets all go to this server (a primary whose replicas take the
     * gets, by `routes`); -1: sets by `routes` too */
    int writes_to;
    const uint32_t *set_size;  /* per key entry: the set's value size, or NULL */
    Slow *slow; int nslow;
    /* ops: op code per seq (mod pattern length), the get op's code, requests per key pick */
    const uint8_t *pattern; Py_ssize_t pattern_len;
    int get_op;
    const char *gets, *sets, *tail;
    Py_ssize_t tail_len;
    int framing;  /* -1: every set sends the whole tail; n: its last set_size[k] + n bytes */
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
    /* closed loop: ns the loop sleeps before each wait while ops are in flight, so that
     * replies and the requests they release travel in batches (Engine.set_pause) */
    int64_t pause_ns;
    int64_t *tk; Py_ssize_t tk_n, tk_pos; int64_t tk_first; int tk_last;
    int64_t timer_at;
    /* open loop: when seq `measured_seq`, the first measured op, is due (`measured_ns`),
     * the warm-up ops not yet sent are dropped (counted in `dropped`); `gate_ns` is the
     * earlier of that and stop_ns until then, stop_ns after (one compare per dispatch) */
    int64_t measured_seq, measured_ns, gate_ns, dropped;
    /* records: the Recorder's columns during a run */
    int64_t *c_start, *c_end, *c_out, *c_int, *c_seq;
    int64_t n, cap;
    /* the run's records before the current columns (Engine.run's base) */
    int64_t n_base;
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
    /* TLS (tls.c): the client context (an SSL_CTX *; NULL: plain TCP), the name the
     * server's certificate must carry, and the greeting each connection sends first */
    void *ssl_ctx;
    char *tls_name;
    char *hello;
    size_t hello_len;
} Engine;

static inline int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);  /* time.perf_counter_ns's clock on Linux */
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline int grow_buf(char **buf, size_t *cap, size_t need) {
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 4096;
    while (c < need) c *= 2;
    char *p = realloc(*buf, c);
    if (!p) return -1;
    *buf = p; *cap = c;
    return 0;
}

static inline void record(Engine *e, int64_t seq, int64_t t0, int64_t t1, int64_t code,
                          int64_t intended) {
    int64_t i = e->n++;
    e->c_start[i] = t0;
    e->c_end[i] = t1;
    e->c_out[i] = seq < e->warm_ops ? code | e->warm_flag : code;
    if (e->open_loop) e->c_int[i] = intended;
    if (e->c_seq) e->c_seq[i] = seq;  /* NULL: no keys asked for, no column */
}

static inline int op_of(Engine *e, int64_t seq) {
    return e->pattern[seq % e->pattern_len];
}

/* protocols.c: the replies of each protocol */
size_t parse_reply(int proto, const char *buf, size_t len, int *kind, int64_t *size,
                   const char **line, size_t *line_len);
const char *server_name(const Engine *e);
int same_key(const Engine *e, int64_t seq, const char *line, size_t line_len, int64_t size);
void describe(const Engine *e, char *msg, const char *line, size_t line_len, int get);

/* engine.c: the loop (`Engine.run` calls it without the GIL) */
int loop(Engine *e);

/* tls.c: TLS through OpenSSL where the core was built with it */
int tls_setup(Engine *e, const char *ca, const char *cert, const char *key,
              const char *name, int verify, const char *hello, size_t hello_len,
              char *err, size_t errlen);
int tls_open(Engine *e, Conn *c, int fd, char *err, size_t errlen);
void tls_close(Conn *c);
void tls_free_ctx(Engine *e);
ssize_t conn_read(Conn *c, void *buf, size_t n);
ssize_t conn_write(Conn *c, const void *buf, size_t n);
int conn_pending(Conn *c);
int tls_built(void);

#endif
