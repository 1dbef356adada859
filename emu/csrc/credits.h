/* emu/csrc/credits.h: the credit path's plain cases inside an element's window (part of emu/_core.c,
 * one translation unit; used by csrc/window.h's element_window) */
#ifndef EMU_CSRC_CREDITS_H
#define EMU_CSRC_CREDITS_H

/* The credit path's plain cases (Flow._credit_now for a credit frame built before, with
 * emu.element_flow's cache of credit frames by their fields, _BUILT, read in place; Flow._credit_arrived
 * to an input-queued router or a port with credit flow control, the frame's fields read from its
 * bytes as CREDIT.unpack reads them); anything else is Python's. cr_state: 0 not looked up yet, 1
 * ready, -1 not available (Python's always). */
static PyObject *cr_built, *s_credit_arrived, *s_on_credit;
static long long CR_CREDIT_OUT = -1, CR_STRETCH = -1, CR_ETH = -1;
static int cr_state = 0;
static unsigned long long n_credits_out, n_credits_in;
/* (csrc/iqtimer.h, after the round it calls) */
static int iq_on_timer(PyObject *eng, PyObject *tt, PyObject **out_p);
static int iq_on_receive(PyObject *eng, PyObject *frame, PyObject *port, PyObject *now, PyObject **out_p, int spare_refs);
static int iq_on_credit(PyObject *eng, long long port, long long vc, long long nbytes, PyObject *now, long long pool,
                        long long frames);

static int credit_init(void)
{
    if (cr_state)
        return cr_state > 0;
    cr_state = -1;
    PyObject *fl = PyImport_ImportModule("emu.element_flow"), *ec = PyImport_ImportModule("emu.element_const"),
             *wc = PyImport_ImportModule("emu.wire.credit"), *a = NULL, *b = NULL, *e = NULL;
    int ok = fl != NULL && ec != NULL && wc != NULL && (cr_built = PyObject_GetAttrString(fl, "_BUILT")) != NULL &&
             PyDict_CheckExact(cr_built) && (a = PyObject_GetAttrString(ec, "CREDIT_OUT")) != NULL &&
             get_ll(a, &CR_CREDIT_OUT) && (b = PyObject_GetAttrString(wc, "STRETCH")) != NULL && get_ll(b, &CR_STRETCH) &&
             (e = PyObject_GetAttrString(wc, "ETH_LEN")) != NULL && get_ll(e, &CR_ETH) && CR_ETH >= 0 &&
             CR_ETH + 8 <= C_CREDIT_LEN &&
             (s_credit_arrived = PyUnicode_InternFromString("_credit_arrived")) != NULL &&
             (s_on_credit = PyUnicode_InternFromString("on_credit")) != NULL;
    Py_XDECREF(fl);
    Py_XDECREF(ec);
    Py_XDECREF(wc);
    Py_XDECREF(a);
    Py_XDECREF(b);
    Py_XDECREF(e);
    PyErr_Clear();
    if (ok)
        cr_state = 1;
    return ok;
}

/* _BUILT's entries seen here, by (mac, vc, pool, n, frames) -- the mac by its bytes (at most 8: a
 * node's 6), the rest as ints (as the dict's key compares them: True is 1) -- without a key tuple and
 * its hash per credit. An entry found is the frame _BUILT gave for those fields: the same bytes
 * Python builds again for them should _BUILT have been cleared since (a later run's elements, of
 * the same macs, find them too: nothing held per run). */
#define CR_CACHE 1024 /* (a power of two) */
static struct { uint64_t mac; Py_ssize_t mlen; PyObject *wire; long long f[4]; } cr_cache[CR_CACHE];

/* a mac of at most 8 bytes as one number: 1, 0 (another object: not cached) */
static inline int cr_mac(PyObject *mac, uint64_t *m, Py_ssize_t *n)
{
    if (!PyBytes_CheckExact(mac) || (*n = PyBytes_GET_SIZE(mac)) > 8)
        return 0;
    *m = 0;
    memcpy(m, PyBytes_AS_STRING(mac), (size_t)*n);
    return 1;
}

static inline __attribute__((always_inline)) int cr_int(PyObject *o, long long *v)
{
    if (o == Py_True || o == Py_False) {
        *v = o == Py_True;
        return 1;
    }
    return get_ll(o, v);
}

/* Element._port_event for ``ph`` (the head of ``pev``) when it is a CREDIT_OUT whose frame
 * Flow._credit_now built before: popped, ``now`` set, the frame queued on the port's link control, the
 * port busy. 1 done, 0 not this case (nothing changed), -1 error. */
