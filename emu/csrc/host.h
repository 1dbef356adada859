/* emu/csrc/host.h: the host side of a host node -- NicEngine.on_timer, Timers.run_due, Host.resume,
 * Host.deliver and the send and receive requests' plain cases (part of emu/_core.c, one translation
 * unit; the classes are given by emu.nodes.host.engine at its import -- the substrate does not know
 * them). Each is the twin of the Python it stands in for, which stays the specification: anything
 * these do not take (another class, a method replaced, OS noise, an isend, a request of a NIC
 * mechanism) is handed to that Python before anything changed. */
#ifndef EMU_CSRC_HOST_H
#define EMU_CSRC_HOST_H

static PyObject *host_handlers;                        /* the host's _HANDLERS: request type -> handler */
static PyObject *host_globals, *s_handlers_name;      /* the host module's globals (Python's resume reads _HANDLERS there) */
static PyObject *f_resume, *f_deliver, *f_op_send, *f_op_recv;
static Py_ssize_t pr_coro, pr_waiting, pr_since, pr_done, pr_result, pr_finished, pr_cpu, pr_busy;
static Py_ssize_t sd_dst, sd_data, sd_tag, sd_vc, sd_request, rv_src, rv_tag;
static Py_ssize_t h_nic, h_spec, h_host_ids, h_procs, h_inbox, h_current, h_noise;
static PyObject *s_send_overhead_ns, *s_recv_overhead_ns, *s_app_failed, *s_op_failed, *s_dispatch, *s_next_live,
    *s_run_due;
static unsigned long long n_host_steps; /* application steps (coroutine sends) run here (counts()) */

/* Host._op_sleep's and Host._op_try_recv's requests (Sleep, TryRecv), found in the handlers' table at
 * host_setup by their handler (NULL: not there as this code reads them -- Python's) */
static PyTypeObject *SleepT, *TryRecvT;
static PyObject *f_op_sleep, *f_op_try_recv;
static Py_ssize_t sl_ns;
static unsigned long long n_host_sleeps, n_host_try_recvs; /* requests taken here (counts()) */

static int extra_ops_setup(void)
{
    Py_CLEAR(SleepT);
    Py_CLEAR(TryRecvT);
    Py_CLEAR(f_op_sleep);
    Py_CLEAR(f_op_try_recv);
    PyObject *n_sleep = PyUnicode_InternFromString("_op_sleep"), *n_try = PyUnicode_InternFromString("_op_try_recv"),
             *n_matches = PyUnicode_InternFromString("matches");
    if (n_sleep == NULL || n_try == NULL || n_matches == NULL) {
        Py_XDECREF(n_sleep);
        Py_XDECREF(n_try);
        Py_XDECREF(n_matches);
        return -1;
    }
    PyObject *fs = _PyType_Lookup(HostT, n_sleep), *ft = _PyType_Lookup(HostT, n_try), *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(host_handlers, &pos, &k, &v)) {
        if (!PyType_Check(k) || v == NULL || !PyFunction_Check(v))
            continue;
        PyTypeObject *t = (PyTypeObject *)k;
        if (v == fs && SleepT == NULL && slot_offset(t, "ns", &sl_ns) == 0) {
            SleepT = (PyTypeObject *)Py_NewRef(t);
            f_op_sleep = Py_NewRef(v);
        } else if (v == ft && TryRecvT == NULL && PyType_IsSubtype(t, RecvT) && t->tp_basicsize == RecvT->tp_basicsize &&
                   _PyType_Lookup(t, n_matches) == _PyType_Lookup(RecvT, n_matches)) { /* (Recv's slots, its matches) */
            TryRecvT = (PyTypeObject *)Py_NewRef(t);
            f_op_try_recv = Py_NewRef(v);
        }
        PyErr_Clear();
    }
    Py_DECREF(n_sleep);
    Py_DECREF(n_try);
    Py_DECREF(n_matches);
    return 0;
}

