/* emu/csrc/ports.h: output ports: enqueue, a static switch's forwarding, the in-memory hand-over (part of emu/_core.c, one translation unit) */
#ifndef EMU_CSRC_PORTS_H
#define EMU_CSRC_PORTS_H

static PyObject *plain_framing; /* a port framing whose ``plain`` was True when asked */

static int plain_port(PyObject *p, int *defer)
{
    if (Py_TYPE(p) != OutPortT)
        return 0;
    if (SLOT(p, o_tracer) != Py_None || SLOT(p, o_up) != Py_True || SLOT(p, o_timeline) != Py_None ||
        SLOT(p, o_flow) != Py_None)
        return 0;
    PyObject *hb = SLOT(p, o_head_bytes);
    if (hb == NULL || !PyLong_CheckExact(hb) || Py_SIZE(hb) != 0) /* (not 0: an int of no digits) */
        return 0;
    PyObject *fr = SLOT(p, o_framing);
    if (fr == NULL)
        return 0;
    if (fr != plain_framing) { /* (the last framing found plain, held: its address is not reused) */
        PyObject *plain = PyObject_GetAttr(fr, s_plain);
        if (plain == NULL) {
            PyErr_Clear();
            return 0;
        }
        Py_DECREF(plain);
        if (plain != Py_True)
            return 0;
        Py_XSETREF(plain_framing, Py_NewRef(fr));
    }
    PyObject *d = SLOT(p, o_defer_fcs);
    if (d != Py_True && d != Py_False)
        return 0;
    *defer = d == Py_True;
    return 1;
}

/* OutPort.enqueue's plain tail for ``frame`` (bytes, its FCS already on unless deferred) of ``n``
 * modelled bytes handed over at ``at`` with the port free at ``free``: the port's times, occupancy
 * and pending queue. Returns start, or -1 on error (a Python exception set). */
static long long enqueue_tail_hb(PyObject *p, PyObject *frame, long long n, long long at, long long free, long long hb);

static long long enqueue_tail(PyObject *p, PyObject *frame, long long n, long long at, long long free)
{
    return enqueue_tail_hb(p, frame, n, at, free, 0);
}

/* enqueue_tail for a port whose receiver takes a frame when its head (``hb`` bytes) is in (0: its
 * tail): the frame on the line recorded (``line``: start, done, modelled bytes, cuttable, []) and
 * its arrival that of its head */
