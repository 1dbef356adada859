/* emu/csrc/transmit.h: Element._transmit's first part in the core -- the busy ports' frames (and a
 * local port's queued credits) into this process's heaps or its batch (part of emu/_core.c, one
 * translation unit) */
#ifndef EMU_CSRC_TRANSMIT_H
#define EMU_CSRC_TRANSMIT_H

/* What transmit_into knows of the process's batch across its ports: whether it is holding and its
 * pending dict (read once, again after Python code ran), the last destination's entry, the groups
 * sent (the element's stats['datagrams_sent'], added once) and the frames sent to one peer domain
 * not yet added to the domain's ``sent_to`` (the same sums, told once per run of equal peers). */
typedef struct {
    PyObject *batch, *pending, *addr, *q, *pdom;
    int holding; /* -1: not read yet */
    long long groups, pdom_n;
} bctx_t;

static void bctx_forget(bctx_t *c)
{
    Py_CLEAR(c->pending);
    Py_CLEAR(c->addr);
    Py_CLEAR(c->q);
    c->holding = -1;
}

/* the frames counted for the last peer domain onto the domain's sent_to (Domain.frames_sent's sum) */
static int bctx_sent(bctx_t *c, PyObject *domain)
{
    if (c->pdom == NULL)
        return 0;
    int rc = c->pdom_n ? add_attr_item(domain, D_SENT_TO, c->pdom, c->pdom_n, 1) : 0;
    Py_CLEAR(c->pdom);
    c->pdom_n = 0;
    return rc;
}

/* the groups and frames counted in ``c`` told (the element's stats, the domain's sent_to), its
 * references dropped: 0, or -1 (all of it done, the first error kept) */
static int bctx_end(bctx_t *c, PyObject *domain, PyObject *stats)
{
    int rc = 0;
    if (c->groups && dict_add(stats, s_datagrams_sent, c->groups, 0, "an element's stats['datagrams_sent']") < 0)
        rc = -1;
    c->groups = 0;
    if (rc == 0)
        rc = bctx_sent(c, domain);
    Py_CLEAR(c->pdom);
    bctx_forget(c);
    return rc;
}

/* Batch.send(group, addr) while a window runs, ``group`` a datagram's bytes (take's) or a list of bytes parts: it joins its
 * destination's groups when it fits (Python's test); anything else -- not holding, a datagram full
 * -- Batch.send itself. */
static int batch_send(bctx_t *c, PyObject *dg, PyObject *addr)
{
    if (c->holding < 0) {
        PyObject *holding = PyObject_GetAttr(c->batch, s_holding);
        if (holding == NULL)
            return -1;
        c->holding = holding == Py_True;
        Py_DECREF(holding);
        if (c->holding) {
            if ((c->pending = PyObject_GetAttr(c->batch, s_pending)) == NULL)
                return -1;
            if (!PyDict_CheckExact(c->pending))
                c->holding = 0;
        }
    }
    if (c->holding && (PyList_CheckExact(dg) || PyBytes_CheckExact(dg))) {
        PyObject *pending = c->pending;
        Py_ssize_t len = PyBytes_CheckExact(dg) ? PyBytes_GET_SIZE(dg) : 0, np = PyBytes_CheckExact(dg) ? 0 : PyList_GET_SIZE(dg);
        for (Py_ssize_t k = 0; k < np; k++) {
            PyObject *part = PyList_GET_ITEM(dg, k);
            if (!PyBytes_CheckExact(part)) {
                len = -1;
                break;
            }
            len += PyBytes_GET_SIZE(part);
        }
        PyObject *q = NULL;
        if (len >= 0) {
            if (addr == c->addr)
                q = c->q;
            else if ((q = PyDict_GetItemWithError(pending, addr)) == NULL) {
                if (PyErr_Occurred())
                    return -1;
                PyObject *nq = Py_BuildValue("[[O]n]", dg, len);
                if (nq == NULL)
                    return -1;
                int rc = PyDict_SetItem(pending, addr, nq);
                Py_XSETREF(c->addr, Py_NewRef(addr));
                Py_XSETREF(c->q, nq); /* (the dict holds it too) */
                return rc;
            }
        }
        long long size;
        if (q != NULL && PyList_CheckExact(q) && PyList_GET_SIZE(q) == 2 && PyList_CheckExact(PyList_GET_ITEM(q, 0)) &&
            get_ll(PyList_GET_ITEM(q, 1), &size) && size + len <= C_MAX_DATAGRAM) {
            Py_INCREF(q);
            Py_XSETREF(c->addr, Py_NewRef(addr));
            Py_XSETREF(c->q, q);
            PyObject *nsize = PyLong_FromLongLong(size + len);
            if (nsize == NULL || PyList_Append(PyList_GET_ITEM(q, 0), dg) < 0) {
                Py_XDECREF(nsize);
                return -1;
            }
            return PyList_SetItem(q, 1, nsize);
        }
        if (PyErr_Occurred())
            return -1;
    }
    bctx_forget(c); /* (Python code runs: read the batch again after it) */
    PyObject *r = PyObject_CallMethodObjArgs(c->batch, s_send, dg, addr, NULL);
    Py_XDECREF(r);
    return r == NULL ? -1 : 0;
}

