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
        PyDict_GetItem(api_globals, s_api_horizon) != api_horizon)
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
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(kwnames); k++) {
        PyObject *n = PyTuple_GET_ITEM(kwnames, k);
        int i = n == s_tag ? 2 : n == s_vc ? 3 : -1; /* (interned: the names as written in a call) */
        if (i < 0 || i < nargs || a[i] != NULL)
            return 0;
        a[i] = args[nargs + k];
    }
    return 1;
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
    PyObject *op = api_send_t->tp_alloc(api_send_t, 0), *t = a[2] != NULL ? Py_NewRef(a[2]) : PyLong_FromLong(0),
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
    PyObject *op = api_sleep_t->tp_alloc(api_sleep_t, 0);
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

static PyMethodDef api_send_def = {"send", (PyCFunction)(void (*)(void))api_send, METH_FASTCALL | METH_KEYWORDS,
                                   "Send data to host dst (the compiled core's plain case of HostAPI.send)"};
static PyMethodDef api_sleep_def = {"sleep", (PyCFunction)(void (*)(void))api_sleep, METH_FASTCALL | METH_KEYWORDS,
                                    "Let ns nanoseconds of virtual time pass (the compiled core's plain case)"};
static PyGetSetDef api_now_def = {"now", api_now, NULL, "Current virtual time (ns)", NULL};

/* api_setup(HostAPI, the api module's globals): its send, sleep and now the core's (host_setup first) */
static PyObject *api_setup(PyObject *self, PyObject *args)
{
    PyObject *cls, *globals;
    if (!PyArg_ParseTuple(args, "O!O!", &PyType_Type, &cls, &PyDict_Type, &globals))
        return NULL;
    if (HostT == NULL || SendT == NULL) {
        PyErr_SetString(PyExc_ValueError, "api_setup: host_setup first");
        return NULL;
    }
    struct { PyObject **s; const char *n; } names[] = {{&s_engine, "_engine"}, {&s_api_send, "Send"},
        {&s_api_sleep, "Sleep"}, {&s_api_new_op, "_new_op"}, {&s_api_horizon, "HORIZON_NS"}, {&s_now, "now"}};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
        if (*names[k].s == NULL && (*names[k].s = PyUnicode_InternFromString(names[k].n)) == NULL)
            return NULL;
    PyTypeObject *t = (PyTypeObject *)cls;
    PyObject *spec = PyDict_GetItemString(globals, "_PYTHON"); /* (Python's, as written: a second setup finds them too) */
    if (spec == NULL || !PyDict_CheckExact(spec)) {
        PyErr_SetString(PyExc_TypeError, "api_setup: the module has no _PYTHON table of HostAPI's send, sleep and now");
        return NULL;
    }
    PyObject *fs = PyDict_GetItemString(spec, "send"), *fl = PyDict_GetItemString(spec, "sleep"),
             *pn = PyDict_GetItemString(spec, "now"), *st = PyDict_GetItemWithError(globals, s_api_send),
             *sl = PyDict_GetItemWithError(globals, s_api_sleep), *no = PyDict_GetItemWithError(globals, s_api_new_op),
             *hz = PyDict_GetItemWithError(globals, s_api_horizon), *getter = NULL;
    long long h;
    if (PyErr_Occurred())
        return NULL;
    if (fs == NULL || !PyFunction_Check(fs) || fl == NULL || !PyFunction_Check(fl) || pn == NULL ||
        !PyObject_TypeCheck(pn, &PyProperty_Type) || (getter = PyObject_GetAttrString(pn, "fget")) == NULL ||
        !PyFunction_Check(getter) || st != (PyObject *)SendT || sl == NULL || !PyType_Check(sl) ||
        sl != (PyObject *)SleepT || no == NULL || no != PyDict_GetItemString(PyBaseObject_Type.tp_dict, "__new__") ||
        hz == NULL || !PyLong_CheckExact(hz) || !get_ll(hz, &h)) {
        Py_XDECREF(getter);
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "api_setup: HostAPI's send, sleep and now, or the module's Send, Sleep, "
                                             "_new_op and HORIZON_NS, are not as the core reads them");
        return NULL;
    }
    /* their docs Python's (help(host.send)), with the signature inspect reads */
    static PyObject *doc_send, *doc_sleep, *doc_now;
    PyObject *ds = PyObject_GetAttrString(fs, "__doc__"), *dl = ds ? PyObject_GetAttrString(fl, "__doc__") : NULL,
             *dn = dl ? PyObject_GetAttrString(pn, "__doc__") : NULL;
    if (dn == NULL || !PyUnicode_Check(ds) || !PyUnicode_Check(dl) || !PyUnicode_Check(dn)) {
        Py_XDECREF(ds);
        Py_XDECREF(dl);
        Py_XDECREF(dn);
        Py_DECREF(getter);
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "api_setup: HostAPI's send, sleep and now have no docstrings");
        return NULL;
    }
    Py_XSETREF(doc_send, PyUnicode_FromFormat("send($self, /, dst, data, tag=0, vc=0, prio=None)\n--\n\n%U", ds));
    Py_XSETREF(doc_sleep, PyUnicode_FromFormat("sleep($self, /, ns)\n--\n\n%U", dl));
    Py_XSETREF(doc_now, Py_NewRef(dn));
    Py_DECREF(ds);
    Py_DECREF(dl);
    Py_DECREF(dn);
    if (doc_send == NULL || doc_sleep == NULL || (api_send_def.ml_doc = PyUnicode_AsUTF8(doc_send)) == NULL ||
        (api_sleep_def.ml_doc = PyUnicode_AsUTF8(doc_sleep)) == NULL || (api_now_def.doc = PyUnicode_AsUTF8(doc_now)) == NULL) {
        Py_DECREF(getter);
        return NULL;
    }
    PyObject *d_send = PyDescr_NewMethod(t, &api_send_def), *d_sleep = PyDescr_NewMethod(t, &api_sleep_def),
             *d_now = PyDescr_NewGetSet(t, &api_now_def);
    Py_XSETREF(api_py_send, Py_NewRef(fs));
    Py_XSETREF(api_py_sleep, Py_NewRef(fl));
    Py_XSETREF(api_py_now, getter);
    Py_XSETREF(api_globals, Py_NewRef(globals));
    Py_XSETREF(api_new_op, Py_NewRef(no));
    Py_XSETREF(api_horizon, Py_NewRef(hz));
    API_HORIZON = h;
    api_send_t = SendT, api_sleep_t = SleepT;
    int rc = d_send == NULL || d_sleep == NULL || d_now == NULL || PyObject_SetAttrString(cls, "send", d_send) < 0 ||
             PyObject_SetAttrString(cls, "sleep", d_sleep) < 0 || PyObject_SetAttrString(cls, "now", d_now) < 0;
    Py_XDECREF(d_send);
    Py_XDECREF(d_sleep);
    Py_XDECREF(d_now);
    if (rc)
        return NULL;
    Py_RETURN_NONE;
}

#endif /* EMU_CSRC_HOSTAPI_H */
