/* emu/csrc/host.h: the host side of a host node -- NicEngine.on_timer, Timers.run_due, Host.resume,
 * Host.deliver and the send and receive requests' plain cases (part of emu/_core.c, one translation
 * unit; the classes are given by emu.nodes.host.engine at its import -- the substrate does not know
 * them). Each is the twin of the Python it stands in for, which stays the specification: anything
 * these do not take (another class, a method replaced, OS noise, an isend, a request of a NIC
 * mechanism) is handed to that Python before anything changed. */
#ifndef EMU_CSRC_HOST_H
#define EMU_CSRC_HOST_H

static PyTypeObject *HostT, *ProcT, *SendT, *RecvT;
static PyObject *host_handlers;                        /* the host's _HANDLERS: request type -> handler */
static PyObject *f_resume, *f_deliver, *f_op_send, *f_op_recv, *f_on_timer, *f_run_due, *f_nic_at, *f_matches;
static Py_ssize_t pr_coro, pr_waiting, pr_since, pr_done, pr_result, pr_finished, pr_cpu, pr_busy;
static Py_ssize_t sd_dst, sd_data, sd_tag, sd_vc, sd_request, rv_src, rv_tag;
static Py_ssize_t h_nic, h_spec, h_host_ids, h_procs, h_inbox, h_current, h_noise;
static PyObject *s_send_overhead_ns, *s_recv_overhead_ns, *s_app_failed, *s_op_failed, *s_dispatch, *s_next_live,
    *s_run_due, *s_matches, *s_on_timer_name, *s_resume_name, *s_deliver_name, *s_op_send_name, *s_op_recv_name;
static unsigned long long n_host_steps; /* application steps (coroutine sends) run here (counts()) */

/* host_setup(Host, Proc, Send, Recv, handlers): the classes whose slots the core reads in place */
static PyObject *host_setup(PyObject *self, PyObject *args)
{
    PyObject *host, *proc, *send, *recv, *handlers;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!", &PyType_Type, &host, &PyType_Type, &proc, &PyType_Type, &send,
                          &PyType_Type, &recv, &PyDict_Type, &handlers))
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
        {&s_next_live, "_next_live"}, {&s_run_due, "run_due"}, {&s_matches, "matches"}, {&s_on_timer_name, "on_timer"},
        {&s_resume_name, "resume"},
        {&s_deliver_name, "deliver"}, {&s_op_send_name, "_op_send"}, {&s_op_recv_name, "_op_recv"}};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
        if (*names[k].s == NULL && (*names[k].s = PyUnicode_InternFromString(names[k].n)) == NULL)
            return NULL;
    /* the functions the core stands in for, as the classes have them now (a replaced one: Python's) */
    struct { PyObject **f; PyObject *cls; PyObject *name; } fns[] = {
        {&f_resume, host, s_resume_name}, {&f_deliver, host, s_deliver_name}, {&f_op_send, host, s_op_send_name},
        {&f_op_recv, host, s_op_recv_name}, {&f_on_timer, (PyObject *)NicT, s_on_timer_name},
        {&f_run_due, (PyObject *)TimersT, s_run_due}, {&f_nic_at, (PyObject *)NicT, s_at}, {&f_matches, recv, s_matches}};
    for (size_t k = 0; k < sizeof fns / sizeof fns[0]; k++) {
        PyObject *f = PyDict_GetItemWithError(((PyTypeObject *)fns[k].cls)->tp_dict, fns[k].name);
        if (f == NULL || !PyFunction_Check(f)) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_TypeError, "host_setup: %s.%U is not a function of the class",
                             ((PyTypeObject *)fns[k].cls)->tp_name, fns[k].name);
            return NULL;
        }
        Py_XSETREF(*fns[k].f, Py_NewRef(f));
    }
    Py_XSETREF(HostT, (PyTypeObject *)Py_NewRef(host));
    Py_XSETREF(ProcT, (PyTypeObject *)Py_NewRef(proc));
    Py_XSETREF(SendT, (PyTypeObject *)Py_NewRef(send));
    Py_XSETREF(RecvT, (PyTypeObject *)Py_NewRef(recv));
    Py_XSETREF(host_handlers, Py_NewRef(handlers));
    Py_RETURN_NONE;
}