/* host_setup(Host, Proc, Send, Recv, handlers): the classes whose slots the core reads in place */
static PyObject *host_setup(PyObject *self, PyObject *args)
{
    PyObject *host, *proc, *send, *recv, *handlers, *globals;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!O!", &PyType_Type, &host, &PyType_Type, &proc, &PyType_Type, &send,
                          &PyType_Type, &recv, &PyDict_Type, &handlers, &PyDict_Type, &globals))
        return NULL;
    if (NicT == NULL) {
        PyErr_SetString(PyExc_ValueError, "host_setup: nic_setup first");
        return NULL;
    }
    struct { PyTypeObject *t; const char *n; Py_ssize_t *off; } slots[] = {
        {(PyTypeObject *)proc, "coro", &pr_coro}, {(PyTypeObject *)proc, "waiting", &pr_waiting},
        {(PyTypeObject *)proc, "since_ns", &pr_since}, {(PyTypeObject *)proc, "done", &pr_done},
        {(PyTypeObject *)proc, "result", &pr_result}, {(PyTypeObject *)proc, "finished_ns", &pr_finished},
        {(PyTypeObject *)proc, "cpu_ns", &pr_cpu}, {(PyTypeObject *)proc, "busy", &pr_busy},
        {(PyTypeObject *)send, "dst", &sd_dst}, {(PyTypeObject *)send, "data", &sd_data},
        {(PyTypeObject *)send, "tag", &sd_tag}, {(PyTypeObject *)send, "vc", &sd_vc},
        {(PyTypeObject *)send, "request", &sd_request}, {(PyTypeObject *)recv, "src", &rv_src},
        {(PyTypeObject *)recv, "tag", &rv_tag}, {(PyTypeObject *)host, "nic", &h_nic},
        {(PyTypeObject *)host, "spec", &h_spec}, {(PyTypeObject *)host, "host_ids", &h_host_ids},
        {(PyTypeObject *)host, "_procs", &h_procs}, {(PyTypeObject *)host, "_inbox", &h_inbox},
        {(PyTypeObject *)host, "current", &h_current}, {(PyTypeObject *)host, "noise", &h_noise}};
    for (size_t k = 0; k < sizeof slots / sizeof slots[0]; k++)
        if (slot_offset(slots[k].t, slots[k].n, slots[k].off) < 0)
            return NULL;
    struct { PyObject **s; const char *n; } names[] = {
        {&s_send_overhead_ns, "send_overhead_ns"}, {&s_recv_overhead_ns, "recv_overhead_ns"},
        {&s_app_failed, "_app_failed"}, {&s_op_failed, "_op_failed"}, {&s_dispatch, "_dispatch"},
        {&s_next_live, "_next_live"}, {&s_run_due, "run_due"}, {&s_handlers_name, "_HANDLERS"}};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
        if (*names[k].s == NULL && (*names[k].s = PyUnicode_InternFromString(names[k].n)) == NULL)
            return NULL;
    if (PyDict_GetItemWithError(globals, s_handlers_name) != handlers) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "host_setup: the handlers are not the module's _HANDLERS");
        return NULL;
    }
    Py_XSETREF(HostT, (PyTypeObject *)Py_NewRef(host));
    Py_XSETREF(ProcT, (PyTypeObject *)Py_NewRef(proc));
    Py_XSETREF(SendT, (PyTypeObject *)Py_NewRef(send));
    Py_XSETREF(RecvT, (PyTypeObject *)Py_NewRef(recv));
    Py_XSETREF(host_handlers, Py_NewRef(handlers));
    Py_XSETREF(host_globals, Py_NewRef(globals));
    /* the watch table: each attribute as the class has it now */
    watching = 0;
    for (int k = 0; k < N_WATCH; k++) {
        if (watch[k].s == NULL && (watch[k].s = PyUnicode_InternFromString(watch[k].name)) == NULL)
            return NULL;
        PyObject *v = _PyType_Lookup(watch_type(watch[k].cls), watch[k].s);
        if (v == NULL) {
            PyErr_Format(PyExc_TypeError, "host_setup: %s has no %s", watch_type(watch[k].cls)->tp_name, watch[k].name);
            return NULL;
        }
        Py_XSETREF(watch[k].v, Py_NewRef(v));
    }
    /* the host's methods the core calls or compares with (a handler in _HANDLERS is one of them) */
    PyObject **fns[] = {&f_resume, &f_deliver, &f_op_send, &f_op_recv};
    for (int k = WI_RESUME; k <= WI_OP_RECV; k++) {
        if (!PyFunction_Check(watch[k].v)) {
            PyErr_Format(PyExc_TypeError, "host_setup: %s.%s is not a function of the class", HostT->tp_name,
                         watch[k].name);
            return NULL;
        }
        Py_XSETREF(*fns[k - WI_RESUME], Py_NewRef(watch[k].v));
    }
    for (int c = 0; c < W_N; c++)
        watch_tags[c] = 0, watch_t[c] = watch_type(c);
    watching = 1;
    if (extra_ops_setup() < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* the host module's _HANDLERS is still the table given at setup (Python's resume reads the global):
 * read again only when the module's globals changed (their dict's version, CPython 3.11) */
static inline int handlers_same(void)
{
#if PY_VERSION_HEX < 0x030C0000
    static uint64_t seen_ver;
    uint64_t ver = ((PyDictObject *)host_globals)->ma_version_tag;
    if (ver == seen_ver && ver)
        return 1;
    if (PyDict_GetItem(host_globals, s_handlers_name) != host_handlers)
        return 0;
    seen_ver = ver;
    return 1;
#else
    return PyDict_GetItem(host_globals, s_handlers_name) == host_handlers;
#endif
}

/* a host the core steps: of the registered class, its NIC one too, none of the methods replaced,
 * the module's _HANDLERS the table given at setup */
static inline int host_plain(PyObject *host)
{
    PyObject *nic;
    return HostT != NULL && Py_TYPE(host) == HostT && (nic = SLOT(host, h_nic)) != NULL && Py_TYPE(nic) == NicT &&
           classes_plain() && handlers_same();
}

static inline int call_drop(PyObject *r)
{
    Py_XDECREF(r);
    return r == NULL ? -1 : 0;
}

/* Host._busy(proc, ns, value, done): the application spends ``ns`` (not 0) of CPU time and continues
 * with ``value`` at ``done``: proc.cpu_ns, proc.busy, the timer that resumes it (host.nic.at) */
static int resume_at(PyObject *host, PyObject *proc, PyObject *value, long long done);

static int host_busy(PyObject *host, PyObject *proc, long long ns, PyObject *value, long long done)
{
    if (add_ll(proc, pr_cpu, ns) < 0)
        return -1;
    Py_XSETREF(SLOT(proc, pr_busy), Py_NewRef(Py_True));
    return resume_at(host, proc, value, done);
}

/* The timer nic_on_timer runs now when it is a Host's resume: its bound method (``host.resume``) and
 * its (proc, value) tuple, borrowed -- the popped timer entry holds them until the call returns (NULL
 * otherwise). A resume that sets its next timer (resume_at) takes the same method, and the same tuple
 * when it holds the same proc and value: both immutable, the same in every way but identity, which
 * nothing reads -- a bound method and a tuple made and freed per app sleep fewer. */
static PyObject *ih_fired_fn, *ih_fired_arg;

/* self.nic.at(done, self.resume, (proc, value)): the timer that resumes the app. 0, -1 error */
static int resume_at(PyObject *host, PyObject *proc, PyObject *value, long long done)
{
    PyObject *nic = SLOT(host, h_nic), *timers = NIC_GET(nic, N_TIMERS);
    PyObject *ff = ih_fired_fn, *fa = ih_fired_arg;
    PyObject *fn = timers == NULL ? NULL : ff != NULL && PyMethod_GET_SELF(ff) == host ? Py_NewRef(ff)
                                                                                       : PyMethod_New(f_resume, host); /* (self.resume) */
    PyObject *arg = fn == NULL ? NULL : fa != NULL && PyTuple_GET_ITEM(fa, 0) == proc && PyTuple_GET_ITEM(fa, 1) == value
                                            ? Py_NewRef(fa) : PyTuple_Pack(2, proc, value);
    PyObject *t = arg == NULL ? NULL : PyLong_FromLongLong(done);
    int ip = t == NULL ? -1 : inst_plain(nic); /* (self.nic.at: one set on the NIC wins) */
    int rc = ip < 0 ? -1 : ip ? timers_at(timers, t, fn, arg) : call_drop(PyObject_CallMethodObjArgs(nic, s_at, t, fn, arg, NULL));
    Py_XDECREF(timers);
    Py_XDECREF(fn);
    Py_XDECREF(arg);
    Py_XDECREF(t);
    return rc;
}

