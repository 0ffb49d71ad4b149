/* The native core's loop: records and failure accounting, sending, reading, the
 * commands from Python and the epoll loop itself (see engine.h). */
#include "engine.h"

/* ---- records and failure accounting ---------------------------------------------- */


static void count_failure(Engine *e) {
    e->failures++;
    int64_t served = e->n_base + e->n - e->failures;
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
    tls_close(c);  /* the descriptor is Python's to close */
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
    /* a sized tail is the end of the largest value's: this set's size + framing bytes */
    size_t tl = get ? 0 : e->framing < 0 ? (size_t)e->tail_len
                                         : (size_t)e->set_size[k] + (size_t)e->framing;
    size_t need = c->out_len + len + tl;
    if (grow_buf(&c->out, &c->out_cap, need) < 0) return -1;
    memcpy(c->out + c->out_len, src, len);
    c->out_len += len;
    if (tl) {
        memcpy(c->out + c->out_len, e->tail + (e->tail_len - (Py_ssize_t)tl), tl);
        c->out_len += tl;
    }
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

/* The socket of group g for op `seq` (its key entry's server, or for a set the one
 * all writes go to), or -1: its server has no socket here (the slow path then). */
static inline int target(Engine *e, int g, int64_t seq) {
    if (!e->routes) return g;
    int r = e->writes_to >= 0 && op_of(e, seq) != e->get_op ? e->writes_to
                                                              : e->routes[seq % e->nkeys];
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
        ssize_t w = conn_write(c, c->out + c->out_off, c->out_len - c->out_off);
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

/* Open loop: the first measured op is due, so the warm-up is over: the warm-up ops not
 * yet sent are dropped and counted, not sent (a stale backlog would only make the
 * measured ops wait). Those of a later chunk are dropped once it is fed. */
static void drop_warmup(Engine *e) {
    int64_t left = e->measured_seq - (e->tk_first + e->tk_pos);
    if (left > e->tk_n - e->tk_pos) left = e->tk_n - e->tk_pos;
    if (left > 0) { e->tk_pos += left; e->dropped += left; }
    if (e->tk_first + e->tk_pos >= e->measured_seq) e->gate_ns = e->stop_ns;
}

/* Open loop: start every due op that has a free slot, round robin over connections. */
static void dispatch_open(Engine *e) {
    if (e->stopping || e->tk_pos >= e->tk_n) return;
    int64_t t0 = now_ns();
    if (t0 >= e->gate_ns) {  /* the end, or the warm-up's */
        if (t0 >= e->stop_ns) return;
        drop_warmup(e);
        if (e->tk_pos >= e->tk_n) return;
    }
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

/* ---- reading ---------------------------------------------------------------------- */

static void on_readable(Engine *e, int ci) {
    Conn *c = &e->conns[ci];
again:
    if (grow_buf(&c->in, &c->in_cap, c->in_len + 65536) < 0) return;
    ssize_t r = conn_read(c, c->in + c->in_len, c->in_cap - c->in_len);
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
    /* TLS hands over one record a call: take every record already here before parsing,
     * so the replies of one arrival release their requests in one write (one record),
     * as one read does without TLS. What is not here yet (EAGAIN) waits for epoll. */
    while (c->ssl) {
        if (grow_buf(&c->in, &c->in_cap, c->in_len + 16384) < 0) break;
        ssize_t more = conn_read(c, c->in + c->in_len, c->in_cap - c->in_len);
        if (more <= 0) break;  /* a close or an error shows at the next read */
        c->in_len += (size_t)more;
    }
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
        else if (!get && kind == R_MISS) code = e->miss;  /* memcached's NOT_STORED */
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
    /* OpenSSL may hold decrypted replies epoll cannot see: read them now */
    if (c->fd >= 0 && conn_pending(c)) goto again;
}

/* ---- commands from Python ---------------------------------------------------------- */

/* Socket ci is fd (-1: none, its server's ops take the slow path); over TLS, after its
 * handshake and greeting (tls.c). -1 with `msg` set if it cannot join. */
static int attach(Engine *e, int ci, int fd, char *msg) {
    Conn *c = &e->conns[ci];
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (uint64_t)ci};
    if (fd >= 0 && e->ssl_ctx && tls_open(e, c, fd, msg, MSG_LEN) < 0) return -1;
    if (fd >= 0 && epoll_ctl(e->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
        snprintf(msg, MSG_LEN, "[Errno %d] %s", errno, strerror(errno));
        tls_close(c);
        return -1;
    }
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
            char msg[MSG_LEN];
            if (attach(e, m.conn, (int)m.fd_or_t0, msg) < 0) {
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

int loop(Engine *e) {
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
        /* A client that reads each reply as it lands makes the server send (and wake it)
         * per reply and read a few requests at a time; pausing lets both batch, as a
         * NIC's interrupt moderation does. The pause is in every latency it covers. */
        if (e->pause_ns && !e->open_loop && e->inflight && wait_ns > 0) {
            struct timespec ts = {e->pause_ns / 1000000000LL, e->pause_ns % 1000000000LL};
            nanosleep(&ts, NULL);
        }
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
