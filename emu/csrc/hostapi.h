/* emu/csrc/hostapi.h: what an application calls on its host, the plain cases -- HostAPI.send (a
 * message to a host by name), HostAPI.sleep and HostAPI.now (part of emu/_core.c, one translation
 * unit; installed on the class by api_setup, at emu.nodes.nic.engine's import, after host_setup).
 * Each is the twin of the Python method it stands in for (emu.nodes.host.api keeps them in
 * _PYTHON: the specification), which is called with the same arguments for anything else -- another
 * engine, keywords, a name not known, anything its checks would refuse -- so that its answers and
 * its errors are Python's own. */
#ifndef EMU_CSRC_HOSTAPI_H
#define EMU_CSRC_HOSTAPI_H

static PyObject *api_py_send, *api_py_sleep, *api_py_now; /* Python's send, sleep and now's getter */
static PyObject *api_py_recv, *api_py_try_recv, *api_py_arrived; /* ... recv, try_recv, arrived_ns */
static PyObject *api_recv_init;                                  /* Recv.__init__ at setup (recv(tag=) makes one) */
static PyObject *s_api_recv, *s_api_try_recv, *s_recv_any, *s_init, *s_src, *s_tag_kw;
static PyObject *api_globals, *api_new_op, *api_horizon;  /* the api module's globals, _new_op, HORIZON_NS */
static long long API_HORIZON;
static PyObject *s_engine, *s_api_send, *s_api_sleep, *s_api_new_op, *s_api_horizon, *s_now;
static PyTypeObject *api_send_t, *api_sleep_t; /* the module's Send and Sleep (SendT and SleepT: their slots known) */

/* the module's globals the methods read (Send, Sleep, _new_op, HORIZON_NS) still those of setup:
 * looked up again only when the dict changed (its version, CPython 3.11) */
static inline int api_globals_same(void)
{
    if (api_globals == NULL || api_send_t == NULL)
        return 0;
#if PY_VERSION_HEX < 0x030C0000
    static uint64_t seen_ver;
    uint64_t ver = ((PyDictObject *)api_globals)->ma_version_tag;
    if (ver == seen_ver && ver)
        return 1;
#endif
    if (PyDict_GetItem(api_globals, s_api_send) != (PyObject *)api_send_t ||
        PyDict_GetItem(api_globals, s_api_sleep) != (PyObject *)api_sleep_t ||
        PyDict_GetItem(api_globals, s_api_new_op) != api_new_op ||
        PyDict_GetItem(api_globals, s_api_horizon) != api_horizon ||
        PyDict_GetItem(api_globals, s_api_recv) != (PyObject *)RecvT ||
        PyDict_GetItem(api_globals, s_api_try_recv) != (PyObject *)TryRecvT)
        return 0;
#if PY_VERSION_HEX < 0x030C0000
    seen_ver = ver;
#endif
    return 1;
}

/* the api's engine when it is a plain Host (a new reference), else NULL (no error: Python's) */
static inline PyObject *api_host(PyObject *api)
{
    PyObject *e = PyObject_GetAttr(api, s_engine);
    if (e == NULL) {
        PyErr_Clear();
        return NULL;
    }
    if (Py_TYPE(e) != HostT || !classes_plain()) {
        Py_DECREF(e);
        return NULL;
    }
    return e;
}

/* Host.now (self.nic.now) of a plain Host whose NIC is a NicEngine: 1 (in *v), 0 not this case */
static inline int api_host_now(PyObject *host, long long *v)
{
    PyObject *nic = SLOT(host, h_nic), *now;
    if (nic == NULL || Py_TYPE(nic) != NicT || (now = NIC_GET(nic, N_NOW)) == NULL) {
        PyErr_Clear();
        return 0;
    }
    int ok = PyLong_CheckExact(now) && get_ll(now, v);
    Py_DECREF(now);
    PyErr_Clear();
    return ok;
}

/* Python's ``fn(self, *args, **kw)`` for the same call */
static PyObject *api_python(PyObject *fn, PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    Py_ssize_t n = nargs + (kwnames != NULL ? PyTuple_GET_SIZE(kwnames) : 0);
    PyObject *small[8], **a = n + 1 <= 8 ? small : PyMem_Malloc((size_t)(n + 1) * sizeof(PyObject *));
    if (a == NULL)
        return PyErr_NoMemory();
    a[0] = self;
    for (Py_ssize_t k = 0; k < n; k++)
        a[k + 1] = args[k];
    PyObject *r = PyObject_Vectorcall(fn, a, (size_t)(nargs + 1), kwnames);
    if (a != small)
        PyMem_Free(a);
    return r;
}

