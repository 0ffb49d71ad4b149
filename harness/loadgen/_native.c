/* The Python binding of the native core: the Engine type, its methods (the thread-safe
 * ones queue commands for the loop) and the module (see native_core/engine.h for the
 * design; harness/loadgen/native.py drives it). */
#include "native_core/engine.h"

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
    PyObject *cols[5];
    long long n, base = 0;
    /* base: the run's records before these columns (a recorder that spills chunks), so
     * that failure accounting counts the run's records, not the columns' */
    if (!PyArg_ParseTuple(args, "OOOOOL|L", &cols[0], &cols[1], &cols[2], &cols[3], &cols[4],
                          &n, &base))
        return NULL;
    if (e->running) { PyErr_SetString(PyExc_RuntimeError, "engine already running"); return NULL; }
    Py_buffer views[5];
    int64_t *ptrs[5];
    Py_ssize_t lens[5];
    int k;
    /* the seq column may be None (kept by no one): 4 columns then */
    int ncols = cols[4] == Py_None ? 4 : 5;
    for (k = 0; k < ncols; k++) {
        if (get_col(cols[k], &views[k], &ptrs[k], &lens[k]) < 0) {
            while (k--) PyBuffer_Release(&views[k]);
            return NULL;
        }
    }
    e->c_start = ptrs[0]; e->c_end = ptrs[1]; e->c_out = ptrs[2]; e->c_int = ptrs[3];
    e->c_seq = ncols == 5 ? ptrs[4] : NULL;
    e->cap = lens[0];
    for (k = 1; k < ncols; k++) if (lens[k] < e->cap) e->cap = lens[k];
    e->n = n;
    e->n_base = base;
    __atomic_store_n(&e->published, n, __ATOMIC_RELEASE);
    e->running = 1;
    int ev;
    Py_BEGIN_ALLOW_THREADS
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);  /* open loop wakes within us, not 50 us */
    ev = loop(e);
    __atomic_store_n(&e->published, e->n, __ATOMIC_RELEASE);
    Py_END_ALLOW_THREADS
    e->running = 0;
    for (k = 0; k < ncols; k++) PyBuffer_Release(&views[k]);
    e->c_start = e->c_end = e->c_out = e->c_int = e->c_seq = NULL;
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
    return Py_BuildValue("{s:L,s:L,s:L,s:L,s:L,s:i,s:i,s:i,s:L}", "n", (long long)e->n,
                         "seq", (long long)seq, "failures", (long long)e->failures,
                         "served_at", (long long)e->served_at, "consec", (long long)e->consec,
                         "aborted", e->aborted, "stopping", e->stopping,
                         "inflight", e->inflight, "dropped", (long long)e->dropped);
}

/* Safe from any thread while the loop runs: the records below the returned count are
 * written (see `published`); `n` itself is the loop's and may be mid-update. */
static PyObject *Engine_published(Engine *e, PyObject *Py_UNUSED(ignored)) {
    return PyLong_FromLongLong(__atomic_load_n(&e->published, __ATOMIC_ACQUIRE));
}

/* Before a run: the closed loop's pause before each wait (engine.c's loop). */
static PyObject *Engine_set_pause(Engine *e, PyObject *args) {
    long long ns;
    if (!PyArg_ParseTuple(args, "L", &ns)) return NULL;
    if (ns < 0 || ns >= 1000000000LL)
        return PyErr_Format(PyExc_ValueError, "pause of %lld ns: 0 up to 1 s", ns);
    if (e->running) { PyErr_SetString(PyExc_RuntimeError, "engine running"); return NULL; }
    e->pause_ns = ns;
    Py_RETURN_NONE;
}

/* Before the first socket: TLS on every socket (tls.c), with the CA (PEM; None: the
 * system's), a client certificate and key (PEM or None), the name to check, whether to
 * verify, and the greeting each connection sends first (b"": none). */
static PyObject *Engine_set_tls(Engine *e, PyObject *args) {
    const char *ca, *cert, *key, *name; int verify; const char *hello; Py_ssize_t hello_len;
    if (!PyArg_ParseTuple(args, "zzzzpy#", &ca, &cert, &key, &name, &verify, &hello,
                          &hello_len))
        return NULL;
    if (e->running) { PyErr_SetString(PyExc_RuntimeError, "engine running"); return NULL; }
    char err[256];
    tls_free_ctx(e);
    if (tls_setup(e, ca, cert, key, name, verify, hello, (size_t)hello_len, err,
                  sizeof err) < 0) {
        PyErr_SetString(PyExc_ValueError, err);
        return NULL;
    }
    Py_RETURN_NONE;
}

/* Between runs: the columns were sealed and others come next; until `run` starts on
 * them, `published` must not count the old ones' records. */
static PyObject *Engine_rewind(Engine *e, PyObject *Py_UNUSED(ignored)) {
    if (e->running) { PyErr_SetString(PyExc_RuntimeError, "engine running"); return NULL; }
    e->n = 0;
    __atomic_store_n(&e->published, 0, __ATOMIC_RELEASE);
    Py_RETURN_NONE;
}

