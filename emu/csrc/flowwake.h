/* emu/csrc/flowwake.h: OutPort.start_ready's plain case (emu/port.py), the twin Flow._wake calls
 * (emu/element_flow.py) -- part of emu/_core.c, one translation unit.
 *
 *   start_ready(port, now) -> (started tokens, when to look again) or None (not the plain case)
 *
 * Plain: an OutPort without tracer (with ``priority``: no high-priority frame to cut into the packet on
 * the line now, ``_cut_ready``), its flow a CreditState of exactly that class (not by class queues, no
 * ``vc_bytes``: a frame wholly in its VC buffer or wholly in the pool; ``late`` or not), and a framing whose modelled lengths the core computes for every ptype (the plain
 * one, or one whose ``add`` table has no QsNet packet in it). Anything else: None before anything
 * changed (Python's start_ready). */
#ifndef EMU_CSRC_FLOWWAKE_H
#define EMU_CSRC_FLOWWAKE_H

static PyTypeObject *CreditStateT;
static int fw_state = 0; /* 0 not looked up yet, 1 ready, -1 not available */
enum { F_QUEUES, F_UNIT, F_CREDITS, F_POOL, F_STALLED, F_STALLS, F_STALLNS, F_LATE, F_VCB, F_GROUPS, F_VCS, F_LAST,
       F_BYPRIO, F_FRAMING, F_N };
static const char *f_names[F_N] = {"queues", "unit", "credits", "pool", "stalled_since", "stalls", "stall_ns", "late",
                                   "vc_bytes", "groups", "vcs", "last", "by_prio", "framing"};
static long long FW_VC_OFF = -1; /* emu.buffers.VC_OFF */
static PyObject *f_s[F_N];
static struct { PyObject *fr; long long add[256]; int plain; } fw_fr[4]; /* framings seen: their add tables */
static unsigned long long n_started;

static int fw_init(void)
{
    if (fw_state)
        return fw_state > 0;
    fw_state = -1;
    for (int k = 0; k < F_N; k++)
        if ((f_s[k] = PyUnicode_InternFromString(f_names[k])) == NULL) {
            PyErr_Clear();
            return 0;
        }
    PyObject *m = PyImport_ImportModule("emu.buffers"), *c = m ? PyObject_GetAttrString(m, "CreditState") : NULL,
             *vo = m ? PyObject_GetAttrString(m, "VC_OFF") : NULL;
    Py_XDECREF(m);
    int okv = vo != NULL && get_ll(vo, &FW_VC_OFF) && FW_VC_OFF >= 0;
    Py_XDECREF(vo);
    if (c == NULL || !PyType_Check(c) || !okv) {
        Py_XDECREF(c);
        PyErr_Clear();
        return 0;
    }
    if (s_add_tbl == NULL && (s_add_tbl = PyUnicode_InternFromString("add")) == NULL) {
        Py_DECREF(c);
        PyErr_Clear();
        return 0;
    }
    CreditStateT = (PyTypeObject *)c;
    fw_state = 1;
    return 1;
}

/* the framing's add table (index into fw_fr), or -1 when not one this code computes */
static int fw_framing(PyObject *fr)
{
    for (int i = 0; i < 4; i++)
        if (fw_fr[i].fr == fr)
            return i;
    int i = 0;
    while (i < 4 && fw_fr[i].fr != NULL)
        i++;
    if (i == 4 || s_add_tbl == NULL)
        return -1;
    PyObject *plain = PyObject_GetAttr(fr, s_plain), *tbl = NULL;
    int ok = plain == Py_True || (plain == Py_False && (tbl = PyObject_GetAttr(fr, s_add_tbl)) != NULL &&
                                  PyTuple_CheckExact(tbl) && PyTuple_GET_SIZE(tbl) == 256);
    for (int k = 0; ok && tbl != NULL && k < 256; k++)
        ok = get_ll(PyTuple_GET_ITEM(tbl, k), &fw_fr[i].add[k]) && fw_fr[i].add[k] >= 0;
    fw_fr[i].plain = plain == Py_True;
    Py_XDECREF(plain);
    Py_XDECREF(tbl);
    PyErr_Clear();
    if (!ok)
        return -1;
    fw_fr[i].fr = Py_NewRef(fr); /* (held: its address is not reused) */
    return i;
}