/* an exact int within lo..hi: 1 (in *v), 0 */
static inline int ll_within(PyObject *o, long long lo, long long hi, long long *v)
{
    if (!PyLong_CheckExact(o) || !get_ll(o, v)) {
        PyErr_Clear();
        return 0;
    }
    return *v >= lo && *v <= hi;
}

/* the keyword arguments (``kwnames``, after ``nargs`` positional ones) named n0 and n1 into a[i0], a[i1]
 * (interned: the names as written in a call): 1, 0 another keyword, or one given twice or also by
 * position (Python's errors) */
static int api_kw(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, PyObject **a, PyObject *n0, int i0,
                  PyObject *n1, int i1)
{
    for (Py_ssize_t k = 0; kwnames != NULL && k < PyTuple_GET_SIZE(kwnames); k++) {
        PyObject *n = PyTuple_GET_ITEM(kwnames, k);
        int i = n == n0 ? i0 : n == n1 ? i1 : -1;
        if (i < 0 || i < nargs || a[i] != NULL)
            return 0;
        a[i] = args[nargs + k];
    }
    return 1;
}

/* send's tag and vc given by keyword (``kwnames``, after ``nargs`` positional ones) into a[2], a[3]:
 * 1, 0 another keyword or one given twice (Python's) */
static int api_send_kw(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, PyObject **a)
{
    static PyObject *s_tag, *s_vc;
    if (s_tag == NULL && ((s_tag = PyUnicode_InternFromString("tag")) == NULL ||
                          (s_vc = PyUnicode_InternFromString("vc")) == NULL)) {
        PyErr_Clear();
        return 0;
    }
    return api_kw(args, nargs, kwnames, a, s_tag, 2, s_vc, 3);
}

/* HostAPI.send(dst, data, tag=0, vc=0), tag and vc by position or keyword, ``dst`` a host's name,
 * ``data`` bytes, the tag and VC ints in range: the Send request (object.__new__(Send), its slots set
 * as Python's) */
static PyObject *api_send(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    long long tag = 0, vc = 0;
    PyObject *host = NULL, *ids, *addr, *a[4] = {NULL, NULL, NULL, NULL};
    for (Py_ssize_t k = 0; k < nargs && k < 4; k++)
        a[k] = args[k];
    if (nargs < 2 || nargs > 4 || (kwnames != NULL && !api_send_kw(args, nargs, kwnames, a)) ||
        !PyUnicode_CheckExact(a[0]) || !PyBytes_CheckExact(a[1]) ||
        (a[2] != NULL && !ll_within(a[2], 0, 0xFFFFFFFFLL, &tag)) || (a[3] != NULL && !ll_within(a[3], 0, 255, &vc)) ||
        !api_globals_same() || (host = api_host(self)) == NULL || (ids = SLOT(host, h_host_ids)) == NULL ||
        !PyDict_CheckExact(ids) || (addr = PyDict_GetItemWithError(ids, a[0])) == NULL) {
        Py_XDECREF(host);
        if (PyErr_Occurred())
            return NULL;
        return api_python(api_py_send, self, args, nargs, kwnames);
    }
    Py_INCREF(addr);
    Py_DECREF(host);
    PyObject *op = ho_op_take(api_send_t), *t = a[2] != NULL ? Py_NewRef(a[2]) : PyLong_FromLong(0),
             *v = a[3] != NULL ? Py_NewRef(a[3]) : PyLong_FromLong(0);
    if (op == NULL || t == NULL || v == NULL) {
        Py_XDECREF(op);
        Py_XDECREF(t);
        Py_XDECREF(v);
        Py_DECREF(addr);
        return NULL;
    }
    SLOT(op, sd_dst) = addr; /* (op.dst, op.data, op.tag, op.vc, op.request = addr, data, tag, vc, False) */
    SLOT(op, sd_data) = Py_NewRef(a[1]);
    SLOT(op, sd_tag) = t;
    SLOT(op, sd_vc) = v;
    SLOT(op, sd_request) = Py_NewRef(Py_False);
    return op;
}