/* the int ``x`` (a new reference, released here; NULL: an error): 1 (in *v), 0 (not an int), -1 */
static inline int take_ll(PyObject *x, long long *v)
{
    if (x == NULL)
        return -1;
    int ok = get_ll(x, v);
    Py_DECREF(x);
    return ok ? 1 : (PyErr_Occurred() ? -1 : 0);
}

/* an int attribute of a NIC: 1 (in *v), 0 (not an int: Python's), -1 (error) */
static inline int nic_ll(PyObject *nic, int k, long long *v) { return take_ll(NIC_GET(nic, k), v); }

/* Host._op_send(proc, op) for a send (not an isend) without OS noise whose message the NIC takes
 * whole (nic_send_one): 1 the app goes on (*value None), 0 it waits for the send overhead, 2 not
 * this case (nothing changed: the handler's), -1 error */
static int op_send(PyObject *host, PyObject *proc, PyObject *op, PyObject **value)
{
    PyObject *req = SLOT(op, sd_request), *nic = SLOT(host, h_nic), *spec = SLOT(host, h_spec), *dst = SLOT(op, sd_dst),
             *tag = SLOT(op, sd_tag), *data = SLOT(op, sd_data), *vc = SLOT(op, sd_vc);
    if (req != Py_False || SLOT(host, h_noise) != Py_None || spec == NULL || dst == NULL || tag == NULL ||
        data == NULL || vc == NULL)
        return 2;
    long long o, now;
    int k = take_ll(spec_get(spec, s_send_overhead_ns, SP_SEND_OVERHEAD), &o);
    if (k != 1)
        return k < 0 ? -1 : 2;
    if ((k = nic_ll(nic, N_NOW, &now)) != 1)
        return k < 0 ? -1 : 2;
    PyObject *done = PyLong_FromLongLong(now + o);
    if (done == NULL)
        return -1;
    k = nic_send_one(nic, dst, tag, data, done, vc);
    Py_DECREF(done);
    if (k <= 0)
        return k < 0 ? -1 : 2;
    if (o == 0) {
        *value = Py_NewRef(Py_None);
        return 1;
    }
    return host_busy(host, proc, o, Py_None, now + o) < 0 ? -1 : 0;
}

/* an exact int or None: compared without running any Python code */
static inline int int_or_none(PyObject *o)
{
    return o != NULL && (o == Py_None || PyLong_CheckExact(o));
}

static inline int int_eq(PyObject *a, PyObject *b) /* (two exact ints) */
{
    long long x, y;
    if (get_ll(a, &x) && get_ll(b, &y))
        return x == y;
    return PyObject_RichCompareBool(a, b, Py_EQ) == 1;
}

/* Recv.matches(src, tag) for a Recv whose src and tag are None or ints, ``src`` and ``tag`` ints */
static inline int recv_matches(PyObject *op, PyObject *src, PyObject *tag)
{
    PyObject *ws = SLOT(op, rv_src), *wt = SLOT(op, rv_tag);
    return (ws == Py_None || int_eq(ws, src)) && (wt == Py_None || int_eq(wt, tag));
}

/* Host._received(proc, msg) without OS noise: 1 the app goes on (*value msg), 0 it waits for the
 * receive overhead, -1 error */
static int host_received(PyObject *host, PyObject *proc, PyObject *msg, long long ro, PyObject **value)
{
    if (ro == 0) {
        *value = Py_NewRef(msg);
        return 1;
    }
    long long now;
    int k = nic_ll(SLOT(host, h_nic), N_NOW, &now);
    if (k != 1) {
        if (k == 0)
            PyErr_SetString(PyExc_TypeError, "emu._core: a NIC's now is not an integer");
        return -1;
    }
    return host_busy(host, proc, ro, msg, now + ro) < 0 ? -1 : 0;
}

/* Host._op_recv(proc, op) for a Recv without OS noise whose src and tag are None or ints, the
 * inbox's messages Messages from known hosts (names and tags as the NIC makes them): no Python code
 * runs until the match. 1 the app goes on, 0 it waits, 2 not this case (nothing changed: the
 * handler's), -1 error */
static int op_recv(PyObject *host, PyObject *proc, PyObject *op, PyObject **value, int try_)
{
    PyObject *inbox = SLOT(host, h_inbox), *ids = SLOT(host, h_host_ids), *spec = SLOT(host, h_spec);
    if (inbox == NULL || !PyList_CheckExact(inbox) || SLOT(host, h_noise) != Py_None || !int_or_none(SLOT(op, rv_src)) ||
        !int_or_none(SLOT(op, rv_tag)))
        return 2;
    Py_ssize_t n = PyList_GET_SIZE(inbox);
    if (n == 0 && try_) { /* (_op_try_recv: nothing there, the app goes on at once with None) */
        *value = Py_NewRef(Py_None);
        return 1;
    }
    if (n == 0)
        return 0; /* (most receives: the app waits) */
    if (ids == NULL || !PyDict_CheckExact(ids) || spec == NULL)
        return 2;
    long long ro;
    int k = take_ll(spec_get(spec, s_recv_overhead_ns, SP_RECV_OVERHEAD), &ro);
    if (k != 1)
        return k < 0 ? -1 : 2;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *m = PyList_GET_ITEM(inbox, i), *src;
        if (Py_TYPE(m) != MessageT || PyTuple_GET_SIZE(m) < 2 || !PyUnicode_CheckExact(PyTuple_GET_ITEM(m, 0)) ||
            !PyLong_CheckExact(PyTuple_GET_ITEM(m, 1)))
            return 2;
        if ((src = PyDict_GetItemWithError(ids, PyTuple_GET_ITEM(m, 0))) == NULL || !PyLong_CheckExact(src))
            return PyErr_Occurred() ? -1 : 2; /* (a KeyError in Python: the handler's) */
        if (recv_matches(op, src, PyTuple_GET_ITEM(m, 1))) { /* del self._inbox[i]; self._received(proc, m) */
            Py_INCREF(m);
            int rc = PyList_SetSlice(inbox, i, i + 1, NULL) < 0 ? -1 : host_received(host, proc, m, ro, value);
            Py_DECREF(m);
            return rc;
        }
    }
    if (try_)
        *value = Py_NewRef(Py_None);
    return try_ ? 1 : 0;
}