/* the batch branch of Element._transmit for one port: its frames due before ``release`` become
 * records (take), their groups go to the process's batch, the domain and the counters are told */
static int transmit_batch(PyObject *p, PyObject *pend, long long release, long long window, PyObject *domain,
                          bctx_t *c)
{
    dgvec_t out;
    PyObject *addr = SLOT(p, o_peer_addr), *pdom = SLOT(p, o_peer_domain), *peer = SLOT(p, o_peer);
    long n;
    long long nbytes, last, lat;
    if (addr == NULL || pdom == NULL || peer == NULL || !get_ll(SLOT(p, o_latency), &lat)) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "emu._core.transmit_local: a port without its peer");
        return -1;
    }
    Py_INCREF(addr);
    Py_INCREF(pdom);
    Py_INCREF(peer);
    int rc = -1;
    if (take_into(SLOT(p, o_link), pend, release, window, &out, &n, &nbytes, &last) < 0)
        goto done;
    c->groups += out.n;
    for (Py_ssize_t k = 0; k < out.n; k++)
        if (batch_send(c, out.v[k], addr) < 0)
            goto done;
    if (DomainT != NULL && Py_TYPE(domain) == DomainT) { /* (Domain.frames_sent: its sum kept here a while) */
        if (c->pdom != pdom && (c->pdom == NULL || !PyLong_CheckExact(pdom) || !PyLong_CheckExact(c->pdom) ||
                                PyObject_RichCompareBool(pdom, c->pdom, Py_EQ) != 1)) {
            if (PyErr_Occurred() || bctx_sent(c, domain) < 0)
                goto done;
            c->pdom = Py_NewRef(pdom);
        }
        c->pdom_n += n;
        if (frames_sent_local(domain, pdom, peer) < 0)
            goto done;
    } else if (frames_sent(domain, pdom, n, peer) < 0)
        goto done;
    if (iw_put_ll(&SLOT(p, o_sent_done), last - lat) < 0 || hp_add_count(p, o_tx_frames, n) < 0 || hp_add_count(p, o_tx_bytes, nbytes) < 0)
        goto done;
    n_batched += n;
    rc = 0;
done:
    dgv_clear(&out);
    Py_DECREF(addr);
    Py_DECREF(pdom);
    Py_DECREF(peer);
    return rc;
}

/* Element._transmit_ports's general path for a port to an element of this process with link control
 * queued (credits: no time on the wire) and no emulated fault, nothing captured (the caller checks):
 * its credits due before ``release`` then its frames due (Python's order: the credits first, each
 * list in time order) into the peer's heap as one hand-over (Links._hand_over). The counts as
 * Python keeps them: the receiver counts every frame and byte, the sender its data frames only.
 * *handed: frames handed over (0: none due); their earliest arrival lowers *first. 0, or -1. */
