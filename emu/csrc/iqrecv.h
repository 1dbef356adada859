/* emu/csrc/iqrecv.h: the input-queued router's receive of a plain data frame, the twin of
 * switch/iq.py's InputQueuedEngine.receive (with SwitchEngine.receive's table lookup and _file)
 * (part of emu/_core.c, one translation unit).
 *
 *   iq_receive(rx, eng, frame, port, now) -> [] (taken: the frame filed as Python files it), or None
 *
 * None means "not the plain case": nothing was changed, and Python's receive takes the frame. The
 * plain case is a data frame the static table routes (no special packet type, no QsNet packet or
 * ACK, no broadcast, below the hop limit, a route, its port not held), on a router with no routing
 * policy, no pending-operation load, no VC selector, no cut-through in SwitchEngine's sense, no
 * shared pool, of priority 0 at its output, within its VC buffer, and not handed over damaged
 * (``uncharged``). The entries the router's caches lack for its input and output lengths (``_ins``,
 * ``_lines``) it makes first, as receive and _copy make them (rx_ins_fill, rx_lines_fill; a frame the
 * receiver's buffers cannot hold: Python's, which refuses it). Every other decision is taken before
 * anything is written, so a refusal leaves the router as it was, those caches aside.
 */
#ifndef EMU_CSRC_IQRECV_H
#define EMU_CSRC_IQRECV_H

static PyObject *s_uncharged, *s_routes, *s_choose, *s_pending, *s_vc_select, *s_held, *s_cut_through_rx, *s_next_rx,
    *s_timer_rx, *s_hol_waits, *s_forwarded_rx, *rx_inf,
    *rx_0, *rx_m1; /* (0 and -1: CPython's own small ints) */
static unsigned long long n_iq_received;
static PyTypeObject *rx_engt;            /* switch.iq.InputQueuedEngine (set by iqtimer_setup) */
static Py_ssize_t rx_off_next, rx_off_timer; /* its slots _next and timer (csrc/iqtimer.h) */

enum { RX_INS, RX_LINES, RX_OCC, RX_PEAK, RX_ARR, RX_Q, RX_ACTIVE, RX_RCQ, RX_WAITN, RX_WAITB, RX_IQSTATS, RX_STATS,
       RX_PRIOPORTS, RX_ADD, RX_INBPS, RX_OUTBPS, RX_DOWN, RX_V, RX_VCBYTES, RX_GROUPS, RX_VMAX, RX_RK, RX_RC, RX_VCT,
       RX_NPORTS, RX_VCOFF, RX_FLAGPOOL, RX_FB, RX_N };

static int rx_init(void)
{
    struct { PyObject **s; const char *n; } names[] = {
        {&s_uncharged, "uncharged"}, {&s_routes, "routes"}, {&s_choose, "choose"}, {&s_pending, "pending"},
        {&s_vc_select, "vc_select"}, {&s_held, "held"}, {&s_cut_through_rx, "cut_through"}, {&s_next_rx, "_next"},
        {&s_timer_rx, "timer"}, {&s_hol_waits, "hol_waits"}, {&s_forwarded_rx, "forwarded"}};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
        if (*names[k].s == NULL && (*names[k].s = PyUnicode_InternFromString(names[k].n)) == NULL)
            return -1;
    if (rx_inf == NULL && (rx_inf = PyLong_FromLongLong((long long)1 << 62)) == NULL)
        return -1;
    if ((rx_0 == NULL && (rx_0 = PyLong_FromLong(0)) == NULL) || (rx_m1 == NULL && (rx_m1 = PyLong_FromLong(-1)) == NULL))
        return -1;
    return 0;
}

/* the modelled length (``Framing.length``) of a frame of ``n`` bytes and ptype ``pt`` on a link whose
 * framing adds ``add[pt]`` to the body (``Framing.add``: the plain framing's table adds the header and
 * FCS); -1: not a length this code computes (a body carried in a QsNet packet) */
static long long rx_mlen(PyObject *add, Py_ssize_t n, int pt)
{
    long long a;
    if (!PyTuple_CheckExact(add) || PyTuple_GET_SIZE(add) != 256 || !get_ll(PyTuple_GET_ITEM(add, pt), &a) || a < 0)
        return -1;
    return (long long)n - C_HDR_LEN + a;
}

/* What the receive looks up per frame and what seldom changes, kept while it provably has not: a
 * dict's content by its version tag (CPython 3.11: every change of any dict takes a new number from
 * one global counter, and a new dict one too, so an equal tag is the same dict unchanged), a class's
 * attributes by its type version tag. A later CPython: no keeping, every lookup made. */