/* Host._op_sleep(proc, op) for a Sleep of an int: self.nic.at(self.now + op.ns, self.resume, (proc,
 * None)), the app waiting. 0, 2 not this case (nothing changed: the handler's), -1 error */
static int op_sleep(PyObject *host, PyObject *proc, PyObject *op)
{
    PyObject *ns = SLOT(op, sl_ns), *nic = SLOT(host, h_nic);
    long long nsv, now;
    if (ns == NULL || !PyLong_CheckExact(ns) || !get_ll(ns, &nsv) || nic == NULL) {
        PyErr_Clear();
        return 2;
    }
    int k = nic_ll(nic, N_NOW, &now);
    if (k != 1)
        return k < 0 ? -1 : 2;
    return resume_at(host, proc, Py_None, now + nsv);
}

/* the exception being raised handed to the host's ``method(proc, e[, tb])`` (Host._app_failed,
 * _op_failed): 0, -1 error */
static int host_failed(PyObject *host, PyObject *proc, PyObject *method, int with_tb)
{
    PyObject *type, *val, *tb;
    PyErr_Fetch(&type, &val, &tb);
    PyErr_NormalizeException(&type, &val, &tb);
    if (tb != NULL && val != NULL)
        PyException_SetTraceback(val, tb);
    PyObject *prev = PyErr_GetHandledException();
    if (val != NULL)
        PyErr_SetHandledException(val);
    PyObject *r = val == NULL ? NULL
                              : PyObject_CallMethodObjArgs(host, method, proc, val, with_tb ? (tb ? tb : Py_None) : NULL, NULL);
    PyErr_SetHandledException(prev);
    Py_XDECREF(prev);
    Py_XDECREF(type);
    Py_XDECREF(val);
    Py_XDECREF(tb);
    return call_drop(r);
}

static int host_deliver(PyObject *host, PyObject *msg);

/* ``a, b = r`` as Python unpacks it (and its errors): 0 (two new references), -1 */
static int unpack2(PyObject *r, PyObject **a, PyObject **b)
{
    if ((PyTuple_CheckExact(r) || PyList_CheckExact(r)) && PySequence_Fast_GET_SIZE(r) == 2) {
        *a = Py_NewRef(PySequence_Fast_GET_ITEM(r, 0));
        *b = Py_NewRef(PySequence_Fast_GET_ITEM(r, 1));
        return 0;
    }
    PyObject *it = PyObject_GetIter(r), *x[3] = {NULL, NULL, NULL};
    if (it == NULL) {
        if (PyErr_ExceptionMatches(PyExc_TypeError) && Py_TYPE(r)->tp_iter == NULL && !PySequence_Check(r)) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "cannot unpack non-iterable %.200s object", Py_TYPE(r)->tp_name);
        }
        return -1;
    }
    int n = 0;
    for (; n < 3 && (x[n] = PyIter_Next(it)) != NULL; n++)
        ;
    Py_DECREF(it);
    if (!PyErr_Occurred() && n < 2)
        PyErr_Format(PyExc_ValueError, "not enough values to unpack (expected 2, got %d)", n);
    else if (!PyErr_Occurred() && n == 3)
        PyErr_SetString(PyExc_ValueError, "too many values to unpack (expected 2)");
    if (PyErr_Occurred()) {
        for (int k = 0; k < 3; k++)
            Py_XDECREF(x[k]);
        return -1;
    }
    *a = x[0], *b = x[1];
    return 0;
}

/* -- requests let go, kept for the next: a Send, Sleep or TryRecv (the classes of host_setup) the host
 * carried out and held the last reference to is kept -- untracked by the GC and its slots emptied, so
 * no Python code can reach it -- and made the host API's next request of its class (hostapi.h), every
 * slot written again: one tp_alloc and one subtype_dealloc fewer per request (three a packet of a
 * traffic test: its sleep, its send, its try_recv) */
#define HO_OPS_KEEP 4
static struct { int n; PyObject *o[HO_OPS_KEEP]; } ho_ops[3]; /* Send, Sleep, TryRecv */

static inline int ho_op_kind(PyTypeObject *t)
{
    return t == SendT ? 0 : t == SleepT ? 1 : t == TryRecvT ? 2 : -1;
}

/* the request's slots (their offsets; how many) */
static inline int ho_op_slots(int k, Py_ssize_t *off)
{
    if (k == 0) {
        off[0] = sd_dst, off[1] = sd_data, off[2] = sd_tag, off[3] = sd_vc, off[4] = sd_request;
        return 5;
    }
    if (k == 1) {
        off[0] = sl_ns;
        return 1;
    }
    off[0] = rv_src, off[1] = rv_tag;
    return 2;
}

/* Py_DECREF(op), the request kept instead when it is one of the three and this is its last reference */
static void ho_op_drop(PyObject *op)
{
    int k;
    if (op == NULL || Py_REFCNT(op) != 1 || Py_TYPE(op) == NULL || (k = ho_op_kind(Py_TYPE(op))) < 0 ||
        ho_ops[k].n >= HO_OPS_KEEP) {
        Py_XDECREF(op);
        return;
    }
    if (PyObject_GC_IsTracked(op))
        PyObject_GC_UnTrack(op);
    Py_ssize_t off[5];
    int n = ho_op_slots(k, off);
    for (int i = 0; i < n; i++)
        Py_CLEAR(SLOT(op, off[i])); /* (a slot's last reference may run code: op is out of its reach by now) */
    if (ho_ops[k].n >= HO_OPS_KEEP || Py_REFCNT(op) != 1) { /* (that code filled the list) */
        Py_DECREF(op);
        return;
    }
    ho_ops[k].o[ho_ops[k].n++] = op;
}

/* a new request of class ``t`` (its slots NULL, tracked by the GC): a kept one, else t->tp_alloc's */
static PyObject *ho_op_take(PyTypeObject *t)
{
    int k = ho_op_kind(t);
    while (k >= 0 && ho_ops[k].n > 0) {
        PyObject *op = ho_ops[k].o[--ho_ops[k].n];
        if (Py_TYPE(op) == t) {
            PyObject_GC_Track(op);
            return op;
        }
        Py_DECREF(op); /* (of a class set up before: let go) */
    }
    return t->tp_alloc(t, 0);
}

/* host_handlers[t] (borrowed; NULL: none, or NULL with an error): the last few hits kept per the
 * dict's version (3.11: ma_version_tag; a hit's handler held by the dict while its version stands) --
 * a dict lookup per request otherwise */