static int credit_out_c(PyObject *el, PyObject *pev, PyObject *ph)
{
    long long what, port, lat;
    PyObject *obj, *outs, *outp, *mac, *key, *wire, *ctl, *busy;
    if (credit_init() <= 0 || PyTuple_GET_SIZE(ph) != 4 || !get_ll(PyTuple_GET_ITEM(ph, 2), &what) ||
        what != CR_CREDIT_OUT || !PyTuple_CheckExact(obj = PyTuple_GET_ITEM(ph, 3)) || PyTuple_GET_SIZE(obj) != 5 ||
        !get_ll(PyTuple_GET_ITEM(obj, 0), &port) || (outs = SLOT(el, el_attr[E_OUTS].off)) == NULL ||
        !PyList_CheckExact(outs) || port < 0 || port >= PyList_GET_SIZE(outs) ||
        Py_TYPE(outp = PyList_GET_ITEM(outs, port)) != OutPortT || (ctl = SLOT(outp, o_ctl)) == NULL ||
        Py_TYPE(ctl) != DequeT || !get_ll(SLOT(outp, o_latency), &lat) || (busy = SLOT(el, el_attr[E_BUSY].off)) == NULL ||
        !PyDict_CheckExact(busy)) {
        PyErr_Clear();
        return 0;
    }
    if ((mac = EL_GET(el, E_MAC)) == NULL) { /* (its slot: element_setup) */
        PyErr_Clear();
        return 0;
    }
    long long f[4]; /* (vc, pool, n, frames) */
    uint64_t mv = 0;
    Py_ssize_t ml = 0;
    int ints = cr_mac(mac, &mv, &ml) && cr_int(PyTuple_GET_ITEM(obj, 1), &f[0]) &&
               cr_int(PyTuple_GET_ITEM(obj, 3), &f[1]) && cr_int(PyTuple_GET_ITEM(obj, 2), &f[2]) &&
               cr_int(PyTuple_GET_ITEM(obj, 4), &f[3]);
    if (!ints) { /* (a field that is no int: looked up by the key tuple below, as Python's _BUILT.get does) */
        PyErr_Clear();
        f[0] = f[1] = f[2] = f[3] = 0;
    }
    uint64_t x = mv ^ ((uint64_t)f[0] << 48) ^ ((uint64_t)f[1] << 63) ^ ((uint64_t)f[2] << 24) ^ ((uint64_t)f[3] << 40);
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL; /* (splitmix64's finaliser) */
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    size_t h = ints ? (size_t)((x ^ (x >> 31)) & (CR_CACHE - 1)) : 0;
    if (ints && cr_cache[h].wire != NULL && cr_cache[h].mac == mv && cr_cache[h].mlen == ml &&
        cr_cache[h].f[0] == f[0] && cr_cache[h].f[1] == f[1] && cr_cache[h].f[2] == f[2] && cr_cache[h].f[3] == f[3]) {
        wire = Py_NewRef(cr_cache[h].wire);
        Py_DECREF(mac);
    } else {
        key = PyTuple_Pack(5, mac, PyTuple_GET_ITEM(obj, 1), PyTuple_GET_ITEM(obj, 3), PyTuple_GET_ITEM(obj, 2),
                           PyTuple_GET_ITEM(obj, 4)); /* (self.mac, vc, pool, n, frames) */
        if (key == NULL) {
            Py_DECREF(mac);
            return -1;
        }
        wire = PyDict_GetItemWithError(cr_built, key);
        Py_DECREF(key);
        if (wire == NULL) {
            Py_DECREF(mac);
            return PyErr_Occurred() ? -1 : 0; /* (not built yet: Python's builds it) */
        }
        Py_INCREF(wire);
        if (ints && PyBytes_CheckExact(wire)) { /* (the entry now: its wire held) */
            cr_cache[h].mac = mv, cr_cache[h].mlen = ml;
            Py_XSETREF(cr_cache[h].wire, Py_NewRef(wire));
            memcpy(cr_cache[h].f, f, sizeof f);
        }
        Py_DECREF(mac);
    }
    Py_INCREF(outp);
    Py_INCREF(ctl);
    int rc = -1;
    PyObject *item = heap_pop(pev), *t, *r;
    if (item == NULL)
        goto done;
    t = PyTuple_GET_ITEM(item, 0);
    long long tv;
    if (!get_ll(t, &tv) || EL_SET(el, E_NOW, t) < 0)
        goto done;
    PyObject *e = iw_t4_new(Py_NewRef(t), iw_int_new(tv + lat), Py_NewRef(wire), Py_NewRef(Py_False)); /* (kept by
                                                                                                       * hand_over_ctl) */
    if (e == NULL || (r = q_append(ctl, e)) == NULL) {
        Py_XDECREF(e);
        goto done;
    }
    Py_DECREF(r);
    Py_DECREF(e);
    if (PyDict_SetItem(busy, outp, Py_None) < 0)
        goto done;
    n_credits_out++;
    rc = 1;
done:
    if (item != NULL)
        iw_t4_keep(item); /* (the event, its ints too, kept for the next when this was their last holder) */
    Py_DECREF(wire);
    Py_DECREF(outp);
    Py_DECREF(ctl);
    return rc;
}