#if PY_VERSION_HEX < 0x030C0000
#define RX_KEEP 1
#define RX_TC 4096 /* the caches of the routers' ``_ins`` and ``_lines`` (a power of two: an 8x8 mesh's 64
                     * routers have 640 keys, few sharing an entry) */
static struct { PyObject *d; uint64_t ver; long long key; PyObject *t; Py_ssize_t ix; } rx_tc[RX_TC];
#define RX_EC 4096 /* per engine: its plain case's checks passed, its routes and held (a power of two, well
                    * above the routers of a run, two ways: an 8x8 mesh's 64 routers in 1,024 entries of one
                    * way shared one about every other run, each filling it again and again -- 24,000 more
                    * of its lookups in a run, 1 % of its instructions) */
static struct { PyObject *eng; PyTypeObject *type; unsigned int tver; PyObject *dict; uint64_t dver;
                PyObject *routes, *held; } rx_ec[RX_EC];
static inline uint64_t rx_dver(PyObject *d) { return ((PyDictObject *)d)->ma_version_tag; }
#else
#define RX_KEEP 0
#endif

#ifdef FW_DICT_HINTS
/* o (a dict entry's key, NULL: none) is an int (exactly) of the value ``key``: the one entry of a dict
 * that an int key ``key`` finds */
static inline int rx_is_key(PyObject *o, long long key)
{
    long long kv;
    if (o == NULL || !PyLong_CheckExact(o))
        return 0;
    return get_ll(o, &kv) && kv == key; /* (an exact int too big: overflow, no error set) */
}
#endif

/* a dict's (ints...) tuple value under the int key ``key``: borrowed, or NULL (missing, or an error) */
static PyObject *rx_cached(PyObject *d, long long key, Py_ssize_t want)
{
#if RX_KEEP
    size_t h = (size_t)(((unsigned long long)key * 0x9E3779B97F4A7C15ull + (uintptr_t)d * 0xBF58476D1CE4E5B9ull) >> 40) &
               (RX_TC - 1);
    if (rx_tc[h].d == d && rx_tc[h].key == key && PyDict_CheckExact(d) && rx_tc[h].ver == rx_dver(d))
        return rx_tc[h].t; /* (the dict unchanged: it still holds that tuple) */
#endif
#ifdef FW_DICT_HINTS
    /* (the dict changed since -- a value written, another key's: the entry where the key was, when it
     * still holds an int of that value, holds the key's value -- common.h's fw_dict_values' check) */
    if (rx_tc[h].d == d && rx_tc[h].key == key && PyDict_CheckExact(d)) {
        fw_dk_t *dk = (fw_dk_t *)((PyDictObject *)d)->ma_keys;
        Py_ssize_t ix = rx_tc[h].ix;
        fw_dge_t *e = (fw_dge_t *)(dk->dk_indices + ((size_t)1 << dk->dk_log2_index_bytes)) + ix;
        if (dk->dk_kind == 0 && ((PyDictObject *)d)->ma_values == NULL && ix >= 0 && ix < dk->dk_nentries &&
            e->value != NULL && rx_is_key(e->key, key)) {
            PyObject *t = e->value;
            if (!PyTuple_CheckExact(t) || PyTuple_GET_SIZE(t) != want)
                return NULL;
            rx_tc[h].ver = rx_dver(d), rx_tc[h].t = t;
            return t;
        }
    }
#endif
    PyObject *k = PyLong_FromLongLong(key);
    if (k == NULL)
        return NULL;
    PyObject *t = PyDict_CheckExact(d) ? PyDict_GetItemWithError(d, k) : NULL;
    Py_DECREF(k);
    if (t == NULL || !PyTuple_CheckExact(t) || PyTuple_GET_SIZE(t) != want)
        return NULL;
#if RX_KEEP
    rx_tc[h].d = d;
    rx_tc[h].ver = rx_dver(d);
    rx_tc[h].key = key;
    rx_tc[h].t = t;
    rx_tc[h].ix = -1;
#ifdef FW_DICT_HINTS
    if (((PyDictObject *)d)->ma_values == NULL) {
        fw_dk_t *dk = (fw_dk_t *)((PyDictObject *)d)->ma_keys;
        fw_dge_t *e = (fw_dge_t *)(dk->dk_indices + ((size_t)1 << dk->dk_log2_index_bytes));
        for (Py_ssize_t i = dk->dk_kind == 0 ? dk->dk_nentries - 1 : -1; i >= 0; i--)
            if (e[i].value == t && rx_is_key(e[i].key, key)) { /* (its entry) */
                rx_tc[h].ix = i;
                break;
            }
    }
#endif
#endif
    return t;
}