static long long enqueue_tail_hb(PyObject *p, PyObject *frame, long long n, long long at, long long free, long long hb)
{
    long long bps, lat, busy, qb, peakf, peakb;
    if (!get_ll(SLOT(p, o_bps), &bps) || bps <= 0 || !get_ll(SLOT(p, o_latency), &lat) ||
        !get_ll(SLOT(p, o_busy_ns), &busy) || !get_ll(SLOT(p, o_queued_bytes), &qb) ||
        !get_ll(SLOT(p, o_peak_f), &peakf) || !get_ll(SLOT(p, o_peak_b), &peakb)) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "emu._core: an output port's counters are not integers");
        return -1;
    }
    long long start = at > free ? at : free;
    long long ser = (n * 8000000000LL + bps - 1) / bps;
    long long done = start + ser;
    PyObject *head;
    PyObject *q = SLOT(p, o_queued), *spent = NULL; /* (the last entry popped: a reference) */
    for (;;) {
        Py_ssize_t len = q_len(q);
        if (len < 0 || (len > 0 && (head = q_first(q)) == NULL)) {
            Py_XDECREF(spent);
            return -1;
        }
        if (len == 0)
            break;
        long long hd, hn;
        int ok = PyTuple_Check(head) && PyTuple_GET_SIZE(head) == 2 && get_ll(PyTuple_GET_ITEM(head, 0), &hd) &&
                 get_ll(PyTuple_GET_ITEM(head, 1), &hn);
        Py_DECREF(head);
        if (!ok) {
            Py_XDECREF(spent);
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "emu._core: a queued entry is not (done, bytes)");
            return -1;
        }
        if (hd > at)
            break;
        PyObject *r = q_popleft(q);
        if (r == NULL) {
            Py_XDECREF(spent);
            return -1;
        }
        if (spent != NULL)
            hp_q_keep(spent); /* (made again by a later enqueue) */
        spent = r;
        qb -= hn;
    }
    if (spent == NULL)
        spent = hp_q_take(); /* (one that left before, when none left now) */
    static PyObject *n_obj; /* (the last length's int, shared by the entries of that length: ints are immutable) */
    static long long n_val;
    if (n_obj == NULL || n_val != n) {
        Py_XSETREF(n_obj, PyLong_FromLongLong(n));
        n_val = n;
        if (n_obj == NULL) {
            Py_XDECREF(spent);
            return -1;
        }
    }
    PyObject *entry = dq_reuse2(spent, done, n_obj); /* (the last entry that left, when nobody else has it) */
    if (entry == NULL && !PyErr_Occurred())
        entry = tuple_steal_inline(2, (PyObject *[]){PyLong_FromLongLong(done), Py_XNewRef(n_obj)});
    if (entry == NULL)
        return -1;
    PyObject_GC_UnTrack(entry); /* (ints: no cycle through it) */
    PyObject *r = q_append(q, entry);
    Py_DECREF(entry);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    qb += n;
    Py_ssize_t qlen = q_len(q);
    if (qlen < 0)
        return -1;
    if (iw_put_ll(&SLOT(p, o_free_at), done) < 0 || iw_put_ll(&SLOT(p, o_busy_ns), busy + ser) < 0 || iw_put_ll(&SLOT(p, o_queued_bytes), qb) < 0)
        return -1;
    if (qlen > peakf && iw_put_ll(&SLOT(p, o_peak_f), qlen) < 0)
        return -1;
    if (qb > peakb && iw_put_ll(&SLOT(p, o_peak_b), qb) < 0)
        return -1;
    long long arrival = done + lat;
    if (hb) { /* self.line = [start, done, n, a QsNet packet of priority 0, []]; its head's arrival */
        Py_ssize_t wl = PyBytes_GET_SIZE(frame);
        const unsigned char *wb = (const unsigned char *)PyBytes_AS_STRING(frame);
        int cuttable = wl > C_PTYPE_OFF && wb[C_PTYPE_OFF] == C_QPKT_PORT && !(wl > C_PRIO_OFF && wb[C_PRIO_OFF]);
        if (iw_port_line(&SLOT(p, o_line), start, done, n, cuttable) < 0) /* (in place when nobody else holds it) */
            return -1;
        arrival = start + (((hb < n ? hb : n) * 8000000000LL + bps - 1) / bps) + lat;
    }
    PyObject *pe = dq_pending(start, arrival, Py_NewRef(frame), Py_NewRef(Py_False));
    if (pe == NULL)
        return -1;
    r = q_append(SLOT(p, o_pending), pe);
    Py_DECREF(pe);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return start;
}

/* the FCS of the ``flen`` bytes at ``b`` written after them (CRC-32, least significant byte first) */
static inline void put_fcs(unsigned char *b, Py_ssize_t flen)
{
    uint32_t crc = crc32_of(b, flen);
    for (int i = 0; i < 4; i++)
        b[flen + i] = (crc >> (8 * i)) & 0xFF;
}

/* ``frame`` (len flen, from ``src``) with its FCS appended (CRC-32, little-endian), the hop count
 * byte at ``hops_off`` raised by one when ``hops_off`` >= 0. */
static PyObject *with_fcs(const char *src, Py_ssize_t flen, Py_ssize_t hops_off)
{
    PyObject *out = PyBytes_FromStringAndSize(NULL, flen + 4);
    if (out == NULL)
        return NULL;
    unsigned char *b = (unsigned char *)PyBytes_AS_STRING(out);
    memcpy(b, src, flen);
    if (hops_off >= 0)
        b[hops_off] = (b[hops_off] + 1) & 0xFF;
    put_fcs(b, flen);
    return out;
}

/* plain_port's test for a port of any framing whose modelled lengths the core computes (its ``add``
 * table, in *add; NULL: the plain framing) and with head flits (*hb: ``head_bytes``, 0 none) */