static int hand_over_ctl(PyObject *p, PyObject *local, PyObject *ctl, PyObject *pend, long long release, PyObject *window,
                         PyObject *domain, int inline_counts, long long *local_n, long long *first)
{
    PyObject *peer = PyTuple_GET_ITEM(local, 0), *inp = PyTuple_GET_ITEM(local, 1);
    PyObject *link = SLOT(p, o_link), *rlink, *heap = NULL, *f_clean = NULL;
    if (Py_TYPE(inp) != InPortT || link == NULL || Py_TYPE(link) != SenderT || (rlink = SLOT(inp, i_link)) == NULL ||
        Py_TYPE(rlink) != ReceiverT)
        return 1; /* (not this case: Python's) */
    long long a_ctl = 0, a_pend = 0;
    int h_ctl = head_time(ctl, 1, &a_ctl), h_pend = head_time(pend, 1, &a_pend);
    if (h_ctl < 0 || h_pend < 0)
        return -1;
    if (h_ctl == 2 || h_pend == 2)
        return 1;
    int due_ctl = h_ctl == 1 && a_ctl < release, due_pend = h_pend == 1 && a_pend < release;
    if (!due_ctl && !due_pend)
        return 0;
    long long a0 = due_ctl ? a_ctl : a_pend, st, seq, lat;
    PyObject *safe = EL_GET(peer, E_SAFE_TIME);
    int okst = get_ll(safe, &st);
    Py_XDECREF(safe);
    if (!okst) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "emu._core.transmit_local: safe_time is not an integer");
        return -1;
    }
    if (a0 < st) {
        PyErr_Format(CausalityError, "%S: frame stamped %lld ns handed over after %lld ns was processed; "
                     "the synchroniser let a window run too far", SLOT(inp, i_name), a0, st);
        return -1;
    }
    if (!get_ll(SLOT(link, ls_seq), &seq) || !get_ll(SLOT(p, o_latency), &lat)) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "emu._core.transmit_local: a sequence number is not an integer");
        return -1;
    }
    int rc = -1;
    if ((heap = EL_GET(peer, E_HEAP)) == NULL || (f_clean = PyLong_FromLongLong(C_CLEAN)) == NULL)
        goto done;
    long long nc = 0, cbytes = 0, ts = (long long)1 << 62;
    for (;;) { /* the credits due */
        long long arr;
        int h = head_time(ctl, 1, &arr);
        if (h < 0)
            goto done;
        if (h == 2) {
            PyErr_SetString(PyExc_TypeError, "emu._core.transmit_local: a link-control entry is not a tuple");
            goto done;
        }
        if (h == 0 || arr >= release)
            break;
        PyObject *e = q_popleft(ctl);
        if (e == NULL)
            goto done;
        PyObject *fr = PyTuple_GET_SIZE(e) == 4 ? PyTuple_GET_ITEM(e, 2) : NULL;
        if (fr == NULL || !PyBytes_CheckExact(fr)) {
            Py_DECREF(e);
            PyErr_SetString(PyExc_TypeError, "emu._core.transmit_local: a link-control frame is not bytes");
            goto done;
        }
        PyObject *rec = hp_record(Py_NewRef(PyTuple_GET_ITEM(e, 1)), arr, SLOT(inp, i_index), seq, Py_NewRef(fr),
                                  f_clean); /* (its arrival the entry's int: arr read from it by head_time) */
        cbytes += PyBytes_GET_SIZE(fr);
        iw_t4_keep(e); /* (kept for the next credit's entry when this was its last holder) */
        if (rec == NULL)
            goto done;
        int pushed = heap_push(heap, rec);
        Py_DECREF(rec);
        if (pushed < 0)
            goto done;
        seq = (seq + 1) & 0xFFFFFFFFLL;
        nc++;
        if (arr < ts)
            ts = arr;
    }
    long n = 0;
    long long nbytes = 0, last = 0;
    if (due_pend) { /* then the frames due */
        long long flags = SLOT(p, o_defer_fcs) == Py_True ? C_CLEAN | C_NOFCS : C_CLEAN;
        if (hand_over_into(pend, heap, SLOT(inp, i_index), seq, flags, release, C_POOL, &n, &nbytes, &seq, &last) < 0)
            goto done;
        if (flags & C_NOFCS)
            nbytes += 4LL * n;
        if (a_pend < ts)
            ts = a_pend;
        if (iw_put_ll(&SLOT(p, o_sent_done), last - lat) < 0)
            goto done;
    }
    if (ts < *first)
        *first = ts;
    if (hp_set_count(link, ls_seq, seq) < 0 || hp_set_count(rlink, lr_expected, seq) < 0 ||
        hp_add_count(p, o_tx_frames, n) < 0 || hp_add_count(p, o_tx_bytes, nbytes) < 0 ||
        hp_add_count(inp, i_rx_frames, n + nc) < 0 || hp_add_count(inp, i_rx_bytes, nbytes + cbytes) < 0 ||
        (inline_counts ? (*local_n += n + nc, frames_due(domain, peer, ts)) : frames_local_call(domain, peer, n + nc, ts, window)) < 0)
        goto done;
    n_handed += nc;
    rc = 0;