/* ``-((-n * 8_000_000_000) // bps[p])`` (InputQueuedEngine._ser_in / _ser_out): a frame of n bytes' time
 * on the line of port p, the rate an int in the dict ``bps``; 0 with *ok unset when not computable here */
static long long rx_ser(PyObject *bps, long long p, long long n, int *ok)
{
    PyObject *k = PyLong_FromLongLong(p), *b = k == NULL || !PyDict_CheckExact(bps) ? NULL : PyDict_GetItemWithError(bps, k);
    Py_XDECREF(k);
    long long r;
    if (b == NULL || !get_ll(b, &r) || r <= 0 || n < 0 || n > 1000000000) {
        PyErr_Clear();
        *ok = 0;
        return 0;
    }
    return (n * 8000000000LL + r - 1) / r;
}

/* d[key] = a tuple of ``m`` ints (the receive's caches: ``_ins``, ``_lines``), borrowed from d; NULL
 * with an error */
static PyObject *rx_fill(PyObject *d, long long key, const long long *v, int m)
{
    if (!PyDict_CheckExact(d))
        return NULL;
    PyObject *k = PyLong_FromLongLong(key);
    if (k == NULL)
        return NULL;
    if (PyDict_GetItemWithError(d, k) != NULL || PyErr_Occurred()) { /* (there, but not a tuple of ints: Python's) */
        Py_DECREF(k);
        return NULL;
    }
    PyObject *items[4] = {NULL, NULL, NULL, NULL};
    for (int i = 0; i < m; i++)
        items[i] = PyLong_FromLongLong(v[i]);
    PyObject *t = tuple_steal(m, items);
    int rc = t == NULL ? -1 : PyDict_SetItem(d, k, t);
    Py_DECREF(k);
    Py_XDECREF(t); /* (held by the dict) */
    return rc < 0 ? NULL : t;
}

/* InputQueuedEngine.receive's ``_ins`` entry for input ``port`` and modelled length ``n``: (its whole
 * flits, its tail's time behind its head's), made and stored as Python makes it; borrowed, NULL (not
 * computable here: nothing stored, no error; or an error) */
static PyObject *rx_ins_fill(PyObject *const *rx, long long fb, long long port, long long n)
{
    int ok = 1;
    long long v[2], f = n < fb ? n : fb;
    v[0] = (n + fb - 1) / fb * fb;
    v[1] = rx_ser(rx[RX_INBPS], port, n, &ok) - rx_ser(rx[RX_INBPS], port, f, &ok);
    return ok && n > 0 ? rx_fill(rx[RX_INS], port << 32 | n, v, 2) : NULL;
}

/* InputQueuedEngine._copy's ``_lines`` entry for output ``out`` and modelled length ``n``: (need, time on
 * the line, from its head's start to its tail's, its part for the receiver's VC buffer), made and
 * stored as Python makes it; borrowed, NULL (not computable here -- a frame the receiver's buffers
 * cannot hold: Python's error -- nothing stored, no error; or an error) */
static PyObject *rx_lines_fill(PyObject *const *rx, long long fb, long long out, long long n)
{
    PyObject *down = rx[RX_DOWN], *d = PyList_CheckExact(down) && out < PyList_GET_SIZE(down) ? PyList_GET_ITEM(down, out) : Py_None;
    long long dv[4] = {0, 0, 0, 0}, need = 0;
    int ok = n > 0;
    if (d != Py_None) {
        if (!PyTuple_CheckExact(d) || PyTuple_GET_SIZE(d) != 4)
            return NULL;
        for (int i = 0; i < 4; i++)
            if (!get_ll(PyTuple_GET_ITEM(d, i), &dv[i]))
                return NULL;
        if (dv[2] <= 0)
            return NULL;
        need = (n + dv[2] - 1) / dv[2] * dv[2];
        if (need > dv[1] + dv[3])
            return NULL; /* (Python's _need refuses it) */
    }
    long long v[4], f = n < fb ? n : fb;
    v[0] = need;
    v[1] = rx_ser(rx[RX_OUTBPS], out, n, &ok);
    v[2] = v[1] - rx_ser(rx[RX_OUTBPS], out, f, &ok);
    v[3] = d == Py_None || need < dv[1] ? need : dv[1];
    return ok ? rx_fill(rx[RX_LINES], out << 32 | n, v, 4) : NULL;
}