static PyObject *framed_obj, *framed_add, *s_add_tbl;
static int framed_port(PyObject *p, int *defer, long long *hb, PyObject **add)
{
    if (Py_TYPE(p) != OutPortT || SLOT(p, o_tracer) != Py_None || SLOT(p, o_up) != Py_True ||
        SLOT(p, o_timeline) != Py_None || SLOT(p, o_flow) != Py_None)
        return 0;
    PyObject *h = SLOT(p, o_head_bytes), *fr = SLOT(p, o_framing), *d = SLOT(p, o_defer_fcs);
    if (h == NULL || fr == NULL || !get_ll(h, hb) || *hb < 0 || (d != Py_True && d != Py_False) ||
        (*hb && C_QPKT_PORT < 0)) {
        PyErr_Clear();
        return 0;
    }
    *defer = d == Py_True;
    if (fr == plain_framing) {
        *add = NULL;
        return 1;
    }
    if (fr == framed_obj) {
        *add = framed_add;
        return 1;
    }
    if (s_add_tbl == NULL && (s_add_tbl = PyUnicode_InternFromString("add")) == NULL)
        return 0;
    PyObject *plain = PyObject_GetAttr(fr, s_plain), *tbl = NULL;
    if (plain == NULL) {
        PyErr_Clear();
        return 0;
    }
    Py_DECREF(plain);
    if (plain == Py_True) {
        Py_XSETREF(plain_framing, Py_NewRef(fr));
        *add = NULL;
        return 1;
    }
    if (plain != Py_False || (tbl = PyObject_GetAttr(fr, s_add_tbl)) == NULL || !PyTuple_CheckExact(tbl) ||
        PyTuple_GET_SIZE(tbl) != 256) {
        Py_XDECREF(tbl);
        PyErr_Clear();
        return 0;
    }
    Py_XSETREF(framed_obj, Py_NewRef(fr)); /* (held: its address is not reused) */
    Py_XSETREF(framed_add, tbl);
    *add = framed_add;
    return 1;
}

/* OutPort.enqueue's plain path for ``frame`` handed to port ``p`` at ``at``: 1 (queued, *start
 * set), 0 (not the plain case: nothing changed, Python's), -1 (error) */
static int enqueue_plain(PyObject *p, PyObject *frame, long long at, long long *start)
{
    long long free, hb = 0;
    int defer;
    PyObject *add = NULL;
    if (!ready || !(PyBytes_CheckExact(frame) || Py_TYPE(frame) == LazyT) || !framed_port(p, &defer, &hb, &add) ||
        !get_ll(SLOT(p, o_free_at), &free) || ((add != NULL || hb) && !PyBytes_CheckExact(frame))) {
        PyErr_Clear();
        return 0;
    }
    long long n = -1; /* its modelled length (Framing.length), when the framing is not the plain one */
    if (add != NULL) {
        Py_ssize_t fl = PyBytes_GET_SIZE(frame);
        long long a;
        if (fl <= C_PTYPE_OFF)
            n = fl + 4;
        else if (!get_ll(PyTuple_GET_ITEM(add, ((const unsigned char *)PyBytes_AS_STRING(frame))[C_PTYPE_OFF]), &a) ||
                 a < 0) {
            PyErr_Clear();
            return 0; /* (a body carried in a QsNet packet: Python's) */
        } else
            n = fl - C_HDR_LEN + a;
    }
    PyObject *wire;
    Py_ssize_t flen;
    if (Py_TYPE(frame) == LazyT) { /* a frame made when the port sends it (emu.wire.lazy): its length now */
        if ((flen = PyObject_Length(frame)) < 0)
            return -1;
        if (free > at && SLOT(p, o_priority) != Py_False && flen + (defer ? 0 : 4) > C_PRIO_OFF) {
            /* it may overtake: its priority byte, as enqueue reads it (the source's header, no bytes made) */
            PyObject *pb = PySequence_GetItem(frame, C_PRIO_OFF);
            int hi = pb == NULL ? -1 : PyObject_IsTrue(pb);
            Py_XDECREF(pb);
            if (hi)
                return hi < 0 ? -1 : 0; /* (a priority frame: Python's) */
        }
        wire = defer ? Py_NewRef(frame) : PyObject_CallMethodNoArgs(frame, s_with_fcs);
    } else {
        flen = PyBytes_GET_SIZE(frame);
        const unsigned char *f = (const unsigned char *)PyBytes_AS_STRING(frame);
        if (flen <= C_PRIO_OFF + 4 || (free > at && SLOT(p, o_priority) != Py_False && f[C_PRIO_OFF]))
            return 0; /* it may overtake (a short frame's FCS byte read as its priority, too): Python's */
        wire = defer ? Py_NewRef(frame) : with_fcs((const char *)f, flen, -1);
    }
    if (wire == NULL)
        return -1;
    *start = enqueue_tail_hb(p, wire, n < 0 ? flen + 4 : n, at, free, hb);
    Py_DECREF(wire);
    if (*start < 0)
        return -1;
    n_enqueued++;
    return 1;
}