/* cls still has the function the core stands in for under ``name`` */
static inline int same_fn(PyTypeObject *cls, PyObject *name, PyObject *f)
{
    return _PyType_Lookup(cls, name) == f;
}

/* a host the core steps: of the registered class, its NIC one too, none of the methods replaced */
static inline int host_plain(PyObject *host)
{
    PyObject *nic;
    return HostT != NULL && Py_TYPE(host) == HostT && (nic = SLOT(host, h_nic)) != NULL && Py_TYPE(nic) == NicT &&
           same_fn(HostT, s_resume_name, f_resume) && same_fn(HostT, s_deliver_name, f_deliver) &&
           same_fn(NicT, s_at, f_nic_at);
}

static inline int call_drop(PyObject *r)
{
    Py_XDECREF(r);
    return r == NULL ? -1 : 0;
}

/* Host._busy(proc, ns, value, done): the application spends ``ns`` (not 0) of CPU time and continues
 * with ``value`` at ``done``: proc.cpu_ns, proc.busy, the timer that resumes it (host.nic.at) */
static int host_busy(PyObject *host, PyObject *proc, long long ns, PyObject *value, long long done)
{
    if (add_ll(proc, pr_cpu, ns) < 0)
        return -1;
    Py_XSETREF(SLOT(proc, pr_busy), Py_NewRef(Py_True));
    PyObject *nic = SLOT(host, h_nic), *timers = NIC_GET(nic, N_TIMERS);
    PyObject *fn = timers == NULL ? NULL : PyMethod_New(f_resume, host); /* (self.resume) */
    PyObject *arg = fn == NULL ? NULL : PyTuple_Pack(2, proc, value);
    PyObject *t = arg == NULL ? NULL : PyLong_FromLongLong(done);
    int rc = t == NULL ? -1 : timers_at(timers, t, fn, arg);
    Py_XDECREF(timers);
    Py_XDECREF(fn);
    Py_XDECREF(arg);
    Py_XDECREF(t);
    return rc;
}

/* an int attribute of ``o``: 1 (in *v), 0 (not an int: Python's), -1 (error) */
static inline int attr_ll(PyObject *o, PyObject *name, long long *v)
{
    PyObject *x = PyObject_GetAttr(o, name);
    if (x == NULL)
        return -1;
    int ok = get_ll(x, v);
    Py_DECREF(x);
    return ok ? 1 : (PyErr_Occurred() ? -1 : 0);
}

/* an int attribute of a NIC: 1 (in *v), 0 (not an int), -1 (error) */
static inline int nic_ll(PyObject *nic, int k, long long *v)
{
    PyObject *x = NIC_GET(nic, k);
    if (x == NULL)
        return -1;
    int ok = get_ll(x, v);
    Py_DECREF(x);
    return ok ? 1 : (PyErr_Occurred() ? -1 : 0);
}

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
    int k = attr_ll(spec, s_send_overhead_ns, &o);
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

/* the receive ``op`` (a Recv) matches a message from address ``src`` (an int object) with ``tag``:
 * Recv.matches. 1, 0, -1 error */