/* getattr(eng, name), a new reference: from the instance dict directly when Python's generic getattr
 * would take it from there (no data descriptor of that name on the class, no __getattribute__ or
 * __getattr__ of its own), else by PyObject_GetAttr */
static PyObject *iq_attr(PyObject *eng, PyObject *name)
{
    PyTypeObject *t = Py_TYPE(eng);
    if (t->tp_getattro == PyObject_GenericGetAttr) {
        PyObject *ca = _PyType_Lookup(t, name), **dp;
        if ((ca == NULL || Py_TYPE(ca)->tp_descr_set == NULL) && (dp = _PyObject_GetDictPtr(eng)) != NULL &&
            *dp != NULL && PyDict_CheckExact(*dp)) {
            PyObject *v = PyDict_GetItemWithError(*dp, name);
            if (v != NULL)
                return Py_NewRef(v);
            if (PyErr_Occurred())
                return NULL;
        }
    }
    return PyObject_GetAttr(eng, name);
}

/* setattr(eng, name, v): into the instance dict directly when Python's generic setattr would put it
 * there (no data descriptor of that name on the class, no __setattr__ of its own) */
static int iq_setattr(PyObject *eng, PyObject *name, PyObject *v)
{
    PyTypeObject *t = Py_TYPE(eng);
    if (t->tp_setattro == PyObject_GenericSetAttr) {
        PyObject *ca = _PyType_Lookup(t, name), **dp;
        if ((ca == NULL || Py_TYPE(ca)->tp_descr_set == NULL) && (dp = _PyObject_GetDictPtr(eng)) != NULL &&
            *dp != NULL && PyDict_CheckExact(*dp))
            return PyDict_SetItem(*dp, name, v);
    }
    return PyObject_SetAttr(eng, name, v);
}

/* an attribute of the engine is None / an empty set: 1, 0 (not), -1 (error) */
static int rx_none(PyObject *eng, PyObject *name)
{
    PyObject *v = iq_attr(eng, name);
    if (v == NULL)
        return -1;
    int r = v == Py_None;
    Py_DECREF(v);
    return r;
}

/* The engine's side of the plain case: ``uncharged`` False, ``choose``, ``pending`` and ``vc_select``
 * None, ``cut_through`` False: 1 (``*routes`` and ``*held``, new references), 0 (not the plain case),
 * -1 (an error). Kept per engine while its instance dict and its class are unchanged (``rx_ec``):
 * then none of the five changed, nor which objects ``routes`` and ``held`` are (their contents, which
 * change in place, the caller reads every time). */
static int rx_engine(PyObject *eng, PyObject **routes, PyObject **held)
{
    *routes = *held = NULL;
#if RX_KEEP
    PyTypeObject *t = Py_TYPE(eng);
    PyObject **dp = _PyObject_GetDictPtr(eng), *d = dp != NULL ? *dp : NULL;
    int can = d != NULL && PyDict_CheckExact(d) && PyType_HasFeature(t, Py_TPFLAGS_VALID_VERSION_TAG);
    unsigned int tver = can ? t->tp_version_tag : 0;
    uint64_t dver = can ? rx_dver(d) : 0;
    size_t h = (size_t)(((uint64_t)(uintptr_t)eng * 0x9E3779B97F4A7C15ULL) >> 52); /* (of RX_EC: 4096) */
    __typeof__(rx_ec[0]) *e = &rx_ec[way2(h, rx_ec[h].eng, rx_ec[h ^ 1].eng, eng)];
    if (can && e->eng == eng && e->type == t && e->tver == tver && e->dict == d && e->dver == dver) {
        *routes = Py_NewRef(e->routes);
        *held = Py_NewRef(e->held);
        return 1;
    }
#endif
    PyObject *un = iq_attr(eng, s_uncharged);
    if (un == NULL)
        return -1;
    int charged = un == Py_False;
    Py_DECREF(un);
    if (!charged)
        return 0;
    PyObject *names[] = {s_choose, s_pending, s_vc_select};
    for (int i = 0; i < 3; i++) {
        int r = rx_none(eng, names[i]);
        if (r <= 0)
            return r;
    }
    PyObject *ct = iq_attr(eng, s_cut_through_rx);
    if (ct == NULL)
        return -1;
    int cut = ct != Py_False;
    Py_DECREF(ct);
    if (cut)
        return 0;
    if ((*routes = iq_attr(eng, s_routes)) == NULL || (*held = iq_attr(eng, s_held)) == NULL) {
        Py_CLEAR(*routes);
        return -1;
    }
#if RX_KEEP
    /* kept when nothing above changed the dict or the class, and both objects are the dict's own (held
     * by it while it is unchanged) */
    if (can && Py_TYPE(eng) == t && PyType_HasFeature(t, Py_TPFLAGS_VALID_VERSION_TAG) && t->tp_version_tag == tver &&
        *dp == d && rx_dver(d) == dver && PyDict_GetItemWithError(d, s_routes) == *routes &&
        PyDict_GetItemWithError(d, s_held) == *held) {
        e->eng = eng;
        e->type = t;
        e->tver = tver;
        e->dict = d;
        e->dver = dver;
        e->routes = *routes;
        e->held = *held;
    }
    if (PyErr_Occurred()) {
        Py_CLEAR(*routes);
        Py_CLEAR(*held);
        return -1;
    }
#endif
    return 1;
}