/* Framing.length_wire */
static inline long long fw_len(int f, PyObject *wire)
{
    Py_ssize_t n = PyBytes_GET_SIZE(wire) - 4;
    if (fw_fr[f].plain || n <= C_PTYPE_OFF)
        return n + 4;
    return n - C_HDR_LEN + fw_fr[f].add[((const unsigned char *)PyBytes_AS_STRING(wire))[C_PTYPE_OFF]];
}

/* the CreditState's fields (its __dict__ ``d``'s values, borrowed; common.h's split_or_hinted: ``framing``,
 * not read here, asked for so that ``by_prio``'s absence is known without a lookup) into v (the first
 * F_FRAMING; v[F_FRAMING] as split_or_hinted leaves it): 1, 0 one missing or a ``by_prio`` there
 * (Python's), -1 error */
static Py_ssize_t fw_hint[F_N]; /* (0s: checked as any hint is) */
static h2_split_t fw_split;
static int fw_fields(PyObject *d, PyObject **v)
{
    if (split_or_hinted(&fw_split, fw_hint, CreditStateT, d, f_s, F_FRAMING, F_N, v) < 0)
        return -1;
    for (int k = 0; k < F_FRAMING; k++)
        if ((v[k] == NULL) != (k == F_BYPRIO))
            return 0;
    return 1;
}