static int recv_matches(PyObject *op, PyObject *src, PyObject *tag)
{
    PyObject *want_src = SLOT(op, rv_src), *want_tag = SLOT(op, rv_tag);
    if (want_src == NULL || want_tag == NULL) {
        PyErr_SetString(PyExc_AttributeError, "src");
        return -1;
    }
    int m = want_src == Py_None ? 1 : PyObject_RichCompareBool(want_src, src, Py_EQ);
    if (m != 1)
        return m;
    return want_tag == Py_None ? 1 : PyObject_RichCompareBool(want_tag, tag, Py_EQ);
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

/* Host._op_recv(proc, op) for a Recv without OS noise, the inbox's messages Messages from known
 * hosts: 1 the app goes on, 0 it waits, 2 not this case (nothing changed: the handler's), -1 error */
static int op_recv(PyObject *host, PyObject *proc, PyObject *op, PyObject **value)
{
    PyObject *inbox = SLOT(host, h_inbox), *ids = SLOT(host, h_host_ids), *spec = SLOT(host, h_spec);
    if (inbox == NULL || !PyList_CheckExact(inbox) || SLOT(host, h_noise) != Py_None || !same_fn(RecvT, s_matches, f_matches))
        return 2;
    Py_ssize_t n = PyList_GET_SIZE(inbox);
    if (n == 0)
        return 0; /* (most receives: the app waits) */
    if (ids == NULL || !PyDict_CheckExact(ids) || spec == NULL)
        return 2;
    long long ro;
    int k = attr_ll(spec, s_recv_overhead_ns, &ro);
    if (k != 1)
        return k < 0 ? -1 : 2;
    Py_INCREF(inbox);
    int rc = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(inbox); i++) {
        PyObject *m = PyList_GET_ITEM(inbox, i);
        if (Py_TYPE(m) != MessageT || PyTuple_GET_SIZE(m) < 2) {
            rc = 2;
            break;
        }
        PyObject *src = PyDict_GetItemWithError(ids, PyTuple_GET_ITEM(m, 0));
        if (src == NULL) {
            rc = PyErr_Occurred() ? -1 : 2; /* (a KeyError in Python: the handler's) */
            break;
        }
        Py_INCREF(m);
        int match = recv_matches(op, src, PyTuple_GET_ITEM(m, 1));
        if (match == 1) {
            rc = PyList_GET_ITEM(inbox, i) != m || PyList_SetSlice(inbox, i, i + 1, NULL) < 0
                     ? -1 : host_received(host, proc, m, ro, value);
            if (rc == -1 && !PyErr_Occurred())
                PyErr_SetString(PyExc_RuntimeError, "emu._core: the inbox changed while it was read");
        } else if (match < 0)
            rc = -1;
        Py_DECREF(m);
        if (match != 0)
            break;
    }
    Py_DECREF(inbox);
    return rc;
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
    PyObject *r = val == NULL ? NULL
                              : PyObject_CallMethodObjArgs(host, method, proc, val, with_tb ? (tb ? tb : Py_None) : NULL, NULL);
    Py_XDECREF(type);
    Py_XDECREF(val);
    Py_XDECREF(tb);
    return call_drop(r);
}

static int host_deliver(PyObject *host, PyObject *msg);

/* Host.resume((proc, value)): the application steps until it waits or ends, its requests carried
 * out (a send's and a receive's plain cases here, the rest by the handler table). 0, -1 error. */
