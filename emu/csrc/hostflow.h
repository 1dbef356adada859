/* emu/csrc/hostflow.h: a port with credit flow control inside an element's window -- the plain
 * cases of Element._emit for a frame to such a port (OutPort.hand_over and the WAKE event it asks),
 * Element._port_event for a WAKE, and Flow._credit_arrived for a credit to such a port, each ending
 * in Flow._wake (the core's start_ready, csrc/flowwake.h). A host's port to an input-queued router
 * is one: every packet of a host's traffic goes through these (part of emu/_core.c, one translation
 * unit; used by csrc/credits.h and csrc/window.h). Each is the twin of the Python it stands in for,
 * which stays the specification: anything they do not take (a port with a tracer, down or with a
 * timeline, an admit, class queues, a VC picked by the receiver's groups, a lazy frame, a release
 * token) is handed to that Python before anything changed. */
#ifndef EMU_CSRC_HOSTFLOW_H
#define EMU_CSRC_HOSTFLOW_H

static PyObject *start_ready(PyObject *self, PyObject *const *args, Py_ssize_t nargs); /* (csrc/flowwake.h) */
static int fw_init(void);
static int dict_set_ll(PyObject *d, PyObject *key, long long v); /* (csrc/iq.h) */
static PyTypeObject *CreditStateT;
static long long FW_VC_OFF; /* (csrc/flowwake.h's: emu.buffers.VC_OFF) */
static Py_ssize_t o_wake_at = -1;
static long long HF_WAKE = -1;
static PyObject *s_pseq, *s_admit, *s_by_prio, *s_late, *s_groups, *s_vcs, *s_queues, *s_credits, *s_pool,
    *s_wake_m, *s_release_m;
enum { HK_ADMIT, HK_BYPRIO, HK_LATE, HK_GROUPS, HK_VCS, HK_QUEUES, HK_CREDITS, HK_POOL, HK_UNIT, HK_STALLED,
       HK_STALLS, HK_STALLNS, HK_VCB, HK_LAST, HK_FRAMING, HK_N };
static PyObject *hk_s[HK_N]; /* (hf_init's: the fields' names, interned) */
static int hf_state = 0; /* 0 not looked up yet, 1 ready, -1 not available (Python's always) */
static unsigned long long n_flow_handed, n_flow_wakes, n_flow_credits, n_flow_idle; /* (counts()) */

/* (q_len: common.h's) */

static int hf_init(void)
{
    if (hf_state)
        return hf_state > 0;
    if (!ready || OutPortT == NULL || fw_init() <= 0)
        return 0; /* (not yet: asked again) */
    hf_state = -1;
    struct { PyObject **s; const char *n; } names[] = {
        {&s_pseq, "_pseq"}, {&s_admit, "admit"}, {&s_by_prio, "by_prio"}, {&s_late, "late"}, {&s_groups, "groups"},
        {&s_vcs, "vcs"}, {&s_queues, "queues"}, {&s_credits, "credits"}, {&s_pool, "pool"}, {&s_wake_m, "_wake"},
        {&s_release_m, "_release"}};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
        if (*names[k].s == NULL && (*names[k].s = PyUnicode_InternFromString(names[k].n)) == NULL) {
            PyErr_Clear();
            return 0;
        }
    const char *hk_more[HK_N - HK_UNIT] = {"unit", "stalled_since", "stalls", "stall_ns", "vc_bytes", "last",
                                           "framing"};
    for (int k = HK_UNIT; k < HK_N; k++)
        if (hk_s[k] == NULL && (hk_s[k] = PyUnicode_InternFromString(hk_more[k - HK_UNIT])) == NULL) {
            PyErr_Clear();
            return 0;
        }
    PyObject *const hk_own[HK_UNIT] = {s_admit, s_by_prio, s_late, s_groups, s_vcs, s_queues, s_credits, s_pool};
    for (int k = 0; k < HK_UNIT; k++)
        hk_s[k] = hk_own[k]; /* (borrowed: interned for good above) */
    PyObject *ec = PyImport_ImportModule("emu.element_const"), *wk = ec ? PyObject_GetAttrString(ec, "WAKE") : NULL;
    int ok = wk != NULL && get_ll(wk, &HF_WAKE) && slot_offset(OutPortT, "wake_at", &o_wake_at) == 0;
    Py_XDECREF(ec);
    Py_XDECREF(wk);
    PyErr_Clear();
    if (ok)
        hf_state = 1;
    return ok;
}