static PyObject *start_ready(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "start_ready(port, now)");
        return NULL;
    }
    PyObject *p = args[0], *fl, **dp, *d, *v[F_N];
    long long now, unit, pool, free_at, bps, lat, hb, busy, qb, peakb, vcb, G = 0, V = 0;
    int prio;
    if (!ready || fw_init() <= 0 || Py_TYPE(p) != OutPortT || !get_ll(args[1], &now) ||
        SLOT(p, o_tracer) != Py_None || (prio = PyObject_IsTrue(SLOT(p, o_priority))) < 0 ||
        Py_TYPE(fl = SLOT(p, o_flow)) != CreditStateT || (dp = _PyObject_GetDictPtr(fl)) == NULL || (d = *dp) == NULL)
        goto decline;
    if (fw_fields(d, v) <= 0)
        goto decline;
    int f, late = v[F_LATE] == Py_True;
    if ((v[F_LATE] != Py_False && !late) ||
        !PyList_CheckExact(v[F_QUEUES]) || !PyList_CheckExact(v[F_CREDITS]) || !get_ll(v[F_GROUPS], &G) ||
        !get_ll(v[F_VCS], &V) || V < 1 || PyList_GET_SIZE(v[F_CREDITS]) < V || !PyList_CheckExact(v[F_LAST]) ||
        (late ? G < 1 : PyList_GET_SIZE(v[F_CREDITS]) < PyList_GET_SIZE(v[F_QUEUES])) ||
        !get_ll(v[F_UNIT], &unit) || unit < 1 || !get_ll(v[F_POOL], &pool) || !get_ll(v[F_VCB], &vcb) || vcb ||
        (f = fw_framing(SLOT(p, o_framing))) < 0 || !get_ll(SLOT(p, o_free_at), &free_at) ||
        !get_ll(SLOT(p, o_bps), &bps) || bps <= 0 || !get_ll(SLOT(p, o_latency), &lat) ||
        !get_ll(SLOT(p, o_head_bytes), &hb) || !get_ll(SLOT(p, o_busy_ns), &busy) ||
        !get_ll(SLOT(p, o_queued_bytes), &qb) || !get_ll(SLOT(p, o_peak_b), &peakb) ||
        Py_TYPE(SLOT(p, o_queued)) != DequeT || Py_TYPE(SLOT(p, o_pending)) != DequeT || (hb && C_QPKT_PORT < 0))
        goto decline;
    PyObject *queues = v[F_QUEUES], *credits = v[F_CREDITS], *lastl = v[F_LAST], *line = SLOT(p, o_line);
    Py_ssize_t nq = PyList_GET_SIZE(queues);
    for (Py_ssize_t q = 0; q < nq; q++)
        if (Py_TYPE(PyList_GET_ITEM(queues, q)) != DequeT)
            goto decline;
    for (Py_ssize_t w = 0; w < V; w++)
        if (!PyLong_CheckExact(PyList_GET_ITEM(credits, w)))
            goto decline;
    if (prio && hb && free_at > now && line != NULL && line != Py_None) { /* (_cut_ready's case: Python's) */
        int cut = PyList_CheckExact(line) && PyList_GET_SIZE(line) > 3 ? PyObject_IsTrue(PyList_GET_ITEM(line, 3)) : 1;
        if (cut != 0)
            goto decline;
    }
    PyObject *started = PyList_New(0);
    if (started == NULL)
        return NULL;
    Py_INCREF(fl);
    Py_INCREF(d);
    PyObject *res = NULL;
    while (free_at <= now) {
        long long best = -1, key = 0, kp = 0, bn = 0, bc = 0, bw = -1;
        int blocked = 0, bpool = 0;
        for (Py_ssize_t q = 0; q < nq; q++) {
            PyObject *qv = PyList_GET_ITEM(queues, q);
            if (q_len(qv) <= 0)
                continue;
            PyObject *h = PySequence_GetItem(qv, 0);
            long long at, cr;
            if (h == NULL)
                goto fail;
            PyObject *hw = PyTuple_CheckExact(h) && PyTuple_GET_SIZE(h) == 3 ? PyTuple_GET_ITEM(h, 1) : NULL;
            int okh = hw != NULL && get_ll(PyTuple_GET_ITEM(h, 0), &at) && PyBytes_CheckExact(hw) &&
                      PyBytes_GET_SIZE(hw) > C_PRIO_OFF && PyBytes_GET_SIZE(hw) > FW_VC_OFF + 4;
            long long n = okh ? fw_len(f, hw) : 0;
            int hp = okh && prio && ((const unsigned char *)PyBytes_AS_STRING(hw))[C_PRIO_OFF];
            Py_DECREF(h);
            if (!okh) {
                PyErr_SetString(PyExc_TypeError, "emu._core.start_ready: a queued entry is not (time, frame, token)");
                goto fail;
            }
            if (at > now)
                continue;
            long long c = (n + unit - 1) / unit * unit, w = q;
            int where = -1;
            if (late) { /* CreditState.free(q, c): the group's VCs round robin after its last */
                long long lw, g0 = q % V, nws = g0 < V ? (V - 1 - g0) / G + 1 : 1, k0 = 0;
                if (q >= PyList_GET_SIZE(lastl)) {
                    PyErr_SetString(PyExc_IndexError, "list index out of range");
                    goto fail;
                }
                if (!get_ll(PyList_GET_ITEM(lastl, q), &lw))
                    goto fail_int;
                if (lw >= g0 && lw < V && (lw - g0) % G == 0)
                    k0 = (lw - g0) / G + 1;
                w = -1;
                for (long long i = 0; i < nws && w < 0; i++) {
                    long long ww = g0 + ((k0 + i) % nws) * G;
                    if (!get_ll(PyList_GET_ITEM(credits, ww), &cr))
                        goto fail_int;
                    if (cr >= c || pool >= c)
                        w = ww;
                }
            }
            if (w >= 0) {
                if (!get_ll(PyList_GET_ITEM(credits, w), &cr))
                    goto fail_int;
                where = cr >= c ? 0 : pool >= c ? 1 : -1; /* (CreditState.place: False, True, None) */
            }
            if (where >= 0) {
                long long k1 = hp ? 0 : 1; /* (high priority first, then the one handed over first) */
                if (best < 0 || k1 < kp || (k1 == kp && at < key))
                    best = q, key = at, kp = k1, bn = n, bc = c, bpool = where, bw = w;
            } else
                blocked = 1;
        }
        if (best < 0) {
            if (blocked && v[F_STALLED] == Py_None) { /* fl.stalled_since = now; fl.stalls += 1 */
                long long st;
                PyObject *nw = PyLong_FromLongLong(now);
                if (nw == NULL || PyDict_SetItem(d, f_s[F_STALLED], nw) < 0) {
                    Py_XDECREF(nw);
                    goto fail;
                }
                Py_DECREF(nw);
                v[F_STALLED] = PyDict_GetItem(d, f_s[F_STALLED]);
                if ((v[F_STALLS] = PyDict_GetItem(d, f_s[F_STALLS])) == NULL || !get_ll(v[F_STALLS], &st))
                    goto fail_int;
                if (dict_set_ll(d, f_s[F_STALLS], st + 1) < 0)
                    goto fail;
            }
            break;
        }
        /* _take_credit(best, bw): the head popped, its VC set (late), its credit charged (no flag
         * rewrite: no vc_bytes) */
        PyObject *qv = PyList_GET_ITEM(queues, best), *e = q_popleft(qv);
        if (e == NULL)
            goto fail;
        PyObject *wire = Py_NewRef(PyTuple_GET_ITEM(e, 1)), *token = PyTuple_GET_ITEM(e, 2);
        long long cr;
        if (late) {
            if (put_ll(&((PyListObject *)lastl)->ob_item[best], bw) < 0) {
                Py_DECREF(wire);
                Py_DECREF(e);
                goto fail;
            }
            const char *wb = PyBytes_AS_STRING(wire);
            if ((unsigned char)wb[FW_VC_OFF] != bw) { /* add_fcs(wire[:VC_OFF] + bytes((vc,)) + wire[VC_OFF + 1:-4]) */
                Py_ssize_t flen = PyBytes_GET_SIZE(wire) - 4;
                PyObject *nw = PyBytes_FromStringAndSize(NULL, flen + 4);
                if (nw == NULL || bw < 0 || bw > 255) {
                    if (nw != NULL)
                        PyErr_SetString(PyExc_ValueError, "bytes must be in range(0, 256)");
                    Py_XDECREF(nw);
                    Py_DECREF(wire);
                    Py_DECREF(e);
                    goto fail;
                }
                unsigned char *b = (unsigned char *)PyBytes_AS_STRING(nw);
                memcpy(b, wb, flen);
                b[FW_VC_OFF] = (unsigned char)bw;
                put_fcs(b, flen);
                Py_SETREF(wire, nw);
            }
        }
        if (!get_ll(PyList_GET_ITEM(credits, bw), &cr) ||
            put_ll(&((PyListObject *)credits)->ob_item[bw], cr - (bpool ? 0 : bc)) < 0) {
            Py_DECREF(wire);
            Py_DECREF(e);
            goto fail_int;
        }
        if (bpool) {
            pool -= bc;
            if (dict_set_ll(d, f_s[F_POOL], pool) < 0) {
                Py_DECREF(wire);
                Py_DECREF(e);
                goto fail;
            }
        }
        if (v[F_STALLED] != Py_None) { /* fl.stall_ns += now - fl.stalled_since; fl.stalled_since = None */
            long long s0, sn;
            PyObject *sv = PyDict_GetItem(d, f_s[F_STALLED]), *nv = PyDict_GetItem(d, f_s[F_STALLNS]);
            if (sv == NULL || nv == NULL || !get_ll(sv, &s0) || !get_ll(nv, &sn) ||
                dict_set_ll(d, f_s[F_STALLNS], sn + now - s0) < 0 || PyDict_SetItem(d, f_s[F_STALLED], Py_None) < 0) {
                Py_DECREF(wire);
                Py_DECREF(e);
                goto fail_int;
            }
            v[F_STALLED] = Py_None;
        }
        long long n = bn, done = now + (n * 8000000000LL + bps - 1) / bps, arrival;
        free_at = done;
        busy += done - now;
        qb += n;
        PyObject *qe = tuple_steal(2, (PyObject *[]){PyLong_FromLongLong(done), PyLong_FromLongLong(n)}), *r;
        if (qe == NULL || (r = q_append(SLOT(p, o_queued), qe)) == NULL) {
            Py_XDECREF(qe);
            Py_DECREF(wire);
            Py_DECREF(e);
            goto fail;
        }
        Py_DECREF(r);
        Py_DECREF(qe);
        if (iw_put_ll(&SLOT(p, o_free_at), done) < 0 || iw_put_ll(&SLOT(p, o_busy_ns), busy) < 0 || iw_put_ll(&SLOT(p, o_queued_bytes), qb) < 0 ||
            (qb > peakb && iw_put_ll(&SLOT(p, o_peak_b), peakb = qb) < 0)) {
            Py_DECREF(wire);
            Py_DECREF(e);
            goto fail;
        }
        if (hb) { /* self.line = [now, done, n, a QsNet packet of priority 0, []] */
            Py_ssize_t wl = PyBytes_GET_SIZE(wire);
            const unsigned char *wb = (const unsigned char *)PyBytes_AS_STRING(wire);
            if (wl <= C_PTYPE_OFF || (wb[C_PTYPE_OFF] == C_QPKT_PORT && wl <= C_PRIO_OFF)) {
                PyErr_SetString(PyExc_IndexError, "index out of range");
                Py_DECREF(wire);
                Py_DECREF(e);
                goto fail;
            }
            int cut = wb[C_PTYPE_OFF] == C_QPKT_PORT && !wb[C_PRIO_OFF];
            if (iw_port_line(&SLOT(p, o_line), now, done, n, cut) < 0) { /* (in place when nobody else holds it) */
                Py_DECREF(wire);
                Py_DECREF(e);
                goto fail;
            }
            arrival = now + (((hb < n ? hb : n) * 8000000000LL + bps - 1) / bps) + lat;
        } else
            arrival = done + lat;
        PyObject *pe = tuple_steal(4, (PyObject *[]){PyLong_FromLongLong(now), PyLong_FromLongLong(arrival),
                                                     Py_NewRef(wire), Py_NewRef(bpool ? Py_True : Py_False)});
        if (pe == NULL || (r = q_append(SLOT(p, o_pending), pe)) == NULL) {
            Py_XDECREF(pe);
            Py_DECREF(wire);
            Py_DECREF(e);
            goto fail;
        }
        Py_DECREF(r);
        Py_DECREF(pe);
        if (token != Py_None && PyList_Append(started, token) < 0) {
            Py_DECREF(wire);
            Py_DECREF(e);
            goto fail;
        }
        Py_DECREF(wire);
        Py_DECREF(e);
        n_started++;
    }
    /* when to look again: a queued head's time, or when the port frees */
    long long wake = -1;
    for (Py_ssize_t q = 0; q < nq; q++) {
        PyObject *qv = PyList_GET_ITEM(queues, q);
        if (q_len(qv) <= 0)
            continue;
        PyObject *h = PySequence_GetItem(qv, 0);
        long long at, t;
        if (h == NULL)
            goto fail;
        int okh = PyTuple_CheckExact(h) && PyTuple_GET_SIZE(h) >= 1 && get_ll(PyTuple_GET_ITEM(h, 0), &at);
        Py_DECREF(h);
        if (!okh)
            goto fail_int;
        t = at > now ? at : (free_at > now ? free_at : -1);
        if (t >= 0 && (wake < 0 || t < wake))
            wake = t;
    }
    res = wake < 0 ? tuple_steal(2, (PyObject *[]){Py_NewRef(started), Py_NewRef(Py_None)})
                   : tuple_steal(2, (PyObject *[]){Py_NewRef(started), PyLong_FromLongLong(wake)});
    goto out;
fail_int:
    if (!PyErr_Occurred())
        PyErr_SetString(PyExc_TypeError, "emu._core.start_ready: a credit or time is not an integer");
fail:
    res = NULL;
out:
    Py_DECREF(started);
    Py_DECREF(fl);
    Py_DECREF(d);
    return res;
decline:
    PyErr_Clear();
    Py_RETURN_NONE;
}

#endif /* EMU_CSRC_FLOWWAKE_H */