/* HostAPI.sleep(ns) for an int ns >= 0 that ends before HORIZON_NS: the Sleep request */
static PyObject *api_sleep(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    long long ns, now;
    PyObject *host = NULL;
    if (kwnames != NULL || nargs != 1 || SleepT == NULL || SleepT != api_sleep_t || !ll_within(args[0], 0, LLONG_MAX, &ns) ||
        !api_globals_same() || (host = api_host(self)) == NULL || !api_host_now(host, &now) || ns >= API_HORIZON - now) {
        Py_XDECREF(host);
        if (PyErr_Occurred())
            return NULL;
        return api_python(api_py_sleep, self, args, nargs, kwnames);
    }
    Py_DECREF(host);
    PyObject *op = ho_op_take(api_sleep_t);
    if (op == NULL)
        return NULL;
    SLOT(op, sl_ns) = Py_NewRef(args[0]);
    return op;
}

/* HostAPI.now (self._engine.now): a plain Host's NIC's now, read in place */
static PyObject *api_now(PyObject *self, void *unused)
{
    PyObject *host = api_host(self);
    if (host != NULL) {
        PyObject *nic = SLOT(host, h_nic), *now = nic != NULL && Py_TYPE(nic) == NicT ? NIC_GET(nic, N_NOW) : NULL;
        Py_DECREF(host);
        if (now != NULL)
            return now;
        PyErr_Clear();
    }
    return PyObject_CallOneArg(api_py_now, self);
}

/* (src=None, tag=None) by position or keyword into a[0], a[1] (NULL: not given): 1, 0 anything else */
static int api_src_tag(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, PyObject **a)
{
    a[0] = a[1] = NULL;
    if (nargs > 2)
        return 0;
    for (Py_ssize_t k = 0; k < nargs; k++)
        a[k] = args[k];
    return api_kw(args, nargs, kwnames, a, s_src, 0, s_tag_kw, 1);
}

/* HostAPI.recv(src=None, tag=None) from any source: the one Recv(None, None) of the API, or a
 * Recv(None, tag) (its slots set as Recv.__init__ sets them, that __init__ the one of setup) */
static PyObject *api_recv(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *a[2];
    if (!api_src_tag(args, nargs, kwnames, a) || (a[0] != NULL && a[0] != Py_None) || !api_globals_same() ||
        RecvT == NULL || _PyType_Lookup(RecvT, s_init) != api_recv_init)
        return api_python(api_py_recv, self, args, nargs, kwnames);
    if (a[1] == NULL || a[1] == Py_None)
        return PyObject_GetAttr(self, s_recv_any);
    PyObject *op = RecvT->tp_alloc(RecvT, 0);
    if (op == NULL)
        return NULL;
    SLOT(op, rv_src) = Py_NewRef(Py_None);
    SLOT(op, rv_tag) = Py_NewRef(a[1]);
    return op;
}

/* HostAPI.try_recv(src=None, tag=None) from any source: a TryRecv(None, tag) */
static PyObject *api_try_recv(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *a[2];
    if (!api_src_tag(args, nargs, kwnames, a) || (a[0] != NULL && a[0] != Py_None) || TryRecvT == NULL ||
        !api_globals_same())
        return api_python(api_py_try_recv, self, args, nargs, kwnames);
    PyObject *op = ho_op_take(TryRecvT);
    if (op == NULL)
        return NULL;
    SLOT(op, rv_src) = Py_NewRef(Py_None);
    SLOT(op, rv_tag) = Py_NewRef(a[1] != NULL ? a[1] : Py_None);
    return op;
}

/* HostAPI.arrived_ns(tag=None) on a plain Host whose inbox holds Messages, the tag None or an int
 * and the messages' tags ints: the first one's t_ns (with that tag), or None -- no Python code runs */