/* Element._arrive for ``head`` (the heap's first record) when it is a credit frame its port checks
 * plainly (clean or its FCS good, no schedule on the link; no capture: the caller's test): popped, the
 * element's times set, and Flow._credit_arrived -- the engine's on_credit straight, for an input-queued
 * router (not a stretch; its fields read from its bytes, any frame: Python's _READ, a cache of the same
 * fields by the same bytes, is left alone), else the method. 1 done, 0 not this case, -1. */
static int credit_in_c(PyObject *el, PyObject *eng, PyObject *head, PyObject *ins)
{
    long long port, kind;
    PyObject *wire, *inp;
    if (credit_init() <= 0 || !get_ll(PyTuple_GET_ITEM(head, 1), &port) || !get_ll(PyTuple_GET_ITEM(head, 4), &kind) ||
        !PyBytes_CheckExact(wire = PyTuple_GET_ITEM(head, 3)) || port < 0 || port >= PyList_GET_SIZE(ins) ||
        Py_TYPE(inp = PyList_GET_ITEM(ins, port)) != InPortT || SLOT(inp, i_timeline) != Py_None) {
        PyErr_Clear();
        return 0;
    }
    Py_ssize_t wlen = PyBytes_GET_SIZE(wire);
    const unsigned char *w = (const unsigned char *)PyBytes_AS_STRING(wire);
    if (!(wlen >= C_CREDIT_LEN && w[13] == C_CREDIT_LO && w[12] == C_CREDIT_HI) ||
        (!(kind & C_CLEAN) && (wlen < 4 || crc32_of(w, wlen) != C_FCS_RESIDUE)))
        return 0;
    /* its fields, CREDIT.unpack(wire, ETH_LEN) ("!BBHI": vc, pool, frames, bytes), read from its bytes
     * (Python's _READ caches them by the bytes: the same fields; a frame the core takes is not put there) */
    const unsigned char *cf = w + CR_ETH;
    PyObject *outs = SLOT(el, el_attr[E_OUTS].off), *iqv;
    long long vc = cf[0], pool = cf[1], frames = (long long)cf[2] << 8 | cf[3],
              nbytes = (long long)cf[4] << 24 | (long long)cf[5] << 16 | (long long)cf[6] << 8 | cf[7];
    int direct = pool != CR_STRETCH && outs != NULL && PyList_CheckExact(outs) && port < PyList_GET_SIZE(outs);
    PyObject *fport = NULL; /* a port with credit flow control taking it (csrc/hostflow.h) */
    if (direct) { /* (outp None or without credit flow, and the engine an input-queued router's) */
        PyObject *outp = PyList_GET_ITEM(outs, port);
        direct = outp == Py_None || (Py_TYPE(outp) == OutPortT && SLOT(outp, o_flow) == Py_None);
        if (!direct && Py_TYPE(outp) == OutPortT && flow_credit_ok(outp, vc, pool))
            fport = Py_NewRef(outp);
        else if (direct) {
            if ((iqv = EL_GET(el, E_IQ)) == NULL)
                return -1;
            direct = iqv == Py_True;
            Py_DECREF(iqv);
        }
    }
    Py_INCREF(wire);
    int rc = -1;
    PyObject *item = heap_pop(SLOT(el, el_attr[E_HEAP].off)), *r = NULL;
    if (item == NULL)
        goto done;
    PyObject *t = PyTuple_GET_ITEM(item, 0), *pt = PyTuple_GET_ITEM(item, 1);
    if (EL_SET(el, E_NOW, t) < 0 || EL_SET(el, E_ACTIVE_NS, t) < 0)
        goto done;
    int ic = direct ? iq_on_credit(eng, port, vc, nbytes, t, pool, frames) : 1; /* (its plain case here) */
    if (fport != NULL) /* OutPort.credit, Flow._wake */
        ic = flow_credit(el, fport, vc, pool, nbytes, t) < 0 ? -1 : 0;
    if (ic < 0)
        goto done;
    if (ic == 0)
        r = Py_NewRef(Py_None);
    else if (direct) { /* engine.on_credit(port, vc, nbytes, now, bool(pool), frames) */
        PyObject *f[3] = {PyLong_FromLongLong(vc), PyLong_FromLongLong(nbytes), PyLong_FromLongLong(frames)};
        if (f[0] != NULL && f[1] != NULL && f[2] != NULL) {
            PyObject *args[7] = {eng, pt, f[0], f[1], t, pool ? Py_True : Py_False, f[2]};
            r = PyObject_VectorcallMethod(s_on_credit, args, 7, NULL);
        }
        for (int k = 0; k < 3; k++)
            Py_XDECREF(f[k]);
    } else
        r = PyObject_CallMethodObjArgs(el, s_credit_arrived, pt, wire, NULL);
    if (r == NULL)
        goto done;
    if (direct)
        n_credits_in++;
    Py_DECREF(r);
    rc = 1;
done:
    if (item != NULL)
        hp_rec_keep(item); /* (the record, kept for the next one when this was its last holder: csrc/heap.h) */
    Py_DECREF(wire);
    Py_XDECREF(fport);
    return rc;
}

#endif /* EMU_CSRC_CREDITS_H */