static PyObject *enqueue(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "enqueue(port, frame, at)");
        return NULL;
    }
    long long at, start;
    if (!get_ll(args[2], &at)) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    int rc = enqueue_plain(args[0], args[1], at, &start);
    if (rc < 0)
        return NULL;
    if (rc == 0)
        Py_RETURN_NONE;
    return PyLong_FromLongLong(start);
}

/* one entry of an element's result as Element._emit takes it plainly: a (port, frame, at) tuple, the
 * port one of ``outs``, ``at`` kept to the promise (at - now >= min_delay): 1 with *port and *at, 0
 * anything else (an error from reading an int left set: the caller hands the rest to Python) */
static inline int emit_entry(PyObject *e, PyObject *outs, long long now, long long min_delay, long long *port,
                             long long *at)
{
    return PyTuple_CheckExact(e) && PyTuple_GET_SIZE(e) == 3 && get_ll(PyTuple_GET_ITEM(e, 0), port) &&
           get_ll(PyTuple_GET_ITEM(e, 2), at) && *port >= 0 && *port < PyList_GET_SIZE(outs) &&
           *at - now >= min_delay;
}

/* Element._emit(result, None, min_delay, cut) for the frames it queues plainly, in order: each
 * (port, frame, at) onto its port (no token, the promise kept, the port up, no timeline, no credit
 * flow, enqueue's plain case), the port made busy, its entry set to None. Returns the index of the
 * first entry it left (len: none) -- Python's _emit takes the rest -- or -1 (error). */
static Py_ssize_t emit_into(PyObject *outs, PyObject *busy, PyObject *result, long long now, long long min_delay)
{
    if (!PyList_CheckExact(result) || !PyList_CheckExact(outs) || !PyDict_CheckExact(busy))
        return 0;
    Py_ssize_t k = 0;
    for (; k < PyList_GET_SIZE(result); k++) {
        PyObject *e = PyList_GET_ITEM(result, k);
        long long port, at, start;
        if (!emit_entry(e, outs, now, min_delay, &port, &at))
            break;
        PyObject *p = PyList_GET_ITEM(outs, port);
        Py_INCREF(e);
        int rc = enqueue_plain(p, PyTuple_GET_ITEM(e, 1), at, &start);
        Py_DECREF(e);
        if (rc < 0)
            return -1;
        if (rc == 0)
            break;
        if (busy_mark(busy, p) < 0)
            return -1;
        if (k < PyList_GET_SIZE(result) && PyList_GET_ITEM(result, k) == e) { /* (the list as it was) */
            PyList_SET_ITEM(result, k, Py_NewRef(Py_None));
            hp_out_keep(e); /* (the list's reference: kept for a NIC's next send when nobody else holds it) */
        } else if (PyList_SetItem(result, k, Py_NewRef(Py_None)) < 0)
            return -1;
    }
    PyErr_Clear(); /* (a value it could not read: Python's) */
    return k;
}

/* Element.run_window's frames-only loop for a static-table switch: its plain data frames due before
 * ``t_end`` forwarded (SwitchEngine.receive, Element._emit, OutPort.enqueue); stops at the first other
 * one. *n frames, the last one's arrival in *now. -1: an error (set). */
/* Element._arrived's plain case for the heap entry ``item`` (arrival, port, seq, wire, kind),
 * without taking it: its input port has no timeline and no buffer, the frame passes its FCS (or is
 * known clean) and is not link control. 1 (its port, kind and bytes out), 0 (Python's). */
static int plain_arrival(PyObject *item, PyObject *ins, long long *port, long long *kind, PyObject **wire)
{
    PyObject *inp;
    if (!get_ll(PyTuple_GET_ITEM(item, 1), port) || !get_ll(PyTuple_GET_ITEM(item, 4), kind) ||
        !PyBytes_CheckExact(*wire = PyTuple_GET_ITEM(item, 3)) || *port < 0 || *port >= PyList_GET_SIZE(ins) ||
        Py_TYPE(inp = PyList_GET_ITEM(ins, *port)) != InPortT || SLOT(inp, i_timeline) != Py_None ||
        SLOT(inp, i_buf) != Py_None)
        return 0;
    Py_ssize_t wlen = PyBytes_GET_SIZE(*wire);
    const unsigned char *w = (const unsigned char *)PyBytes_AS_STRING(*wire);
    if (!(*kind & C_CLEAN) && (wlen < 4 || crc32_pybytes(*wire) != C_FCS_RESIDUE))
        return 0; /* (a bad FCS: the port's) */
    return !(wlen >= C_CREDIT_LEN && w[13] == C_CREDIT_LO && w[12] == C_CREDIT_HI); /* (link control: the port's) */
}