/* the instance dict of ``o`` (borrowed), or NULL */
static inline PyObject *hf_dict(PyObject *o)
{
    PyObject **dp = _PyObject_GetDictPtr(o);
    return dp != NULL && *dp != NULL && PyDict_CheckExact(*dp) ? *dp : NULL;
}

/* A CreditState's fields the plain cases read (its instance dict's values, borrowed; NULL: not there),
 * read by common.h's split_or_hinted: the dict is written on nearly every call (a credit, a start), so a
 * cache of them keyed on its version missed nearly always.
 * The fields after HK_POOL are not read here: asked for so that the fields found account for all of a
 * plain CreditState's, ``admit`` and ``by_prio`` (class values, not in the dict) then known absent
 * without a lookup. */
static Py_ssize_t hk_hint[HK_N]; /* (0s: checked as any hint is) */
static h2_split_t hk_split;

/* d's fields into v (the first HK_UNIT, those read; the others as split_or_hinted leaves them): 0, -1
 * error (hf_init first: the names) */
static int hk_fields(PyObject *d, PyObject **v)
{
    return split_or_hinted(&hk_split, hk_hint, CreditStateT, d, hk_s, HK_UNIT, HK_N, v);
}

/* Flow._event(t, WAKE, p): self._pseq += 1; heappush(self.pevents, (t, self._pseq, WAKE, p)) */
static int hf_event(PyObject *el, long long t, PyObject *p)
{
    PyObject *d = hf_dict(el), *sq, *pev = SLOT(el, el_attr[E_PEVENTS].off);
    long long seq;
    if (d == NULL || (sq = PyDict_GetItemWithError(d, s_pseq)) == NULL || !get_ll(sq, &seq) || pev == NULL ||
        !PyList_CheckExact(pev)) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "emu._core: an element's _pseq or pevents is not what it was");
        return -1;
    }
    if (dict_set_ll(d, s_pseq, seq + 1) < 0)
        return -1;
    PyObject *e = tuple_steal(4, (PyObject *[]){PyLong_FromLongLong(t), PyLong_FromLongLong(seq + 1),
                                                PyLong_FromLongLong(HF_WAKE), Py_NewRef(p)});
    if (e == NULL)
        return -1;
    int rc = heap_push(pev, e);
    Py_DECREF(e);
    return rc;
}

/* every queue of the port's CreditState empty: its start_ready (the core's or OutPort's, any case)
 * starts nothing, changes nothing and asks no wake -- ([], None) */
static int hf_idle(PyObject *p)
{
    PyObject *fl = SLOT(p, o_flow), *d, *qs, *v[HK_N];
    if (fl == NULL || Py_TYPE(fl) != CreditStateT || (d = hf_dict(fl)) == NULL || hk_fields(d, v) < 0 ||
        (qs = v[HK_QUEUES]) == NULL || !PyList_CheckExact(qs)) {
        PyErr_Clear();
        return 0;
    }
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(qs); k++) {
        PyObject *q = PyList_GET_ITEM(qs, k);
        if (Py_TYPE(q) != DequeT || Py_SIZE(q) != 0)
            return 0;
    }
    return 1;
}

/* Flow._wake(p) at the element's now: start what the port can start, release the tokens of what
 * started (Python's _release), look again when start_ready says. 0, or -1 with an error. */