#define HH_N 4
static struct { PyObject *d; uint64_t ver; PyTypeObject *t; PyObject *h; } hh_cache[HH_N];
static unsigned hh_next;

static inline PyObject *handler_of(PyTypeObject *t)
{
#if PY_VERSION_HEX < 0x030C0000
    uint64_t ver = ((PyDictObject *)host_handlers)->ma_version_tag;
    for (int i = 0; i < HH_N; i++)
        if (hh_cache[i].t == t && hh_cache[i].d == host_handlers && hh_cache[i].ver == ver && ver)
            return hh_cache[i].h;
    PyObject *h = PyDict_GetItemWithError(host_handlers, (PyObject *)t);
    if (h != NULL) {
        unsigned i = hh_next++ % HH_N;
        hh_cache[i].d = host_handlers, hh_cache[i].ver = ver, hh_cache[i].t = t, hh_cache[i].h = h;
    }
    return h;
#else
    return PyDict_GetItemWithError(host_handlers, (PyObject *)t);
#endif
}

/* Host.resume((proc, value)): the application steps until it waits or ends, its requests carried
 * out (a send's and a receive's plain cases here, the rest by the handler table). ``proc`` and
 * ``value`` borrowed (held by the caller); ``arg`` the (proc, value) tuple the caller has, or NULL
 * (one made only for Python's resume: a deliver's taker resumed here needs none). 0, -1 error. */
static int host_resume_with(PyObject *host, PyObject *proc, PyObject *value, PyObject *arg)
{
    PyObject *coro;
    if (!host_plain(host) || Py_TYPE(proc) != ProcT || SLOT(proc, pr_done) == NULL ||
        (coro = SLOT(proc, pr_coro)) == NULL || !PyCoro_CheckExact(coro)) { /* Python's resume */
        PyObject *made = arg != NULL ? Py_NewRef(arg) : PyTuple_Pack(2, proc, value);
        if (made == NULL)
            return -1;
        PyObject *args[2] = {host, made};
        int rc = call_drop(PyObject_Vectorcall(f_resume, args, 2, NULL));
        Py_DECREF(made);
        return rc;
    }
    int d = PyObject_IsTrue(SLOT(proc, pr_done));
    if (d)
        return d < 0 ? -1 : 0;
    Py_INCREF(proc);
    Py_INCREF(coro);
    Py_INCREF(value);
    PyObject *was = SLOT(proc, pr_waiting); /* (proc.waiting = None: the request it waited for let go) */
    SLOT(proc, pr_waiting) = Py_NewRef(Py_None);
    ho_op_drop(was);
    Py_XSETREF(SLOT(proc, pr_busy), Py_NewRef(Py_False));
    Py_XSETREF(SLOT(host, h_current), Py_NewRef(proc));
    int rc = -1;
    for (;;) {
        PyObject *op = NULL;
        PySendResult sr = PyIter_Send(coro, value, &op);
        Py_CLEAR(value);
        n_host_steps++;
        if (sr == PYGEN_RETURN) { /* StopIteration: the app's result */
            PyObject *now = NIC_GET(SLOT(host, h_nic), N_NOW); /* (self.now) */
            if (now == NULL) {
                Py_DECREF(op);
                break;
            }
            Py_XSETREF(SLOT(proc, pr_done), Py_NewRef(Py_True));
            Py_XSETREF(SLOT(proc, pr_result), op);
            Py_XSETREF(SLOT(proc, pr_finished), now);
            rc = 0;
            break;
        }
        if (sr == PYGEN_ERROR) {
            if (PyErr_ExceptionMatches(PyExc_Exception)) /* (from the app's frames: the traceback's start) */
                rc = host_failed(host, proc, s_app_failed, 1);
            break;
        }
        PyObject *handler = handler_of(Py_TYPE(op)); /* (borrowed) */
        int k = 2;
        if (handler == f_op_send && Py_TYPE(op) == SendT)
            k = op_send(host, proc, op, &value);
        else if (handler == f_op_recv && Py_TYPE(op) == RecvT)
            k = op_recv(host, proc, op, &value, 0);
        else if (handler != NULL && handler == f_op_try_recv && Py_TYPE(op) == TryRecvT) {
            k = op_recv(host, proc, op, &value, 1);
            n_host_try_recvs += k == 1;
        } else if (handler != NULL && handler == f_op_sleep && Py_TYPE(op) == SleepT) {
            k = op_sleep(host, proc, op);
            n_host_sleeps += k == 0;
        }
        else if (handler == NULL && PyErr_Occurred())
            k = -1;
        if (k < 0 && handler != NULL &&
            (handler == f_op_send || handler == f_op_recv || handler == f_op_try_recv || handler == f_op_sleep) &&
            PyErr_ExceptionMatches(PyExc_Exception)) {
            Py_DECREF(op); /* (inside the handler in Python: the app fails) */
            rc = host_failed(host, proc, s_op_failed, 0);
            break;
        }
        if (k == 2) { /* the handler's (or _dispatch's), in Python */
            PyObject *r = handler != NULL ? PyObject_Vectorcall(handler, (PyObject *[]){host, proc, op}, 3, NULL)
                                          : PyObject_CallMethodObjArgs(host, s_dispatch, proc, op, NULL);
            PyObject *ready = NULL;
            if (r == NULL || unpack2(r, &ready, &value) < 0) { /* (ready, value = ...: inside the try too) */
                Py_XDECREF(r);
                Py_DECREF(op);
                if (PyErr_ExceptionMatches(PyExc_Exception)) /* misuse of the API inside the app: the app fails */
                    rc = host_failed(host, proc, s_op_failed, 0);
                break;
            }
            Py_DECREF(r);
            k = PyObject_IsTrue(ready);
            Py_DECREF(ready);
        }
        if (k < 0) {
            Py_DECREF(op);
            break;
        }
        if (k == 0) { /* not ready: proc.waiting, proc.since_ns = op, self.nic.now */
            Py_CLEAR(value);
            PyObject *now = NIC_GET(SLOT(host, h_nic), N_NOW);
            if (now == NULL) {
                Py_DECREF(op);
                break;
            }
            Py_XSETREF(SLOT(proc, pr_waiting), op);
            Py_XSETREF(SLOT(proc, pr_since), now);
            rc = 0;
            break;
        }
        ho_op_drop(op);
    }
    Py_XDECREF(value);
    Py_DECREF(coro);
    Py_DECREF(proc);
    return rc;
}