static int host_resume(PyObject *host, PyObject *arg)
{
    PyObject *proc, *coro;
    if (!host_plain(host) || !PyTuple_CheckExact(arg) || PyTuple_GET_SIZE(arg) != 2 ||
        Py_TYPE(proc = PyTuple_GET_ITEM(arg, 0)) != ProcT || SLOT(proc, pr_done) == NULL ||
        (coro = SLOT(proc, pr_coro)) == NULL || !PyCoro_CheckExact(coro)) { /* Python's resume */
        PyObject *args[2] = {host, arg};
        return call_drop(PyObject_Vectorcall(f_resume, args, 2, NULL));
    }
    int d = PyObject_IsTrue(SLOT(proc, pr_done));
    if (d)
        return d < 0 ? -1 : 0;
    Py_INCREF(proc);
    Py_INCREF(coro);
    PyObject *value = Py_NewRef(PyTuple_GET_ITEM(arg, 1));
    Py_XSETREF(SLOT(proc, pr_waiting), Py_NewRef(Py_None));
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
        PyObject *handler = PyDict_GetItemWithError(host_handlers, (PyObject *)Py_TYPE(op)); /* (borrowed) */
        int k = 2;
        if (handler == f_op_send && Py_TYPE(op) == SendT)
            k = op_send(host, proc, op, &value);
        else if (handler == f_op_recv && Py_TYPE(op) == RecvT)
            k = op_recv(host, proc, op, &value);
        else if (handler == NULL && PyErr_Occurred())
            k = -1;
        if (k == 2) { /* the handler's (or _dispatch's), in Python */
            PyObject *r = handler != NULL ? PyObject_Vectorcall(handler, (PyObject *[]){host, proc, op}, 3, NULL)
                                          : PyObject_CallMethodObjArgs(host, s_dispatch, proc, op, NULL);
            if (r != NULL && (!PyTuple_CheckExact(r) || PyTuple_GET_SIZE(r) != 2)) {
                PyErr_SetString(PyExc_TypeError, "a request handler returned no (ready, value)");
                Py_CLEAR(r);
            }
            if (r == NULL) {
                Py_DECREF(op);
                if (PyErr_ExceptionMatches(PyExc_Exception)) /* misuse of the API inside the app: the app fails */
                    rc = host_failed(host, proc, s_op_failed, 0);
                break;
            }
            k = PyObject_IsTrue(PyTuple_GET_ITEM(r, 0));
            value = Py_NewRef(PyTuple_GET_ITEM(r, 1));
            Py_DECREF(r);
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
        Py_DECREF(op);
    }
    Py_XDECREF(value);
    Py_DECREF(coro);
    Py_DECREF(proc);
    return rc;
}

/* Host.deliver(msg): the message to the first application waiting for it (not busy), else to the
 * inbox. 0, -1 error. */
static int host_deliver(PyObject *host, PyObject *msg)
{
    PyObject *ids, *procs, *inbox, *spec;
    if (!host_plain(host) || Py_TYPE(msg) != MessageT || PyTuple_GET_SIZE(msg) < 2 ||
        (ids = SLOT(host, h_host_ids)) == NULL || !PyDict_CheckExact(ids) || (procs = SLOT(host, h_procs)) == NULL ||
        !PyList_CheckExact(procs) || (inbox = SLOT(host, h_inbox)) == NULL || !PyList_CheckExact(inbox) ||
        (spec = SLOT(host, h_spec)) == NULL || SLOT(host, h_noise) != Py_None) {
        PyObject *args[2] = {host, msg};
        return call_drop(PyObject_Vectorcall(f_deliver, args, 2, NULL));
    }
    PyObject *src = PyDict_GetItemWithError(ids, PyTuple_GET_ITEM(msg, 0)); /* host_ids.get(msg.src, -1) */
    if (src == NULL && PyErr_Occurred())
        return -1;
    PyObject *srco = src != NULL ? Py_NewRef(src) : PyLong_FromLong(-1);
    if (srco == NULL)
        return -1;
    Py_INCREF(procs);
    int rc = 1; /* (1: none waits for it) */
    for (Py_ssize_t i = 0; rc == 1 && i < PyList_GET_SIZE(procs); i++) {
        PyObject *proc = PyList_GET_ITEM(procs, i), *w, *busy;
        if (Py_TYPE(proc) != ProcT || (w = SLOT(proc, pr_waiting)) == NULL || (busy = SLOT(proc, pr_busy)) == NULL) {
            rc = -2; /* (Python's, from the start: nothing changed) */
            break;
        }
        if (!PyObject_TypeCheck(w, RecvT))
            continue;
        if (Py_TYPE(w)->tp_basicsize != RecvT->tp_basicsize) { /* (a subclass with slots of its own: Python's) */
            rc = -2;
            break;
        }
        Py_INCREF(proc);
        Py_INCREF(w);
        int b = PyObject_IsTrue(busy), m = b != 0 ? b : recv_matches(w, srco, PyTuple_GET_ITEM(msg, 1));
        if (b < 0 || m < 0)
            rc = -1;
        else if (!b && m) { /* taken: (True, msg) without receive overhead, else _received */
            long long ro;
            int k = attr_ll(spec, s_recv_overhead_ns, &ro);
            PyObject *value = NULL;
            if (k == 0)
                PyErr_SetString(PyExc_TypeError, "emu._core: recv_overhead_ns is not an integer");
            int ready = k != 1 ? -1 : host_received(host, proc, msg, ro, &value);
            if (ready == 1) {
                PyObject *arg = PyTuple_Pack(2, proc, value);
                rc = arg == NULL ? -1 : host_resume(host, arg);
                Py_XDECREF(arg);
            } else if (ready == 0) {
                Py_XSETREF(SLOT(proc, pr_waiting), Py_NewRef(Py_None));
                rc = 0;
            } else
                rc = -1;
            Py_XDECREF(value);
        }
        Py_DECREF(w);
        Py_DECREF(proc);
    }
    Py_DECREF(procs);
    Py_DECREF(srco);
    if (rc == -2) {
        PyObject *args[2] = {host, msg};
        return call_drop(PyObject_Vectorcall(f_deliver, args, 2, NULL));
    }
    if (rc == 1)
        rc = PyList_Append(inbox, msg);
    return rc;
}