static PyObject *api_arrived_ns(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *host = NULL, *inbox, *tag = nargs == 1 ? args[0] : Py_None;
    if (nargs > 1 || (kwnames != NULL && (nargs || PyTuple_GET_SIZE(kwnames) != 1 ||
                                          PyTuple_GET_ITEM(kwnames, 0) != s_tag_kw)))
        return api_python(api_py_arrived, self, args, nargs, kwnames);
    if (kwnames != NULL)
        tag = args[0];
    if ((tag != Py_None && !PyLong_CheckExact(tag)) || (host = api_host(self)) == NULL ||
        (inbox = SLOT(host, h_inbox)) == NULL || !PyList_CheckExact(inbox))
        goto python;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(inbox); i++) {
        PyObject *m = PyList_GET_ITEM(inbox, i), *mt;
        if (Py_TYPE(m) != MessageT || PyTuple_GET_SIZE(m) < 4 || !PyLong_CheckExact(mt = PyTuple_GET_ITEM(m, 1)))
            goto python;
        if (tag == Py_None || int_eq(mt, tag)) {
            Py_DECREF(host);
            return Py_NewRef(PyTuple_GET_ITEM(m, 3));
        }
    }
    Py_DECREF(host);
    Py_RETURN_NONE;
python:
    Py_XDECREF(host);
    return api_python(api_py_arrived, self, args, nargs, kwnames);
}

static PyMethodDef api_recv_def = {"recv", (PyCFunction)(void (*)(void))api_recv, METH_FASTCALL | METH_KEYWORDS, NULL};
static PyMethodDef api_try_recv_def = {"try_recv", (PyCFunction)(void (*)(void))api_try_recv,
                                       METH_FASTCALL | METH_KEYWORDS, NULL};
static PyMethodDef api_arrived_def = {"arrived_ns", (PyCFunction)(void (*)(void))api_arrived_ns,
                                      METH_FASTCALL | METH_KEYWORDS, NULL};
static PyMethodDef api_send_def = {"send", (PyCFunction)(void (*)(void))api_send, METH_FASTCALL | METH_KEYWORDS,
                                   "Send data to host dst (the compiled core's plain case of HostAPI.send)"};
static PyMethodDef api_sleep_def = {"sleep", (PyCFunction)(void (*)(void))api_sleep, METH_FASTCALL | METH_KEYWORDS,
                                    "Let ns nanoseconds of virtual time pass (the compiled core's plain case)"};
static PyGetSetDef api_now_def = {"now", api_now, NULL, "Current virtual time (ns)", NULL};

/* api_setup(HostAPI, the api module's globals): its send, sleep, recv, try_recv, arrived_ns and now
 * the core's, falling back on the module's _PYTHON (host_setup first) */