/* Host.resume(arg) as a timer calls it: a (proc, value) tuple here, anything else Python's */
static int host_resume(PyObject *host, PyObject *arg)
{
    if (!PyTuple_CheckExact(arg) || PyTuple_GET_SIZE(arg) != 2) { /* Python's resume */
        PyObject *args[2] = {host, arg};
        return call_drop(PyObject_Vectorcall(f_resume, args, 2, NULL));
    }
    return host_resume_with(host, PyTuple_GET_ITEM(arg, 0), PyTuple_GET_ITEM(arg, 1), arg);
}

/* Host.deliver(msg): the message to the first application waiting for it (not busy), else to the
 * inbox -- a Message as the NIC makes it (its source's name a str, its tag an int), the waiting
 * receives' src and tag None or ints: no Python code runs until the match; anything else Python's
 * from the start. 0, -1 error. */
static int host_deliver(PyObject *host, PyObject *msg)
{
    PyObject *ids, *procs, *inbox, *src = NULL, *tag;
    if (!host_plain(host) || Py_TYPE(msg) != MessageT || PyTuple_GET_SIZE(msg) < 2 ||
        !PyUnicode_CheckExact(PyTuple_GET_ITEM(msg, 0)) || !PyLong_CheckExact(tag = PyTuple_GET_ITEM(msg, 1)) ||
        (ids = SLOT(host, h_host_ids)) == NULL || !PyDict_CheckExact(ids) || (procs = SLOT(host, h_procs)) == NULL ||
        !PyList_CheckExact(procs) || (inbox = SLOT(host, h_inbox)) == NULL || !PyList_CheckExact(inbox) ||
        SLOT(host, h_spec) == NULL || SLOT(host, h_noise) != Py_None ||
        ((src = PyDict_GetItemWithError(ids, PyTuple_GET_ITEM(msg, 0))) != NULL && !PyLong_CheckExact(src))) {
        if (PyErr_Occurred())
            return -1;
        PyObject *args[2] = {host, msg};
        return call_drop(PyObject_Vectorcall(f_deliver, args, 2, NULL));
    }
    if (src == NULL && PyErr_Occurred())
        return -1;
    PyObject *srco = src != NULL ? Py_NewRef(src) : PyLong_FromLong(-1); /* host_ids.get(msg.src, -1) */
    if (srco == NULL)
        return -1;
    PyObject *taker = NULL; /* the first proc waiting for it, not busy */
    int rc = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(procs); i++) {
        PyObject *proc = PyList_GET_ITEM(procs, i), *w, *busy;
        if (Py_TYPE(proc) != ProcT || (w = SLOT(proc, pr_waiting)) == NULL || (busy = SLOT(proc, pr_busy)) == NULL ||
            (busy != Py_True && busy != Py_False)) {
            rc = -2; /* (Python's, from the start: nothing changed) */
            break;
        }
        if (w == Py_None || !PyObject_TypeCheck(w, RecvT))
            continue;
        if (Py_TYPE(w)->tp_basicsize != RecvT->tp_basicsize || !int_or_none(SLOT(w, rv_src)) ||
            !int_or_none(SLOT(w, rv_tag))) {
            rc = -2;
            break;
        }
        if (busy == Py_False && recv_matches(w, srco, tag)) {
            taker = proc;
            break;
        }
    }
    Py_DECREF(srco);
    long long ro = 0;
    int k = rc == -2 || taker == NULL ? 1 : take_ll(spec_get(SLOT(host, h_spec), s_recv_overhead_ns, SP_RECV_OVERHEAD), &ro);
    if (k < 0)
        return -1;
    if (rc == -2 || k == 0) { /* (recv_overhead_ns not an int: Python's too) */
        PyObject *args[2] = {host, msg};
        return call_drop(PyObject_Vectorcall(f_deliver, args, 2, NULL));
    }
    if (taker == NULL) /* self._inbox.append(msg) */
        return PyList_Append(inbox, msg);
    /* taken: (True, msg) without receive overhead (resume), else _received (it waits: waiting None) */
    Py_INCREF(taker);
    PyObject *value = NULL;
    int ready = host_received(host, taker, msg, ro, &value);
    if (ready == 1)
        rc = host_resume_with(host, taker, value, NULL); /* (self.resume((taker, value)): no tuple in the core) */
    else if (ready == 0) {
        Py_XSETREF(SLOT(taker, pr_waiting), Py_NewRef(Py_None));
        rc = 0;
    } else
        rc = -1;
    Py_XDECREF(value);
    Py_DECREF(taker);
    return rc;
}

/* Timers.run_due(now): every timer due by ``now`` called in order (the cancelled ones dropped), a
 * host's resume and deliver here; then its next. A new reference (next, or None), NULL error. */