done:
    Py_XDECREF(heap);
    Py_XDECREF(f_clean);
    return rc;
}

/* ``p`` onto the ports left to Python (*others: a list made at the first) */
static int tx_other(PyObject **others, PyObject *p)
{
    if (*others == NULL && (*others = PyList_New(0)) == NULL)
        return -1;
    return PyList_Append(*others, p);
}

/* transmit_into's ports released (``nports`` held), its arrays freed unless in place (NULL: never made) */
static void tx_ports_release(PyObject **ports, PyObject **ports_local, Py_ssize_t nports, PyObject **done,
                             PyObject **done_local)
{
    for (Py_ssize_t k = 0; k < nports; k++)
        Py_DECREF(ports[k]);
    if (ports != ports_local)
        PyMem_Free(ports);
    if (done != done_local)
        PyMem_Free(done);
}

/* Element._transmit's first part: every busy port with neither link control nor an emulated fault
 * (the caller checks the capture) whose peer is in this process hands the frames due before
 * ``release`` straight into the peer's heap; given the process's ``batch`` (None: no socket path
 * here), a port whose peer is elsewhere turns them into records for it -- up to the first such port
 * left to Python, so that the groups reach the batch in Python's order. A port left empty leaves
 * ``busy``. Returns (earliest arrival handed over or taken, or INF; the other busy ports for Python,
 * in their order: a list, or NULL when there are none). */