/* o's slot = v (a constant held elsewhere too: 0, -1, INF, False), nothing done when it holds v
 * already (a kept copy or packet, iq.h's obj_reuse); the int it held, when the slot's was its last
 * reference, kept for the round's next int (iq.h's int_drop) instead of freed */
static inline __attribute__((always_inline)) int rx_same(PyObject *o, Py_ssize_t off, PyObject *v)
{
    PyObject *old = SLOT(o, off);
    if (old != v) {
        SLOT(o, off) = Py_NewRef(v);
        if (old != NULL)
            int_drop(old);
    }
    return 0;
}

static inline __attribute__((always_inline)) int rx_slot(PyObject *o, Py_ssize_t off, PyObject *v) /* steals v */
{
    if (v == NULL)
        return -1;
    PyObject *old = SLOT(o, off);
    SLOT(o, off) = v;
    if (old != NULL)
        int_drop(old);
    return 0;
}

/* iq_on_receive's word to the call it makes (csrc/iqtimer.h; 0 otherwise): the references to the frame that
 * are all its caller's own (window.h: its variable, and the record it popped when the frame is the record's) --
 * a frame held by exactly those, nobody else's, becomes the next hop's frame itself, its hop count written in
 * place, instead of a copy made and the frame freed (Python's makes a new bytes object: none can tell) */
static int rx_spare_refs;