static PyObject *timers_run_due(PyObject *timers, PyObject *now)
{
    PyObject *heap, *cancelled;
    long long nowv;
    if (Py_TYPE(timers) != TimersT || tm_next < 0 || !classes_plain() ||
        (heap = SLOT(timers, tm_heap)) == NULL || !PyList_CheckExact(heap) ||
        (cancelled = SLOT(timers, tm_cancelled)) == NULL || !PySet_CheckExact(cancelled) || !get_ll(now, &nowv))
        return PyObject_CallMethodOneArg(timers, s_run_due, now);
    Py_INCREF(heap);
    Py_INCREF(cancelled);
    PyObject *result = NULL;
    for (;;) {
        if (PyList_GET_SIZE(heap) == 0)
            break;
        PyObject *head = PyList_GET_ITEM(heap, 0), *t0;
        long long tv;
        if (!PyTuple_Check(head) || PyTuple_GET_SIZE(head) < 1) {
            PyErr_SetString(PyExc_TypeError, "a timer is not a (t, id, fn, arg) tuple");
            goto done;
        }
        t0 = PyTuple_GET_ITEM(head, 0);
        int due = get_ll(t0, &tv) ? tv <= nowv : PyObject_RichCompareBool(t0, now, Py_LE);
        if (due < 0)
            goto done;
        if (!due)
            break;
        PyObject *item = heap_pop(heap);
        if (item == NULL)
            goto done;
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 4) {
            Py_DECREF(item);
            PyErr_SetString(PyExc_ValueError, "a timer is not a (t, id, fn, arg) tuple");
            goto done;
        }
        PyObject *tid = PyTuple_GET_ITEM(item, 1), *fn = PyTuple_GET_ITEM(item, 2), *arg = PyTuple_GET_ITEM(item, 3);
        int skip = 0;
        if (PySet_GET_SIZE(cancelled)) { /* (empty unless something was cancelled) */
            skip = PySet_Contains(cancelled, tid);
            if (skip > 0 && PySet_Discard(cancelled, tid) < 0)
                skip = -1;
        }
        int rc = 0;
        if (skip < 0)
            rc = -1;
        else if (!skip) { /* fn(arg): a host's resume and deliver here */
            PyObject *f = PyMethod_Check(fn) ? PyMethod_GET_FUNCTION(fn) : NULL, *s;
            if (f != NULL && f == f_resume && Py_TYPE(s = PyMethod_GET_SELF(fn)) == HostT) {
                PyObject *sf = ih_fired_fn, *sa = ih_fired_arg; /* (item holds fn and arg until tm_keep below) */
                ih_fired_fn = fn;
                ih_fired_arg = PyTuple_CheckExact(arg) && PyTuple_GET_SIZE(arg) == 2 ? arg : NULL;
                rc = host_resume(s, arg);
                ih_fired_fn = sf, ih_fired_arg = sa;
            } else if (f != NULL && f == f_deliver && Py_TYPE(s = PyMethod_GET_SELF(fn)) == HostT)
                rc = host_deliver(s, arg);
            else
                rc = call_drop(PyObject_CallOneArg(fn, arg));
        }
        tm_keep(item); /* (made again by a later timers_at when nobody else holds it: csrc/nic.h) */
        if (rc < 0)
            goto done;
    }
    if (PySet_GET_SIZE(cancelled)) {
        result = PyObject_CallMethodNoArgs(timers, s_next_live);
        goto done;
    }
    result = PyList_GET_SIZE(heap) ? PyTuple_GetItem(PyList_GET_ITEM(heap, 0), 0) : Py_None;
    if (result == NULL)
        goto done;
    Py_INCREF(result);
    Py_XSETREF(SLOT(timers, tm_next), Py_NewRef(result));
done:
    Py_DECREF(heap);
    Py_DECREF(cancelled);
    return result;
}

/* NicEngine.on_timer(now): now and a new output list, the timers due run, its next timer. 0 done
 * (*out_p the list), 1 not this case (Python's method), -1 error. */
static int nic_on_timer(PyObject *eng, PyObject *now, PyObject **out_p)
{
    if (HostT == NULL || Py_TYPE(eng) != NicT || !classes_plain())
        return 1;
    int ip = inst_plain(eng);
    if (ip != 1)
        return ip < 0 ? -1 : 1;
    PyObject *out = NULL, *timers = NULL, *nxt = NULL, *old = SLOT(eng, nic_attr[N_OUT].off);
    int rc = -1;
    if (old != NULL && PyList_CheckExact(old) && Py_REFCNT(old) == 1 && PyList_GET_SIZE(old) <= 8) {
        /* (self.out = []: its list, nobody else's, emptied and kept -- none can tell it from a new one) */
        PyObject *v[8];
        Py_ssize_t n = PyList_GET_SIZE(old);
        memcpy(v, ((PyListObject *)old)->ob_item, (size_t)n * sizeof(PyObject *));
        Py_SET_SIZE(old, 0);
        out = Py_NewRef(old);
        for (Py_ssize_t i = 0; i < n; i++)
            Py_DECREF(v[i]);
    } else if ((out = PyList_New(0)) != NULL && NIC_SET(eng, N_OUT, out) < 0)
        Py_CLEAR(out);
    if (out == NULL || NIC_SET(eng, N_NOW, now) < 0 ||
        (timers = NIC_GET(eng, N_TIMERS)) == NULL || (nxt = timers_run_due(timers, now)) == NULL ||
        NIC_SET(eng, N_TIMER, nxt) < 0)
        goto done;
    *out_p = Py_NewRef(out);
    rc = 0;
done:
    Py_XDECREF(out);
    Py_XDECREF(timers);
    Py_XDECREF(nxt);
    return rc;
}

/* -- awaiting a request: Op.__await__ (``return (yield self)``) as a small iterator of its own --
 * the coroutine's await yields the request to the host once, and returns what the host sends back
 * (the generator Python makes per await, without its frame). */
typedef struct {
    PyObject_HEAD
    PyObject *op; /* the request; NULL once yielded */
    int state;    /* 0 not started, 1 the request yielded, 2 done (as the generator's frame states) */
} OpWait;
static PyTypeObject OpWaitT; /* (below: the kept OpWaits are of it) */

/* OpWaits let go, kept for the next awaits (one per await otherwise: a malloc and a free each). Not
 * tracked by the GC and never seen by Python while kept (refcount 0, off every list of objects). */
#define HO_OPWAIT_KEEP 8
static OpWait *ho_opwait_kept[HO_OPWAIT_KEEP];
static int ho_opwait_n;

static void opwait_dealloc(OpWait *w)
{
    Py_CLEAR(w->op);
    if (ho_opwait_n < HO_OPWAIT_KEEP && Py_TYPE(w) == &OpWaitT)
        ho_opwait_kept[ho_opwait_n++] = w;
    else
        PyObject_Free(w);
}

static PySendResult opwait_send(PyObject *self, PyObject *arg, PyObject **result)
{
    OpWait *w = (OpWait *)self;
    if (w->state == 0) { /* the first step: the request to the host */
        if (arg != NULL && arg != Py_None) {
            PyErr_SetString(PyExc_TypeError, "can't send non-None value to a just-started generator");
            return PYGEN_ERROR;
        }
        *result = w->op;
        w->op = NULL;
        w->state = 1;
        return PYGEN_NEXT;
    }
    /* then the host's answer, as the awaited value (once; a generator that ended returns None) */
    *result = Py_NewRef(w->state == 1 && arg != NULL ? arg : Py_None);
    w->state = 2;
    return PYGEN_RETURN;
}

static PyObject *opwait_next(PyObject *self)
{
    PyObject *r;
    PySendResult k = opwait_send(self, Py_None, &r);
    if (k == PYGEN_NEXT)
        return r;
    if (k == PYGEN_RETURN)
        Py_DECREF(r); /* (StopIteration: the value None) */
    return NULL;
}