/* Timers.run_due(now): every timer due by ``now`` called in order (the cancelled ones dropped), a
 * host's resume and deliver here; then its next. A new reference (next, or None), NULL error. */
static PyObject *timers_run_due(PyObject *timers, PyObject *now)
{
    PyObject *heap, *cancelled;
    long long nowv;
    if (Py_TYPE(timers) != TimersT || tm_next < 0 || !same_fn(TimersT, s_run_due, f_run_due) ||
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
            if (f != NULL && (f == f_resume || f == f_deliver) && Py_TYPE(s = PyMethod_GET_SELF(fn)) == HostT)
                rc = f == f_resume ? host_resume(s, arg) : host_deliver(s, arg);
            else
                rc = call_drop(PyObject_CallOneArg(fn, arg));
        }
        Py_DECREF(item);
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
    if (HostT == NULL || Py_TYPE(eng) != NicT || !same_fn(NicT, s_on_timer_name, f_on_timer))
        return 1;
    PyObject *out = PyList_New(0), *timers = NULL, *nxt = NULL;
    int rc = -1;
    if (out == NULL || NIC_SET(eng, N_NOW, now) < 0 || NIC_SET(eng, N_OUT, out) < 0 ||
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
} OpWait;

static void opwait_dealloc(OpWait *w)
{
    Py_XDECREF(w->op);
    PyObject_Free(w);
}

static PySendResult opwait_send(PyObject *self, PyObject *arg, PyObject **result)
{
    OpWait *w = (OpWait *)self;
    if (w->op != NULL) { /* the first step: the request to the host */
        *result = w->op;
        w->op = NULL;
        return PYGEN_NEXT;
    }
    *result = Py_NewRef(arg); /* then the host's answer, as the awaited value */
    return PYGEN_RETURN;
}

static PyObject *opwait_next(PyObject *self)
{
    OpWait *w = (OpWait *)self;
    if (w->op != NULL) {
        PyObject *op = w->op;
        w->op = NULL;
        return op;
    }
    return NULL; /* (StopIteration: the value None) */
}

static PyObject *opwait_send_method(PyObject *self, PyObject *arg)
{
    PyObject *r;
    if (opwait_send(self, arg, &r) == PYGEN_NEXT)
        return r;
    _PyGen_SetStopIterationValue(r);
    Py_DECREF(r);
    return NULL;
}

static PyMethodDef opwait_methods[] = {{"send", opwait_send_method, METH_O, "the host's answer"}, {NULL, NULL, 0, NULL}};
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
    OpWait *w = PyObject_New(OpWait, &OpWaitT);
    if (w != NULL)
        w->op = Py_NewRef(self);
    return (PyObject *)w;
}

static PyMethodDef op_await_def = {"__await__", op_await, METH_NOARGS,
                                   "the request yielded to the host once; the host's answer returned"};

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
    Py_DECREF(d);
    if (rc < 0)
        return NULL;
    Py_RETURN_NONE;
}

#endif /* EMU_CSRC_HOST_H */