static void Engine_dealloc(Engine *e) {
    if (e->conns) {
        for (int ci = 0; ci < e->nconns; ci++) {
            Conn *c = &e->conns[ci];
            tls_close(c);
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
    tls_free_ctx(e);
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
 *        limits=(seq, last, stop_ns, warm_ops, timeout_ns, max_consec, measured_seq,
 *                measured_ns),
 *        accounting=(failures, served_at, consec), open_loop,
 *        routing=(servers, routes, set_sizes, framing)[, writes_to]): routes b"" (one socket per
 *        connection) or a server per key entry; set_sizes b"" (set_ok is the set's outcome)
 *        or a native-endian uint32 value size per key entry; framing -1 (every set sends
 *        the whole tail) or n (a set sends the tail's last size + n bytes, the tail being
 *        the largest value and n bytes of framing); open loop drops the warm-up ops
 *        still waiting when the first measured seq is due, at measured_ns; writes_to
 *        (routes only; -1, the default: sets by routes) the server every set goes to */
static int Engine_init(Engine *e, PyObject *args, PyObject *kw) {
    PyObject *pattern, *gets, *get_off, *sets, *set_off, *tail, *routes, *set_sizes;
    long long hit, miss, set_ok, err, tmo, warm, seq, last, stop_ns, warm_ops, tmo_ns, maxc;
    long long measured_seq, measured_ns;
    long long failures, served_at, consec;
    int bshift, open_loop;
    e->epfd = e->evfd = e->tmfd = -1;
    e->writes_to = -1;
    pthread_mutex_init(&e->lock, NULL);
    if (!PyArg_ParseTuple(args, "iiiOiOOOOO(LLLLLLi)(LLLLLLLL)(LLL)p(iSSi)|i", &e->proto,
                          &e->ngroups, &e->depth, &pattern, &e->get_op, &gets, &get_off, &sets,
                          &set_off, &tail, &hit, &miss, &set_ok, &err, &tmo, &warm, &bshift,
                          &seq, &last, &stop_ns, &warm_ops, &tmo_ns, &maxc, &measured_seq,
                          &measured_ns, &failures, &served_at, &consec, &open_loop, &e->S,
                          &routes, &set_sizes, &e->framing, &e->writes_to))
        return -1;
    if (e->proto != PROTO_MEMCACHE && e->proto != PROTO_RESP && e->proto != PROTO_KVTEXT
        && e->proto != PROTO_RESP_HASH) {
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
        || (!nroutes && e->S != 1) || e->writes_to >= e->S || e->writes_to < -1
        || (e->writes_to >= 0 && !nroutes)) {
        PyErr_SetString(PyExc_ValueError, "routes, set sizes or writes_to do not match the key tables");
        return -1;
    }
    if (nroutes) {
        e->routes = malloc((size_t)nroutes);
        if (!e->routes) { PyErr_NoMemory(); return -1; }
        memcpy(e->routes, PyBytes_AS_STRING(routes), (size_t)nroutes);
    }
    if (nsizes) e->set_size = (const uint32_t *)PyBytes_AS_STRING(set_sizes);
    if (e->framing >= 0) {  /* every sized tail must lie inside the tail */
        for (Py_ssize_t k = 0; k < e->nkeys && nsizes; k++)
            if ((Py_ssize_t)e->set_size[k] + e->framing > e->tail_len) { nsizes = 0; break; }
        if (!nsizes) {
            PyErr_SetString(PyExc_ValueError, "sized tails need set sizes within the tail");
            return -1;
        }
    }
    e->keep = Py_BuildValue("(OOOOOOO)", pattern, gets, get_off, sets, set_off, tail,
                            set_sizes);
    if (!e->keep) return -1;
    e->hit = hit; e->miss = miss; e->set_ok = set_ok; e->err = err; e->timeout_code = tmo;
    e->warm_flag = warm; e->bytes_shift = bshift;
    e->seq = seq; e->last = last; e->stop_ns = stop_ns; e->warm_ops = warm_ops;
    e->timeout_ns = tmo_ns; e->max_consec = maxc;
    e->failures = failures; e->served_at = served_at; e->consec = consec;
    e->open_loop = open_loop;
    e->measured_seq = measured_seq; e->measured_ns = measured_ns;
    e->gate_ns = open_loop && measured_seq > 0 && measured_ns < stop_ns ? measured_ns : stop_ns;
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
    int64_t *cols = PyMem_RawCalloc((size_t)iters * 5, 8);
    if (!cols) return PyErr_NoMemory();
    e.c_start = cols; e.c_end = cols + iters; e.c_out = cols + 2 * iters;
    e.c_int = cols + 3 * iters; e.c_seq = cols + 4 * iters;
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
     "run(start, end, outcome, intended, seq, n) -> events: run ops until something needs "
     "Python"},
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
    {"rewind", (PyCFunction)Engine_rewind, METH_NOARGS,
     "rewind() -> None; between runs: no record written yet (the next run's columns)"},
    {"set_tls", (PyCFunction)Engine_set_tls, METH_VARARGS,
     "set_tls(ca_pem, cert_pem, key_pem, server_name, verify, hello): TLS on every socket"},
    {"set_pause", (PyCFunction)Engine_set_pause, METH_VARARGS,
     "set_pause(ns): closed loop, the loop sleeps ns before each wait while ops are in "
     "flight (0: never)"},
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
    PyModule_AddIntConstant(m, "TLS", tls_built());
    return m;
}