static PyObject *iq_receive(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    int spare_refs = self == NULL ? rx_spare_refs : 0;
    rx_spare_refs = 0;
    if (nargs != 5 || !PyTuple_CheckExact(args[0]) || PyTuple_GET_SIZE(args[0]) != RX_N) {
        PyErr_SetString(PyExc_TypeError, "iq_receive(rx, engine, frame, port, now)");
        return NULL;
    }
    PyObject *const *rx = &PyTuple_GET_ITEM(args[0], 0);
    PyObject *eng = args[1], *frame = args[2];
    long long port, now, k[RX_N];
    if (!iq_ready || !ready || !switch_ready || !PyBytes_CheckExact(frame) || !get_ll(args[3], &port) ||
        !get_ll(args[4], &now))
        goto decline;
    for (int i = RX_V; i < RX_N; i++)
        if (!get_ll(rx[i], &k[i]))
            goto decline;
    Py_ssize_t n = PyBytes_GET_SIZE(frame);
    const unsigned char *w = (const unsigned char *)PyBytes_AS_STRING(frame);
    long long nports = k[RX_NPORTS], V = k[RX_V];
    PyObject *adds = rx[RX_ADD];
    if (port < 0 || port >= nports || !PyList_CheckExact(adds) || PyList_GET_SIZE(adds) != nports || V <= 0 ||
        k[RX_VCOFF] < 0 || k[RX_VCOFF] >= C_HDR_LEN || k[RX_GROUPS] <= 0)
        goto decline;
    /* SwitchEngine.receive's plain case */
    if (n < C_HDR_LEN || w[12] != C_ET_HI || w[13] != C_ET_LO || decline[w[C_PTYPE_OFF]] ||
        (w[C_FLAGS_OFF] & C_FLAG_BCAST) || w[C_HOPS_OFF] >= C_MAX_HOPS)
        goto decline;
    PyObject *routes, *held;
    int plain = rx_engine(eng, &routes, &held);
    if (plain < 0)
        return NULL;
    if (!plain)
        goto decline;
    long long dst = (long long)be(w + C_DST_OFF, 4), out;
    int routed = PyList_CheckExact(routes) && dst < PyList_GET_SIZE(routes) &&
                 get_ll(PyList_GET_ITEM(routes, dst), &out) && out >= 0 && out < nports;
    int free_ = PyAnySet_CheckExact(held) && PySet_GET_SIZE(held) == 0;
    Py_DECREF(routes);
    Py_DECREF(held);
    if (!routed || !free_)
        goto decline;
    /* InputQueuedEngine.receive: its modelled lengths, its times from the caches, its room */
    long long nin = rx_mlen(PyList_GET_ITEM(adds, port), n, w[C_PTYPE_OFF]),
              nout = rx_mlen(PyList_GET_ITEM(adds, out), n, w[C_PTYPE_OFF]);
    if (nin < 0 || nout < 0)
        goto decline;
    PyObject *tin = rx_cached(rx[RX_INS], port << 32 | nin, 2), *tout = NULL;
    if (tin == NULL && !PyErr_Occurred() && k[RX_FB] > 0) /* (not there yet: made here as Python makes it) */
        tin = rx_ins_fill(rx, k[RX_FB], port, nin);
    if (tin != NULL && (tout = rx_cached(rx[RX_LINES], out << 32 | nout, 4)) == NULL && !PyErr_Occurred() && k[RX_FB] > 0)
        tout = rx_lines_fill(rx, k[RX_FB], out, nout);
    if (PyErr_Occurred())
        return NULL;
    if (tin == NULL || tout == NULL)
        goto decline;
    long long cost, lag, need, ser, olag, ovpart;
    if (!get_ll(PyTuple_GET_ITEM(tin, 0), &cost) || !get_ll(PyTuple_GET_ITEM(tin, 1), &lag) ||
        !get_ll(PyTuple_GET_ITEM(tout, 0), &need) || !get_ll(PyTuple_GET_ITEM(tout, 1), &ser) ||
        !get_ll(PyTuple_GET_ITEM(tout, 2), &olag) || !get_ll(PyTuple_GET_ITEM(tout, 3), &ovpart))
        goto decline;
    long long v = w[k[RX_VCOFF]] % V;
    if ((w[C_FLAGS_OFF] & k[RX_FLAGPOOL]))
        goto decline; /* (marked for a pool this router has not: Python's refusal) */
    long long vcb = k[RX_VCBYTES], a = cost < vcb ? cost : vcb;
    if (cost - a)
        goto decline; /* (more than a VC buffer and no pool: Python's refusal) */
    PyObject *occr = PyList_CheckExact(rx[RX_OCC]) && port < PyList_GET_SIZE(rx[RX_OCC]) ? PyList_GET_ITEM(rx[RX_OCC], port) : NULL;
    PyObject *peakr = PyList_CheckExact(rx[RX_PEAK]) && port < PyList_GET_SIZE(rx[RX_PEAK]) ? PyList_GET_ITEM(rx[RX_PEAK], port) : NULL;
    long long occ, peak;
    if (occr == NULL || peakr == NULL || !PyList_CheckExact(occr) || !PyList_CheckExact(peakr) ||
        v >= PyList_GET_SIZE(occr) || v >= PyList_GET_SIZE(peakr) || !get_ll(PyList_GET_ITEM(occr, v), &occ) ||
        !get_ll(PyList_GET_ITEM(peakr, v), &peak) || occ + a > vcb)
        goto decline;
    int prio = 0;
    if (n > C_PRIO_OFF && w[C_PRIO_OFF]) {
        PyObject *o = PyLong_FromLongLong(out);
        prio = o == NULL ? -1 : PySequence_Contains(rx[RX_PRIOPORTS], o);
        Py_XDECREF(o);
        if (prio < 0)
            return NULL;
    }
    if (prio)
        goto decline; /* (a high-priority copy: Python's, which hands the rounds to Python for good) */
    PyObject *arr = PyList_CheckExact(rx[RX_ARR]) && port < PyList_GET_SIZE(rx[RX_ARR]) ? PyList_GET_ITEM(rx[RX_ARR], port) : NULL;
    PyObject *qrow = PyList_CheckExact(rx[RX_Q]) && port < PyList_GET_SIZE(rx[RX_Q]) ? PyList_GET_ITEM(rx[RX_Q], port) : NULL;
    PyObject *qv = qrow != NULL && PyList_CheckExact(qrow) && v < PyList_GET_SIZE(qrow) ? PyList_GET_ITEM(qrow, v) : NULL;
    long long wn = 0, wb = 0;
    if (arr == NULL || Py_TYPE(arr) != DequeT || qv == NULL || Py_TYPE(qv) != DequeT ||
        !PyList_CheckExact(rx[RX_ACTIVE]) || !PyList_CheckExact(rx[RX_RCQ]) || !PyDict_CheckExact(rx[RX_IQSTATS]) ||
        !PyDict_CheckExact(rx[RX_STATS]) || li(rx[RX_WAITN], out, &wn) < 0 || li(rx[RX_WAITB], out, &wb) < 0) {
        PyErr_Clear();
        goto decline;
    }
    /* taken: from here on as Python does it, in its order */
    if (lset(occr, v, occ + a) < 0 || (occ + a > peak && lset(peakr, v, occ + a) < 0))
        return NULL;
    long long tail = now + lag;
    if (iqr_count_add(rx[RX_STATS], s_forwarded_rx, 1, 0, "a switch's stats['forwarded']") < 0)
        return NULL;
    PyObject *pkt = obj_reuse(PacketT, iq_pfree, &iq_npfree), *c = NULL, *next = NULL, *res = NULL;
    if (pkt == NULL)
        return NULL;
    PyObject *cl = SLOT(pkt, p_copies); /* (a kept packet's list of copies: emptied, when nobody else holds it) */
    if (iqr_set_ll(pkt, p_port, port) < 0 || iqr_set_ll(pkt, p_vc, v) < 0 || rx_slot(pkt, p_head, Py_NewRef(args[4])) < 0 ||
        iqr_set_ll(pkt, p_tail, tail) < 0 || iqr_set_ll(pkt, p_cost, cost) < 0 || iqr_set_ll(pkt, p_vpart, a) < 0 ||
        rx_same(pkt, p_ppart, rx_0) < 0 || rx_same(pkt, p_left, rx_0) < 0 || rx_same(pkt, p_exit, rx_0) < 0 ||
        rx_same(pkt, p_hexit, rx_0) < 0 || rx_same(pkt, p_rc_at, rx_inf) < 0 ||
        ((cl == NULL || !PyList_CheckExact(cl) || Py_REFCNT(cl) != 1 || PyList_GET_SIZE(cl) != 0) &&
         rx_slot(pkt, p_copies, PyList_New(0)) < 0))
        goto fail;
    /* the frames whose tail has arrived leave ``arriving`` (their copies freed once out of the buffer) */
    for (;;) {
        Py_ssize_t m = PySequence_Size(arr);
        if (m < 0)
            goto fail;
        if (m == 0)
            break;
        PyObject *head = PySequence_GetItem(arr, 0);
        long long ht, left;
        if (head == NULL)
            goto fail;
        int ok = Py_TYPE(head) == PacketT && get_ll(SLOT(head, p_tail), &ht) && get_ll(SLOT(head, p_left), &left);
        if (!ok) {
            Py_DECREF(head);
            iq_bad("an arriving entry is not a packet");
            goto fail;
        }
        if (ht > now) {
            Py_DECREF(head);
            break;
        }
        PyObject *r = q_popleft(arr);
        Py_XDECREF(r);
        if (r == NULL || (!left && copies_clear(head) < 0)) {
            Py_DECREF(head);
            goto fail;
        }
        pkt_drop(head);
    }
    PyObject *r = q_append(arr, pkt);
    if (r == NULL)
        goto fail;
    Py_DECREF(r);
    /* _file: one copy, the next hop's frame (one more hop), of priority 0 */
    unsigned char hops = (w[C_HOPS_OFF] + 1) & 0xFF;
    if (spare_refs > 0 && Py_REFCNT(frame) == spare_refs && PyBytes_CheckExact(frame) && PyBytes_GET_SIZE(frame) == n) {
        next = Py_NewRef(frame); /* (nobody else's: written in place, its cached hash let go) */
        bytes_hash_stale(next);
    } else if ((next = PyBytes_FromStringAndSize((const char *)w, n)) == NULL)
        goto fail;
    ((unsigned char *)PyBytes_AS_STRING(next))[C_HOPS_OFF] = hops;
    if ((c = obj_reuse(CopyT, iq_cfree, &iq_ncfree)) == NULL)
        goto fail;
    if (rx_slot(c, c_pkt, Py_NewRef(pkt)) < 0 || iqr_set_ll(c, c_out, out) < 0 || rx_slot(c, c_frame, Py_NewRef(next)) < 0 ||
        iqr_set_ll(c, c_group, v % k[RX_GROUPS]) < 0 || iqr_set_ll(c, c_need, need) < 0 || iqr_set_ll(c, c_n, nout) < 0 ||
        iqr_set_ll(c, c_ser, ser) < 0 || iqr_set_ll(c, c_lag, olag) < 0 || rx_same(c, c_rank, rx_0) < 0 ||
        iqr_set_ll(c, c_vpart, ovpart) < 0 || rx_same(c, c_prio, rx_0) < 0 || rx_same(c, c_ovc, rx_m1) < 0 ||
        rx_same(c, c_sa_at, rx_inf) < 0 || rx_same(c, c_granted, Py_False) < 0 || rx_same(c, c_va_try, rx_m1) < 0 ||
        rx_same(c, c_sa_try, rx_m1) < 0)
        goto fail;
    if (PyList_Append(SLOT(pkt, p_copies), c) < 0 || lset(rx[RX_WAITN], out, wn + 1) < 0 ||
        lset(rx[RX_WAITB], out, wb + nout) < 0 || iqr_set_ll(pkt, p_left, 1) < 0)
        goto fail;
    /* into its VC's queue: at its head, it asks for route computation */
    if ((r = q_append(qv, pkt)) == NULL)
        goto fail;
    Py_DECREF(r);
    Py_ssize_t qn = PySequence_Size(qv);
    if (qn < 0)
        goto fail;
    if (qn == 1) {
        long long rc_at = (k[RX_VCT] ? now : tail) + k[RX_RC], key = port * k[RX_VMAX] + v;
        if (iqr_set_ll(pkt, p_rc_at, rc_at) < 0)
            goto fail;
        PyObject *act = rx[RX_ACTIVE];
        Py_ssize_t lo = 0, hi = PyList_GET_SIZE(act); /* bisect.insort (right) */
        while (lo < hi) {
            Py_ssize_t mid = (lo + hi) / 2;
            long long x;
            if (!get_ll(PyList_GET_ITEM(act, mid), &x)) {
                iq_bad("an active key is not an integer");
                goto fail;
            }
            if (key < x)
                hi = mid;
            else
                lo = mid + 1;
        }
        PyObject *kk = iw_int_new(key);
        int bad = kk == NULL || PyList_Insert(act, lo, kk) < 0;
        Py_XDECREF(kk);
        if (bad || push_int(rx[RX_RCQ], rc_at * k[RX_RK] + key) < 0)
            goto fail;
        int mine = Py_TYPE(eng) == rx_engt; /* (its slots at their offsets; any other engine by name) */
        PyObject *nx = mine ? Py_XNewRef(SLOT(eng, rx_off_next)) : iq_attr(eng, s_next_rx);
        if (nx == NULL && mine)
            PyErr_SetString(PyExc_AttributeError, "InputQueuedEngine: _next unset");
        long long nxv;
        int got = nx != NULL && get_ll3(nx, &nxv);
        Py_XDECREF(nx);
        if (!got) {
            iq_bad("the router's next round is not an integer");
            goto fail;
        }
        if (rc_at < nxv) { /* (``_wake_at``) */
            PyObject *t = int_new(rc_at), *tt = NULL;
            if (t != NULL && mine) {
                PyObject *old = SLOT(eng, rx_off_next);
                SLOT(eng, rx_off_next) = Py_NewRef(t);
                if (old != NULL)
                    int_drop(old); /* (kept for the next int when the slot's was its last reference) */
                tt = Py_XNewRef(SLOT(eng, rx_off_timer));
                if (tt == NULL)
                    PyErr_SetString(PyExc_AttributeError, "InputQueuedEngine: timer unset");
            }
            if (t == NULL || (!mine && (iq_setattr(eng, s_next_rx, t) < 0 || (tt = iq_attr(eng, s_timer_rx)) == NULL)) ||
                tt == NULL) {
                Py_XDECREF(t);
                goto fail;
            }
            long long ttv;
            int later = tt == Py_None || (get_ll3(tt, &ttv) && rc_at < ttv);
            Py_DECREF(tt);
            int bad2 = 0;
            if (later && mine) {
                PyObject *old = SLOT(eng, rx_off_timer);
                SLOT(eng, rx_off_timer) = Py_NewRef(t);
                if (old != NULL)
                    int_drop(old);
            }
            else if (later)
                bad2 = iq_setattr(eng, s_timer_rx, t) < 0;
            Py_DECREF(t);
            if (bad2)
                goto fail;
        }
    } else if (iqr_count_add(rx[RX_IQSTATS], s_hol_waits, 1, 0, "the router's hol_waits") < 0)
        goto fail;
    res = self == NULL ? iq_empty_list() : PyList_New(0); /* (NULL: iq_on_receive's call, for window.h, which only
                                                            * reads an empty list's size) */
    n_iq_received++;
fail:
    Py_XDECREF(pkt);
    Py_XDECREF(c);
    Py_XDECREF(next);
    return res;
decline: /* (a value it could not read: Python's, which says what is wrong with it) */
    PyErr_Clear();
    Py_RETURN_NONE;
}

#endif /* EMU_CSRC_IQRECV_H */