static int hf_wake(PyObject *el, PyObject *p, PyObject *nowo)
{
    long long now;
    if (!get_ll(nowo, &now))
        return -1;
    if (hf_idle(p)) { /* (nothing waits for credit: only ``if p.pending: self.busy[p] = None``) */
        PyObject *busy = SLOT(el, el_attr[E_BUSY].off), *pend = SLOT(p, o_pending);
        Py_ssize_t np = pend == NULL ? -1 : q_len(pend);
        if (np < 0 || busy == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "emu._core: a port's pending is not what it was");
            return -1;
        }
        n_flow_idle++;
        return np > 0 ? busy_mark(busy, p) : 0;
    }
    PyObject *args[2] = {p, nowo}, *r = start_ready(NULL, args, 2);
    if (r == NULL)
        return -1;
    if (r == Py_None) { /* (not start_ready's plain case: Python's _wake, from the start) */
        Py_DECREF(r);
        return call_drop(PyObject_CallMethodOneArg(el, s_wake_m, p));
    }
    PyObject *started = PyTuple_GET_ITEM(r, 0), *wk = PyTuple_GET_ITEM(r, 1), *busy = SLOT(el, el_attr[E_BUSY].off),
             *pend = SLOT(p, o_pending);
    int rc = -1;
    Py_ssize_t np = pend == NULL ? -1 : q_len(pend);
    if (np < 0 || busy == NULL || (np > 0 && busy_mark(busy, p) < 0)) /* if p.pending: busy[p] = None */
        goto done;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(started); i++)
        if (call_drop(PyObject_CallMethodOneArg(el, s_release_m, PyList_GET_ITEM(started, i))) < 0)
            goto done;
    if (wk != Py_None) { /* if not self.now < p.wake_at <= wake: p.wake_at = wake; self._event(wake, WAKE, p) */
        long long wake, wa;
        if (!get_ll(wk, &wake) || !get_ll(SLOT(p, o_wake_at), &wa))
            goto done;
        if (!(now < wa && wa <= wake) && (set_ll(p, o_wake_at, wake) < 0 || hf_event(el, wake, p) < 0))
            goto done;
    }
    rc = 0;
done:
    if (rc < 0 && !PyErr_Occurred())
        PyErr_SetString(PyExc_TypeError, "emu._core: a port's pending or wake_at is not what it was");
    Py_DECREF(r);
    return rc;
}

/* Element._port_event for ``ph`` (the head of ``pev``) when it is a WAKE of an output port: popped,
 * the element's now set, Flow._wake. 1 done, 0 not this case (nothing changed), -1 error. */
static int wake_event_c(PyObject *el, PyObject *pev, PyObject *ph)
{
    long long what;
    if (hf_init() <= 0 || PyTuple_GET_SIZE(ph) != 4 || !get_ll(PyTuple_GET_ITEM(ph, 2), &what) || what != HF_WAKE ||
        Py_TYPE(PyTuple_GET_ITEM(ph, 3)) != OutPortT) {
        PyErr_Clear();
        return 0;
    }
    PyObject *item = heap_pop(pev);
    if (item == NULL)
        return -1;
    int rc = EL_SET(el, E_NOW, PyTuple_GET_ITEM(item, 0)) < 0 ||
                     hf_wake(el, PyTuple_GET_ITEM(item, 3), PyTuple_GET_ITEM(item, 0)) < 0
                 ? -1 : 1;
    Py_DECREF(item);
    if (rc == 1)
        n_flow_wakes++;
    return rc;
}

/* the CreditState ``fl`` of a port Flow's plain cases take: of exactly that class, no admit, not by
 * class queues (neither set on it); its instance dict (its fields in v), or NULL */
static inline PyObject *hf_flow_dict(PyObject *fl, PyObject **v)
{
    PyObject *d;
    if (Py_TYPE(fl) != CreditStateT || (d = hf_dict(fl)) == NULL || hk_fields(d, v) < 0 || v[HK_ADMIT] != NULL ||
        v[HK_BYPRIO] != NULL)
        return NULL;
    return d;
}

/* Flow._credit_arrived's case of a port with credit flow control, for a credit (vc, pool, nbytes)
 * decoded before: may it take it? (its port checked by the caller: an OutPort, flow set) */