static int transmit_into(PyObject *busy, long long release, PyObject *window, PyObject *domain, PyObject *batch,
                         PyObject *stats, long long *first_out, PyObject **others_out)
{
    long long win, clean = C_CLEAN, nofcs = C_NOFCS, first = (long long)1 << 62;
    int to_python = batch == Py_None; /* a remote port went to Python: so do the ones after it */
    int inline_counts = DomainT != NULL && Py_TYPE(domain) == DomainT; /* (the domain told once, at the end) */
    long long local_n = 0;
    bctx_t bc = {batch, NULL, NULL, NULL, NULL, -1, 0, 0};
    if (!ready || !PyDict_CheckExact(busy) || !get_ll(window, &win)) {
        PyErr_SetString(PyExc_TypeError, "emu._core.transmit_local: bad arguments");
        return -1;
    }
    /* the ports as they are now, held (Python code runs in between: a lazy frame made, the domain
     * told) -- in place for a few, else a PyMem array; those left empty (``done``, borrowed from
     * ``ports``) and the others for Python (a list made when there is one) -- each port's (peer, input
     * port) held while it is used */
    enum { TX_LOCAL = 16 };
    PyObject *others = NULL, *held = NULL, *held_pend = NULL, *ports_local[TX_LOCAL], *done_local[TX_LOCAL];
    PyObject **ports = ports_local, **done = done_local;
    Py_ssize_t nports = 0, ndone = 0, cap = PyDict_GET_SIZE(busy);
    if (cap > TX_LOCAL) {
        ports = PyMem_Malloc(cap * sizeof(PyObject *));
        done = PyMem_Malloc(cap * sizeof(PyObject *));
        if (ports == NULL || done == NULL) {
            PyErr_NoMemory();
            goto fail;
        }
    }
    {
        Py_ssize_t pos = 0;
        PyObject *k, *v;
        while (nports < cap && iw_dict_next(busy, &pos, &k, &v))
            ports[nports++] = Py_NewRef(k);
    }
    for (Py_ssize_t kp = 0; kp < nports; kp++, drop(&held), drop(&held_pend)) {
        PyObject *p = ports[kp], *local, *ctl, *pend;
        Py_ssize_t nctl;
        if (Py_TYPE(p) == OutPortT && (local = SLOT(p, o_local)) != NULL && PyTuple_CheckExact(local) &&
            PyTuple_GET_SIZE(local) == 2 && SLOT(p, o_fault_rng) == Py_None && (ctl = SLOT(p, o_ctl)) != NULL &&
            Py_TYPE(ctl) == DequeT && q_len(ctl) > 0 && (pend = SLOT(p, o_pending)) != NULL &&
            Py_TYPE(pend) == DequeT) { /* to this process, with credits to send: Python's general path, here */
            held = Py_NewRef(local);
            Py_INCREF(ctl);
            held_pend = Py_NewRef(pend);
            int hc = hand_over_ctl(p, local, ctl, pend, release, window, domain, inline_counts, &local_n, &first);
            Py_ssize_t left = hc < 0 ? -1 : q_len(ctl);
            Py_DECREF(ctl);
            if (hc < 0 || left < 0)
                goto fail;
            if (hc == 1 && tx_other(&others, p) < 0)
                goto fail;
            Py_ssize_t lp = hc == 1 ? 1 : q_len(pend);
            if (lp < 0)
                goto fail;
            if (lp == 0 && left == 0)
                done[ndone++] = p;
            continue;
        }
        if (Py_TYPE(p) != OutPortT || (local = SLOT(p, o_local)) == NULL || SLOT(p, o_fault_rng) != Py_None ||
            (ctl = SLOT(p, o_ctl)) == NULL || (nctl = q_len(ctl)) != 0 || (pend = SLOT(p, o_pending)) == NULL ||
            (local == Py_None && to_python) ||
            (local != Py_None && (!PyTuple_CheckExact(local) || PyTuple_GET_SIZE(local) != 2))) {
            if (PyErr_Occurred() || tx_other(&others, p) < 0)
                goto fail;
            if (Py_TYPE(p) != OutPortT || local == NULL || local == Py_None)
                to_python = 1;
            continue;
        }
        held = Py_NewRef(local);
        held_pend = Py_NewRef(pend);
        Py_ssize_t npend = q_len(pend);
        if (npend < 0)
            goto fail;
        if (npend) {
            PyObject *head = q_first(pend);
            if (head == NULL)
                goto fail;
            long long a0;
            int ok = PyTuple_Check(head) && PyTuple_GET_SIZE(head) == 4 && get_ll(PyTuple_GET_ITEM(head, 1), &a0);
            Py_DECREF(head);
            if (!ok) {
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_TypeError, "emu._core.transmit_local: a pending entry is not a 4-tuple");
                goto fail;
            }
            if (a0 < release && local == Py_None) { /* by the process's socket */
                if (a0 < first)
                    first = a0;
                if (transmit_batch(p, pend, release, win, domain, &bc) < 0)
                    goto fail;
                npend = q_len(pend);
            } else if (a0 < release) {
                PyObject *peer = PyTuple_GET_ITEM(local, 0), *inp = PyTuple_GET_ITEM(local, 1);
                PyObject *link = SLOT(p, o_link), *rlink;
                if (Py_TYPE(inp) != InPortT || link == NULL || Py_TYPE(link) != SenderT ||
                    (rlink = SLOT(inp, i_link)) == NULL || Py_TYPE(rlink) != ReceiverT) {
                    if (tx_other(&others, p) < 0)
                        goto fail;
                    continue;
                }
                PyObject *safe = EL_GET(peer, E_SAFE_TIME);
                long long st;
                int okst = get_ll(safe, &st);
                Py_XDECREF(safe);
                if (!okst) {
                    if (!PyErr_Occurred())
                        PyErr_SetString(PyExc_TypeError, "emu._core.transmit_local: safe_time is not an integer");
                    goto fail;
                }
                if (a0 < st) {
                    PyErr_Format(CausalityError, "%S: frame stamped %lld ns handed over after %lld ns was processed; "
                                 "the synchroniser let a window run too far", SLOT(inp, i_name), a0, st);
                    goto fail;
                }
                if (a0 < first)
                    first = a0;
                PyObject *heap = EL_GET(peer, E_HEAP);
                if (heap == NULL)
                    goto fail;
                long long seq, flags = SLOT(p, o_defer_fcs) == Py_True ? clean | nofcs : clean;
                if (!get_ll(SLOT(link, ls_seq), &seq)) {
                    Py_DECREF(heap);
                    if (!PyErr_Occurred())
                        PyErr_SetString(PyExc_TypeError, "emu._core.transmit_local: a sequence number is not an integer");
                    goto fail;
                }
                long n;
                long long nbytes, nseq, last, lat;
                int okh = hand_over_into(pend, heap, SLOT(inp, i_index), seq, flags, release, C_POOL, &n, &nbytes,
                                         &nseq, &last);
                Py_DECREF(heap);
                if (okh < 0 || !get_ll(SLOT(p, o_latency), &lat))
                    goto fail;
                if (flags & nofcs)
                    nbytes += 4LL * n;
                if (hp_set_count(link, ls_seq, nseq) < 0 || hp_set_count(rlink, lr_expected, nseq) < 0 ||
                    iw_put_ll(&SLOT(p, o_sent_done), last - lat) < 0 || hp_add_count(p, o_tx_frames, n) < 0 ||
                    hp_add_count(p, o_tx_bytes, nbytes) < 0 || hp_add_count(inp, i_rx_frames, n) < 0 ||
                    hp_add_count(inp, i_rx_bytes, nbytes) < 0 ||
                    (inline_counts ? (local_n += n, frames_due(domain, peer, a0)) : frames_local_call(domain, peer, n, a0, window)) < 0)
                    goto fail;
                npend = q_len(pend);
            }
        }
        if (npend < 0)
            goto fail;
        if (npend == 0)
            done[ndone++] = p;
    }
    for (Py_ssize_t k = 0; k < ndone; k++)
        if (PyDict_DelItem(busy, done[k]) < 0)
            goto fail;
    tx_ports_release(ports, ports_local, nports, done, done_local);
    if (bctx_end(&bc, domain, stats) < 0 || local_counts(domain, local_n, window) < 0) {
        Py_XDECREF(others);
        return -1;
    }
    *first_out = first;
    *others_out = others;
    return 0;
fail:
    if (local_n || bc.groups || bc.pdom != NULL || bc.holding >= 0) { /* what was sent or handed over stands:
                                                                        counted, the error kept */
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        if (bctx_end(&bc, domain, stats) < 0 || (local_n && local_counts(domain, local_n, window) < 0))
            PyErr_Clear();
        PyErr_Restore(et, ev, tb);
    }
    Py_XDECREF(held);
    Py_XDECREF(held_pend);
    Py_XDECREF(others);
    tx_ports_release(ports, ports_local, nports, done, done_local);
    return -1;
}

static PyObject *transmit_local(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "transmit_local(busy, release, window, domain, batch, stats)");
        return NULL;
    }
    long long release, first;
    PyObject *others;
    if (!get_ll(args[1], &release)) {
        PyErr_SetString(PyExc_TypeError, "emu._core.transmit_local: bad arguments");
        return NULL;
    }
    if (transmit_into(args[0], release, args[2], args[3], args[4], args[5], &first, &others) < 0)
        return NULL;
    if (others == NULL && (others = PyList_New(0)) == NULL)
        return NULL;
    return Py_BuildValue("(LN)", first, others);
}

#endif /* EMU_CSRC_TRANSMIT_H */