/* the StopIteration that carries ``value`` (StopIteration(value): a tuple stays one value) */
static void stop_with(PyObject *value)
{
    if (value == Py_None) {
        PyErr_SetNone(PyExc_StopIteration);
        return;
    }
    PyObject *e = PyObject_CallOneArg(PyExc_StopIteration, value);
    if (e != NULL) {
        PyErr_SetObject(PyExc_StopIteration, e);
        Py_DECREF(e);
    }
}

static PyObject *opwait_send_method(PyObject *self, PyObject *arg)
{
    PyObject *r;
    PySendResult k = opwait_send(self, arg, &r);
    if (k == PYGEN_NEXT)
        return r;
    if (k == PYGEN_RETURN) {
        stop_with(r);
        Py_DECREF(r);
    }
    return NULL;
}

/* throw(type[, value[, tb]]): raised where the generator waits (at its yield, which does not catch
 * it), so it ends: the exception goes out -- as generator.throw does, less its frame */
static PyObject *opwait_throw(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    OpWait *w = (OpWait *)self;
    if (nargs < 1 || nargs > 3) {
        PyErr_SetString(PyExc_TypeError, "throw expected at least 1 argument, at most 3");
        return NULL;
    }
    Py_CLEAR(w->op);
    w->state = 2;
    PyObject *typ = args[0], *val = nargs > 1 ? args[1] : Py_None, *tb = nargs > 2 ? args[2] : Py_None;
    if (tb != Py_None && !PyTraceBack_Check(tb)) {
        PyErr_SetString(PyExc_TypeError, "throw() third argument must be a traceback object");
        return NULL;
    }
    if (PyExceptionInstance_Check(typ)) {
        if (val != Py_None) {
            PyErr_SetString(PyExc_TypeError, "instance exception may not have a separate value");
            return NULL;
        }
        val = typ;
        typ = PyExceptionInstance_Class(typ);
    } else if (!PyExceptionClass_Check(typ)) {
        PyErr_Format(PyExc_TypeError, "exceptions must be classes or instances deriving from BaseException, not %s",
                     Py_TYPE(typ)->tp_name);
        return NULL;
    }
    Py_INCREF(typ);
    Py_INCREF(val);
    Py_XINCREF(tb == Py_None ? NULL : tb);
    PyErr_Restore(typ, val, tb == Py_None ? NULL : tb);
    return NULL;
}

/* close(): a generator waiting at its yield ends (GeneratorExit, not caught) */
static PyObject *opwait_close(PyObject *self, PyObject *unused)
{
    OpWait *w = (OpWait *)self;
    Py_CLEAR(w->op);
    w->state = 2;
    Py_RETURN_NONE;
}

static PyMethodDef opwait_methods[] = {
    {"send", opwait_send_method, METH_O, "the host's answer"},
    {"throw", (PyCFunction)(void (*)(void))opwait_throw, METH_FASTCALL, "raise where the await waits"},
    {"close", opwait_close, METH_NOARGS, "end"},
    {NULL, NULL, 0, NULL}};
static PyAsyncMethods opwait_async = {0, 0, 0, opwait_send};
static PyTypeObject OpWaitT = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "emu._core.OpWait",
    .tp_basicsize = sizeof(OpWait),
    .tp_dealloc = (destructor)opwait_dealloc,
    .tp_as_async = &opwait_async,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = opwait_next,
    .tp_methods = opwait_methods,
};

/* Op.__await__(self) */
static PyObject *op_await(PyObject *self, PyObject *unused)
{
    OpWait *w;
    if (ho_opwait_n > 0) { /* (a kept one: made an object again, as PyObject_New would, without the malloc) */
        w = ho_opwait_kept[--ho_opwait_n];
        _Py_NewReference((PyObject *)w);
    } else
        w = PyObject_New(OpWait, &OpWaitT);
    if (w != NULL)
        w->op = Py_NewRef(self), w->state = 0;
    return (PyObject *)w;
}

static PyMethodDef op_await_def = {"__await__", op_await, METH_NOARGS,
                                   "the request yielded to the host once; the host's answer returned"};

/* the await slot of a class whose __await__ is the core's: OpWait straight, without the slot's lookup
 * of __await__ and its call (CPython's slot_am_await) -- set on the classes that had it at
 * await_setup; a class that gets __await__ set since has CPython's slot again (update_slot) */
static PyObject *op_am_await(PyObject *self)
{
    return op_await(self, NULL);
}

static int await_slots(PyTypeObject *t, PyObject *d, PyObject *name)
{
    if ((t->tp_flags & Py_TPFLAGS_HEAPTYPE) && t->tp_as_async == &((PyHeapTypeObject *)t)->as_async &&
        _PyType_Lookup(t, name) == d)
        t->tp_as_async->am_await = op_am_await;
    PyObject *subs = PyObject_CallMethod((PyObject *)t, "__subclasses__", NULL);
    if (subs == NULL || !PyList_Check(subs)) {
        Py_XDECREF(subs);
        return -1;
    }
    int rc = 0;
    for (Py_ssize_t i = 0; rc == 0 && i < PyList_GET_SIZE(subs); i++)
        rc = await_slots((PyTypeObject *)PyList_GET_ITEM(subs, i), d, name);
    Py_DECREF(subs);
    return rc;
}

/* await_setup(Op): Op.__await__ made the core's (its Python one's twin) */
static PyObject *await_setup(PyObject *self, PyObject *op)
{
    if (!PyType_Check(op)) {
        PyErr_SetString(PyExc_TypeError, "await_setup: a class expected");
        return NULL;
    }
    if (PyType_Ready(&OpWaitT) < 0)
        return NULL;
    PyObject *d = PyDescr_NewMethod((PyTypeObject *)op, &op_await_def);
    if (d == NULL)
        return NULL;
    int rc = PyObject_SetAttrString(op, "__await__", d);
    PyObject *name = rc < 0 ? NULL : PyUnicode_InternFromString("__await__");
    rc = name == NULL ? -1 : await_slots((PyTypeObject *)op, d, name);
    Py_XDECREF(name);
    Py_DECREF(d);
    if (rc < 0)
        return NULL;
    Py_RETURN_NONE;
}

#endif /* EMU_CSRC_HOST_H */