static int flow_credit_ok(PyObject *outp, long long vc, long long pool)
{
    PyObject *cr, *pl, *v[HK_N];
    if (hf_init() <= 0 || hf_flow_dict(SLOT(outp, o_flow), v) == NULL) {
        PyErr_Clear();
        return 0;
    }
    if (pool)
        return (pl = v[HK_POOL]) != NULL && PyLong_CheckExact(pl);
    return (cr = v[HK_CREDITS]) != NULL && PyList_CheckExact(cr) && vc >= 0 &&
           vc < PyList_GET_SIZE(cr) && PyLong_CheckExact(PyList_GET_ITEM(cr, vc));
}

/* ... and take it (flow_credit_ok said yes; the element's now set): OutPort.credit, Flow._wake */
static int flow_credit(PyObject *el, PyObject *outp, long long vc, long long pool, long long n, PyObject *now)
{
    PyObject *d = hf_dict(SLOT(outp, o_flow)), *cr, *f[HK_N];
    long long v;
    if (d == NULL || hk_fields(d, f) < 0)
        return -1;
    if (pool) { /* self.flow.pool += n */
        if (!get_ll(f[HK_POOL], &v) || dict_set_ll(d, s_pool, v + n) < 0)
            return -1;
    } else { /* self.flow.credits[vc] += n */
        cr = f[HK_CREDITS];
        if (!get_ll(PyList_GET_ITEM(cr, vc), &v) || put_ll(&((PyListObject *)cr)->ob_item[vc], v + n) < 0)
            return -1;
    }
    n_flow_credits++;
    return hf_wake(el, outp, now);
}

/* Element._emit of one frame (port ``p``, ``frame``, ``at``; no token) when ``p`` has credit flow
 * control in the plain case: OutPort.hand_over (its VC queue, the FCS, the drained queue, the peak)
 * and the WAKE it asks. 1 done, 0 not this case (nothing changed), -1 error. */