static int forward_into(PyObject *heap, long long t_end, PyObject *ins, PyObject *outs, PyObject *busy,
                        PyObject *routes, long long delay, long *n_out, long long *now_out)
{
    long long now = -1;
    long n = 0;
    PyObject *made_busy[8]; /* (ports this call put in ``busy``: no Python code runs here, so they stay) */
    int n_busy = 0;
    *n_out = 0;
    if (!ready || !switch_ready || !PyList_CheckExact(heap) || !PyList_CheckExact(ins) || !PyList_CheckExact(outs) ||
        !PyDict_CheckExact(busy) || !PyList_CheckExact(routes))
        return 0;
    for (;;) {
        if (PyList_GET_SIZE(heap) == 0)
            break;
        PyObject *item = PyList_GET_ITEM(heap, 0);
        if (!PyTuple_CheckExact(item) || PyTuple_GET_SIZE(item) != 5)
            break;
        long long arrival, port, kind;
        PyObject *wire;
        if (!get_ll(PyTuple_GET_ITEM(item, 0), &arrival) || arrival >= t_end ||
            !plain_arrival(item, ins, &port, &kind, &wire))
            break;
        Py_ssize_t wlen = PyBytes_GET_SIZE(wire);
        const unsigned char *w = (const unsigned char *)PyBytes_AS_STRING(wire);
        Py_ssize_t flen = (kind & C_NOFCS) ? wlen : wlen - 4;
        /* SwitchEngine.receive: a plain data frame, routed by the table */
        if (flen < C_HDR_LEN || w[12] != C_ET_HI || w[13] != C_ET_LO || decline[w[C_PTYPE_OFF]] ||
            (w[C_FLAGS_OFF] & C_FLAG_BCAST) || w[C_HOPS_OFF] >= C_MAX_HOPS)
            break;
        long long dst = ((long long)w[C_DST_OFF] << 24) | (w[C_DST_OFF + 1] << 16) | (w[C_DST_OFF + 2] << 8) |
                        w[C_DST_OFF + 3];
        if (dst >= PyList_GET_SIZE(routes))
            break;
        long long out;
        if (!get_ll(PyList_GET_ITEM(routes, dst), &out) || out < 0 || out >= PyList_GET_SIZE(outs))
            break;
        /* Element._emit and OutPort.enqueue: a plain port */
        PyObject *p = PyList_GET_ITEM(outs, out);
        int defer;
        long long free;
        if (!plain_port(p, &defer) || !get_ll(SLOT(p, o_free_at), &free))
            break;
        long long at = arrival + delay;
        if (free > at && SLOT(p, o_priority) != Py_False && flen > C_PRIO_OFF && w[C_PRIO_OFF])
            break; /* it may overtake: Python's */
        /* taken: off the heap, the next hop's frame, onto the port */
        PyObject *popped = heap_pop(heap);
        if (popped == NULL)
            return -1;
        if (popped != item) { /* (cannot happen: heap[0] is what heappop returns) */
            Py_DECREF(popped);
            PyErr_SetString(PyExc_RuntimeError, "emu._core.forward: the heap changed under it");
            return -1;
        }
        PyObject *frame;
        if (Py_REFCNT(popped) == 1 && Py_REFCNT(wire) == 1 && (defer ? wlen == flen : wlen == flen + 4)) {
            /* the received frame is nobody else's (not captured, not retained): the next hop's
             * made in its bytes -- the hop count raised, the FCS rewritten (a copy otherwise) */
            frame = Py_NewRef(wire);
            unsigned char *b = (unsigned char *)PyBytes_AS_STRING(frame);
            unsigned old_hops = b[C_HOPS_OFF];
            b[C_HOPS_OFF] = (old_hops + 1) & 0xFF;
            if (!defer && !(kind & C_CLEAN)) { /* its FCS was just checked: changed by the one byte */
                uint32_t crc = (uint32_t)b[flen] | (uint32_t)b[flen + 1] << 8 | (uint32_t)b[flen + 2] << 16 |
                               (uint32_t)b[flen + 3] << 24;
                crc = crc32_one_byte(crc, old_hops ^ b[C_HOPS_OFF], flen - C_HOPS_OFF - 1);
                for (int i = 0; i < 4; i++)
                    b[flen + i] = (crc >> (8 * i)) & 0xFF;
            } else if (!defer)
                put_fcs(b, flen);
            bytes_hash_stale(frame);
        } else if (defer) {
            frame = PyBytes_FromStringAndSize((const char *)w, flen);
            if (frame != NULL)
                ((unsigned char *)PyBytes_AS_STRING(frame))[C_HOPS_OFF] = (w[C_HOPS_OFF] + 1) & 0xFF;
        } else
            frame = with_fcs((const char *)w, flen, C_HOPS_OFF);
        hp_rec_keep(popped); /* (its frame let go: the next hop's, if made in its bytes) */
        if (frame == NULL)
            return -1;
        long long start = enqueue_tail(p, frame, flen + 4, at, free);
        Py_DECREF(frame);
        if (start < 0)
            return -1;
        int known = 0;
        for (int b = 0; b < n_busy && !known; b++)
            known = made_busy[b] == p;
        if (!known) { /* busy[p] = None (once a call: set again, it would stay where it is, None) */
            if (busy_mark(busy, p) < 0)
                return -1;
            if (n_busy < 8)
                made_busy[n_busy++] = p;
        }
        now = arrival;
        n++;
        *n_out = n; /* (what was done stands, whatever comes next) */
        *now_out = now;
    }
    PyErr_Clear(); /* (a value it could not read: Python's) */
    n_forwarded += n;
    return 0;
}