static PyObject *api_setup(PyObject *self, PyObject *args)
{
    PyObject *cls, *globals;
    if (!PyArg_ParseTuple(args, "O!O!", &PyType_Type, &cls, &PyDict_Type, &globals))
        return NULL;
    if (HostT == NULL || SendT == NULL || RecvT == NULL) {
        PyErr_SetString(PyExc_ValueError, "api_setup: host_setup first");
        return NULL;
    }
    struct { PyObject **s; const char *n; } names[] = {{&s_engine, "_engine"}, {&s_api_send, "Send"},
        {&s_api_sleep, "Sleep"}, {&s_api_new_op, "_new_op"}, {&s_api_horizon, "HORIZON_NS"}, {&s_now, "now"},
        {&s_api_recv, "Recv"}, {&s_api_try_recv, "TryRecv"}, {&s_recv_any, "_recv_any"}, {&s_init, "__init__"},
        {&s_src, "src"}, {&s_tag_kw, "tag"}};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
        if (*names[k].s == NULL && (*names[k].s = PyUnicode_InternFromString(names[k].n)) == NULL)
            return NULL;
    /* the methods: Python's (as written: a second setup finds them too), the core's, their signatures */
    struct { const char *n; PyMethodDef *def; const char *sig; PyObject **py; } ms[] = {
        {"send", &api_send_def, "($self, /, dst, data, tag=0, vc=0, prio=None)", &api_py_send},
        {"sleep", &api_sleep_def, "($self, /, ns)", &api_py_sleep},
        {"recv", &api_recv_def, "($self, /, src=None, tag=None)", &api_py_recv},
        {"try_recv", &api_try_recv_def, "($self, /, src=None, tag=None)", &api_py_try_recv},
        {"arrived_ns", &api_arrived_def, "($self, /, tag=None)", &api_py_arrived}};
    enum { N_MS = sizeof ms / sizeof ms[0] };
    static PyObject *docs[N_MS + 1];
    PyObject *spec = PyDict_GetItemString(globals, "_PYTHON"), *fn[N_MS], *pn, *getter = NULL, *dn = NULL;
    if (spec == NULL || !PyDict_CheckExact(spec)) {
        PyErr_SetString(PyExc_TypeError, "api_setup: the module has no _PYTHON table of HostAPI's calls");
        return NULL;
    }
    for (int k = 0; k < N_MS; k++)
        if ((fn[k] = PyDict_GetItemString(spec, ms[k].n)) == NULL || !PyFunction_Check(fn[k])) {
            PyErr_Format(PyExc_TypeError, "api_setup: _PYTHON has no function %s", ms[k].n);
            return NULL;
        }
    PyObject *st = PyDict_GetItemWithError(globals, s_api_send), *sl = PyDict_GetItemWithError(globals, s_api_sleep),
             *no = PyDict_GetItemWithError(globals, s_api_new_op), *hz = PyDict_GetItemWithError(globals, s_api_horizon),
             *rv = PyDict_GetItemWithError(globals, s_api_recv), *tr = PyDict_GetItemWithError(globals, s_api_try_recv),
             *init = _PyType_Lookup(RecvT, s_init);
    long long h;
    if (PyErr_Occurred())
        return NULL;
    if ((pn = PyDict_GetItemString(spec, "now")) == NULL || !PyObject_TypeCheck(pn, &PyProperty_Type) ||
        (getter = PyObject_GetAttrString(pn, "fget")) == NULL || !PyFunction_Check(getter) ||
        (dn = PyObject_GetAttrString(pn, "__doc__")) == NULL || !PyUnicode_Check(dn) || st != (PyObject *)SendT ||
        sl == NULL || sl != (PyObject *)SleepT || rv != (PyObject *)RecvT || tr == NULL || tr != (PyObject *)TryRecvT ||
        no == NULL || no != PyDict_GetItemString(PyBaseObject_Type.tp_dict, "__new__") || init == NULL ||
        hz == NULL || !PyLong_CheckExact(hz) || !get_ll(hz, &h)) {
        Py_XDECREF(getter);
        Py_XDECREF(dn);
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "api_setup: HostAPI's now, or the module's Send, Sleep, Recv, TryRecv, "
                                             "_new_op and HORIZON_NS, are not as the core reads them");
        return NULL;
    }
    /* their docs Python's (help(host.send)), with the signature inspect reads */
    for (int k = 0; k < N_MS; k++) {
        PyObject *d = PyObject_GetAttrString(fn[k], "__doc__");
        PyObject *doc = d == NULL ? NULL : PyUnicode_FromFormat("%s%s\n--\n\n%S", ms[k].n, ms[k].sig,
                                                                 PyUnicode_Check(d) ? d : PyUnicode_New(0, 0));
        Py_XDECREF(d);
        if (doc == NULL || (ms[k].def->ml_doc = PyUnicode_AsUTF8(doc)) == NULL) {
            Py_XDECREF(doc);
            Py_DECREF(getter);
            Py_DECREF(dn);
            return NULL;
        }
        Py_XSETREF(docs[k], doc);
    }
    Py_XSETREF(docs[N_MS], dn);
    if ((api_now_def.doc = PyUnicode_AsUTF8(dn)) == NULL) {
        Py_DECREF(getter);
        return NULL;
    }
    for (int k = 0; k < N_MS; k++)
        Py_XSETREF(*ms[k].py, Py_NewRef(fn[k]));
    Py_XSETREF(api_py_now, getter);
    Py_XSETREF(api_globals, Py_NewRef(globals));
    Py_XSETREF(api_new_op, Py_NewRef(no));
    Py_XSETREF(api_horizon, Py_NewRef(hz));
    Py_XSETREF(api_recv_init, Py_NewRef(init));
    API_HORIZON = h;
    api_send_t = SendT, api_sleep_t = SleepT;
    PyTypeObject *t = (PyTypeObject *)cls;
    for (int k = 0; k < N_MS; k++) {
        PyObject *d = PyDescr_NewMethod(t, ms[k].def);
        int bad = d == NULL || PyObject_SetAttrString(cls, ms[k].n, d) < 0;
        Py_XDECREF(d);
        if (bad)
            return NULL;
    }
    PyObject *d_now = PyDescr_NewGetSet(t, &api_now_def);
    int bad = d_now == NULL || PyObject_SetAttrString(cls, "now", d_now) < 0;
    Py_XDECREF(d_now);
    if (bad)
        return NULL;
    Py_RETURN_NONE;
}

#endif /* EMU_CSRC_HOSTAPI_H */