static int emit_flow_one(PyObject *el, PyObject *p, PyObject *frame, long long at, long long now)
{
    PyObject *fl, *late, *qs, *q, *dq, *v[HK_N];
    long long groups, vcs, vc = 0, qb, peakf, wa;
    if (hf_init() <= 0 || Py_TYPE(p) != OutPortT || SLOT(p, o_tracer) != Py_None || SLOT(p, o_up) != Py_True ||
        SLOT(p, o_timeline) != Py_None || (fl = SLOT(p, o_flow)) == NULL || hf_flow_dict(fl, v) == NULL ||
        !PyBytes_CheckExact(frame) || (late = v[HK_LATE]) == NULL ||
        (late != Py_True && late != Py_False) || !get_ll(v[HK_GROUPS], &groups) ||
        !get_ll(v[HK_VCS], &vcs) || (qs = v[HK_QUEUES]) == NULL ||
        !PyList_CheckExact(qs) || Py_TYPE(dq = SLOT(p, o_queued)) != DequeT || !get_ll(SLOT(p, o_queued_bytes), &qb) ||
        !get_ll(SLOT(p, o_peak_f), &peakf) || !get_ll(SLOT(p, o_wake_at), &wa))
        goto decline;
    Py_ssize_t flen = PyBytes_GET_SIZE(frame);
    const unsigned char *b = (const unsigned char *)PyBytes_AS_STRING(frame);
    if (late == Py_True && flen > FW_VC_OFF) { /* one queue per group: its VC picked as it starts */
        if (groups <= 0)
            goto decline;
        vc = b[FW_VC_OFF] % groups;
    } else if (groups && flen > FW_VC_OFF) /* (the receiver's groups: CreditState.pick, Python's) */
        goto decline;
    else if (flen > FW_VC_OFF) {
        if (vcs <= 0)
            goto decline;
        vc = b[FW_VC_OFF] % vcs;
    }
    if (vc >= PyList_GET_SIZE(qs) || Py_TYPE(q = PyList_GET_ITEM(qs, vc)) != DequeT)
        goto decline;
    /* taken: fl.queues[vc].append((at, add_fcs(frame), None)) */
    PyObject *wire = with_fcs((const char *)b, flen, -1), *e, *r;
    if (wire == NULL || (e = tuple_steal(3, (PyObject *[]){PyLong_FromLongLong(at), wire, Py_NewRef(Py_None)})) == NULL)
        return -1;
    r = q_append(q, e);
    Py_DECREF(e);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    /* while q and q[0][0] <= at: self.queued_bytes -= q.popleft()[1] */
    long long drained = 0;
    for (;;) {
        long long done, nb;
        int h = head_time(dq, 0, &done);
        if (h < 0)
            return -1;
        if (h == 2) {
            PyErr_SetString(PyExc_TypeError, "emu._core: a port's queued entry is not (done, bytes)");
            return -1;
        }
        if (h == 0 || done > at)
            break;
        PyObject *x = q_popleft(dq);
        if (x == NULL)
            return -1;
        int okx = PyTuple_CheckExact(x) && PyTuple_GET_SIZE(x) >= 2 && get_ll(PyTuple_GET_ITEM(x, 1), &nb);
        Py_DECREF(x);
        if (!okx) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "emu._core: a port's queued entry is not (done, bytes)");
            return -1;
        }
        drained += nb;
    }
    if (drained && set_ll(p, o_queued_bytes, qb - drained) < 0)
        return -1;
    /* waiting = fl.waiting(); the peak of len(q) + waiting */
    Py_ssize_t waiting = q_len(dq);
    for (Py_ssize_t k = 0; waiting >= 0 && k < PyList_GET_SIZE(qs); k++) {
        Py_ssize_t nk = q_len(PyList_GET_ITEM(qs, k));
        waiting = nk < 0 ? -1 : waiting + nk;
    }
    if (waiting < 0 || (waiting > peakf && set_ll(p, o_peak_f, waiting) < 0))
        return -1;
    n_flow_handed++;
    /* (Element._emit) a wake already due by then covers it, else one at ``at`` */
    if (!(now < wa && wa <= at) && (set_ll(p, o_wake_at, at) < 0 || hf_event(el, at, p) < 0))
        return -1;
    return 1;
decline:
    PyErr_Clear();
    return 0;
}

/* Element._emit's plain frames from ``result[k]`` on (after emit_into's): to a port with credit flow
 * control (emit_flow_one) or a plain one (enqueue_plain), each entry then None in ``result``; stops at
 * the first other one. The next index, or -1 with an error. */
static Py_ssize_t emit_rest(PyObject *el, PyObject *outs, PyObject *busy, PyObject *result, Py_ssize_t k,
                            long long now, long long min_delay)
{
    if (!PyList_CheckExact(result) || !PyList_CheckExact(outs) || !PyDict_CheckExact(busy))
        return k;
    for (; k < PyList_GET_SIZE(result); k++) {
        PyObject *e = PyList_GET_ITEM(result, k);
        long long port, at, start;
        if (!emit_entry(e, outs, now, min_delay, &port, &at))
            break;
        PyObject *p = PyList_GET_ITEM(outs, port);
        Py_INCREF(e);
        int rc;
        if (Py_TYPE(p) == OutPortT && SLOT(p, o_flow) != Py_None)
            rc = emit_flow_one(el, p, PyTuple_GET_ITEM(e, 1), at, now);
        else if ((rc = enqueue_plain(p, PyTuple_GET_ITEM(e, 1), at, &start)) > 0 &&
                 PyDict_SetItem(busy, p, Py_None) < 0)
            rc = -1;
        Py_DECREF(e);
        if (rc < 0)
            return -1;
        if (rc == 0)
            break;
        if (PyList_SetItem(result, k, Py_NewRef(Py_None)) < 0)
            return -1;
    }
    PyErr_Clear(); /* (a value it could not read: Python's) */
    return k;
}

#endif /* EMU_CSRC_HOSTFLOW_H */