static PyObject *forward(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "forward(heap, t_end, ins, outs, busy, routes, delay)");
        return NULL;
    }
    long long t_end, delay, now = -1;
    long n = 0;
    if (!get_ll(args[1], &t_end) || !get_ll(args[6], &delay)) {
        PyErr_Clear();
        return Py_BuildValue("(lO)", 0L, Py_None);
    }
    if (forward_into(args[0], t_end, args[2], args[3], args[4], args[5], delay, &n, &now) < 0)
        return NULL;
    if (n == 0)
        return Py_BuildValue("(lO)", 0L, Py_None);
    return Py_BuildValue("(lL)", n, now);
}

/* the hand-over loop: frames of ``pend`` arriving before ``release`` into ``heap`` as the records
 * (arrival, index, seq, frame, flags) Python pushes; *n, *nbytes, *seq (the next), *last out. */
static int hand_over_into(PyObject *pend, PyObject *heap, PyObject *index, long long seq, long long flags,
                          long long release, long long poolf, long *n_out, long long *nbytes_out,
                          long long *seq_out, long long *last_out)
{
    long long nbytes = 0, last = -1;
    long n = 0;
    PyObject *f_plain = hp_flag_int(flags), *f_pool = hp_flag_int(flags | poolf); /* (borrowed) */
    if (f_plain == NULL || f_pool == NULL)
        return -1;
    for (;;) {
        long long arrival;
        PyObject *frame; /* (the arrival an int of the record's own: the pending entry keeps its own, both
                          * written in place when made again) */
        int pool, got = pop_due(pend, release, &arrival, &frame, &pool, "hand_over", NULL);
        if (got < 0)
            goto fail;
        if (got == 0)
            break;
        Py_ssize_t flen = PyBytes_CheckExact(frame) ? PyBytes_GET_SIZE(frame) : PyObject_Length(frame);
        if (flen < 0) {
            Py_DECREF(frame);
            goto fail;
        }
        PyObject *rec = hp_record(NULL, arrival, index, seq, frame, pool ? f_pool : f_plain);
        if (rec == NULL)
            goto fail;
        int pushed = heap_push(heap, rec);
        Py_DECREF(rec);
        if (pushed < 0)
            goto fail;
        seq = (seq + 1) & 0xFFFFFFFFLL;
        n++;
        nbytes += flen;
        last = arrival;
    }
    n_handed += n;
    *n_out = n;
    *nbytes_out = nbytes;
    *seq_out = seq;
    *last_out = last;
    return 0;
fail:
    return -1;
}

static PyObject *hand_over(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "hand_over(pending, heap, index, seq, flags, release, pool_flag)");
        return NULL;
    }
    long long seq, flags, release, poolf, nbytes, last;
    long n;
    if (!ready || !PyList_CheckExact(args[1]) || !get_ll(args[3], &seq) || !get_ll(args[4], &flags) ||
        !get_ll(args[5], &release) || !get_ll(args[6], &poolf)) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "emu._core.hand_over: bad arguments");
        return NULL;
    }
    if (hand_over_into(args[0], args[1], args[2], seq, flags, release, poolf, &n, &nbytes, &seq, &last) < 0)
        return NULL;
    return Py_BuildValue("(lLLL)", n, nbytes, seq, last);
}

#endif /* EMU_CSRC_PORTS_H */
