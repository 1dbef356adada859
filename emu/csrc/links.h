/* emu/csrc/links.h: the socket path's records: LinkSender.take and Batch.on_datagram's common case (part of emu/_core.c, one translation unit) */
#ifndef EMU_CSRC_LINKS_H
#define EMU_CSRC_LINKS_H

/* the outer header's fields in network order, read and written whole (one load or store and a byte
 * swap; common.h's be / put_be, a byte at a time, elsewhere) */
#if defined(__GNUC__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
static inline uint64_t sk_be16(const unsigned char *b) { uint16_t v; memcpy(&v, b, 2); return __builtin_bswap16(v); }
static inline uint64_t sk_be32(const unsigned char *b) { uint32_t v; memcpy(&v, b, 4); return __builtin_bswap32(v); }
static inline uint64_t sk_be64(const unsigned char *b) { uint64_t v; memcpy(&v, b, 8); return __builtin_bswap64(v); }
static inline void sk_put_be16(unsigned char *b, uint64_t v) { uint16_t x = __builtin_bswap16((uint16_t)v); memcpy(b, &x, 2); }
static inline void sk_put_be32(unsigned char *b, uint64_t v) { uint32_t x = __builtin_bswap32((uint32_t)v); memcpy(b, &x, 4); }
static inline void sk_put_be64(unsigned char *b, uint64_t v) { uint64_t x = __builtin_bswap64(v); memcpy(b, &x, 8); }
#else
static inline uint64_t sk_be16(const unsigned char *b) { return be(b, 2); }
static inline uint64_t sk_be32(const unsigned char *b) { return be(b, 4); }
static inline uint64_t sk_be64(const unsigned char *b) { return be(b, 8); }
static inline void sk_put_be16(unsigned char *b, uint64_t v) { put_be(b, v, 2); }
static inline void sk_put_be32(unsigned char *b, uint64_t v) { put_be(b, v, 4); }
static inline void sk_put_be64(unsigned char *b, uint64_t v) { put_be(b, v, 8); }
#endif

/* LinkSender.take: every frame of ``pend`` arriving before ``release`` becomes a DATA (DATA_POOL)
 * record -- its 12-byte prefix, then seq, arrival, length, window (network order), then the frame
 * itself -- in datagrams of at most MAX_DATAGRAM bytes, each a bytes object retained for
 * retransmission as (window, first seq, last seq, datagram). Returns (datagrams, frames, their bytes,
 * last arrival). */
typedef struct { PyObject *frame; long long arrival; int pool; } rec_t;

/* take's datagrams (new references), in order: a few in place, more in a PyMem array (no list and
 * no malloc for the common take of one or two) */
#define DGV_LOCAL 8
typedef struct { PyObject **v; Py_ssize_t n, cap; PyObject *local[DGV_LOCAL]; } dgvec_t;

static void dgv_init(dgvec_t *d)
{
    d->v = d->local;
    d->n = 0;
    d->cap = DGV_LOCAL;
}

static int dgv_push(dgvec_t *d, PyObject *dg) /* (steals dg, released on failure) */
{
    if (d->n == d->cap) {
        PyObject **more = PyMem_Malloc(2 * d->cap * sizeof(PyObject *));
        if (more == NULL) {
            Py_DECREF(dg);
            PyErr_NoMemory();
            return -1;
        }
        memcpy(more, d->v, d->n * sizeof(PyObject *));
        if (d->v != d->local)
            PyMem_Free(d->v);
        d->v = more;
        d->cap *= 2;
    }
    d->v[d->n++] = dg;
    return 0;
}

static void dgv_clear(dgvec_t *d)
{
    for (Py_ssize_t k = 0; k < d->n; k++)
        Py_DECREF(d->v[k]);
    if (d->v != d->local)
        PyMem_Free(d->v);
    dgv_init(d);
}

static int flush_dgram(PyObject *link, rec_t *recs, Py_ssize_t k0, Py_ssize_t k1, Py_ssize_t size,
                       long long seq0, long long w16, long long window, dgvec_t *out)
{
    PyObject *dg = rt_take_dg(size); /* (the datagram written here: the frames copied once, into it) */
    if (dg == NULL)
        dg = fpool_take(size, &fp_hint_dg);
    if (dg == NULL)
        return -1;
    PyObject *pre = SLOT(link, ls_prefix), *prep = SLOT(link, ls_prefix_pool);
    unsigned char *b = (unsigned char *)PyBytes_AS_STRING(dg);
    long long seq = seq0;
    for (Py_ssize_t k = k0; k < k1; k++) {
        Py_ssize_t n = PyBytes_GET_SIZE(recs[k].frame);
        memcpy(b, PyBytes_AS_STRING(recs[k].pool ? prep : pre), 12);
        sk_put_be32(b + 12, (uint32_t)seq);
        sk_put_be64(b + 16, (uint64_t)recs[k].arrival);
        sk_put_be16(b + 24, (uint64_t)n);
        sk_put_be16(b + 26, (uint64_t)w16);
        memcpy(b + C_OUTER_LEN, PyBytes_AS_STRING(recs[k].frame), (size_t)n);
        b += C_OUTER_LEN + n;
        seq = (seq + 1) & 0xFFFFFFFFLL;
    }
    static PyObject *win_obj; /* (the window's int, shared by the entries of a window: ints are immutable) */
    static long long win_val;
    if (win_obj == NULL || win_val != window) {
        PyObject *w = PyLong_FromLongLong(window);
        if (w == NULL) {
            Py_DECREF(dg);
            return -1;
        }
        Py_XSETREF(win_obj, w);
        win_val = window;
    }
    PyObject *kept = sk_retained_entry(win_obj, seq0, (seq - 1) & 0xFFFFFFFFLL, Py_NewRef(dg));
    if (kept == NULL) {
        Py_DECREF(dg);
        return -1;
    }
    PyObject *ret = SLOT(link, ls_retained), *r = NULL;
    int rc;
    if (ret != NULL && PyList_CheckExact(ret)) /* (LinkSender's: a list) */
        rc = PyList_Append(ret, kept);
    else {
        r = q_append(ret, kept);
        rc = r == NULL ? -1 : 0;
        Py_XDECREF(r);
    }
    Py_DECREF(kept);
    if (rc < 0) {
        Py_DECREF(dg);
        return -1;
    }
    return dgv_push(out, dg);
}

/* the records of ``link``'s frames of ``pend`` arriving before ``release``: their datagrams (bytes)
 * into *out (initialised here; the caller clears it, also on failure), frames, their bytes and the
 * last arrival (take's work, shared with transmit_local) */
static int take_into(PyObject *link, PyObject *pend, long long release, long long window, dgvec_t *out,
                     long *n_out, long long *nbytes_out, long long *last_out)
{
    long long seq0;
    dgv_init(out);
    if (!ready || Py_TYPE(link) != SenderT || !get_ll(SLOT(link, ls_seq), &seq0) || SLOT(link, ls_prefix) == NULL ||
        !PyBytes_CheckExact(SLOT(link, ls_prefix)) || PyBytes_GET_SIZE(SLOT(link, ls_prefix)) != 12 ||
        SLOT(link, ls_prefix_pool) == NULL || !PyBytes_CheckExact(SLOT(link, ls_prefix_pool)) ||
        PyBytes_GET_SIZE(SLOT(link, ls_prefix_pool)) != 12) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "emu._core.take: bad arguments");
        return -1;
    }
    enum { RECS_LOCAL = 16 };
    rec_t local[RECS_LOCAL], *recs = local; /* (in place; a PyMem array past RECS_LOCAL frames) */
    Py_ssize_t cap = RECS_LOCAL, nrec = 0;
    long long nbytes = 0, last = 0, w16 = window & 0xFFFF;
    for (;;) { /* off the queue, made if lazy */
        long long arrival;
        PyObject *frame;
        int pool, got = pop_due(pend, release, &arrival, &frame, &pool, "take", NULL);
        if (got < 0)
            goto fail;
        if (got == 0)
            break;
        if (!PyBytes_CheckExact(frame)) { /* bytes-like (a bytearray, a view): its bytes, as join takes them */
            PyObject *b = PyBytes_FromObject(frame);
            Py_DECREF(frame);
            if (b == NULL)
                goto fail;
            frame = b;
        }
        if (PyBytes_GET_SIZE(frame) > 0xFFFF) {
            Py_DECREF(frame);
            PyErr_SetString(PyExc_ValueError, "emu._core.take: a frame of over 65535 bytes");
            goto fail;
        }
        if (nrec == cap) {
            rec_t *more = recs == local ? PyMem_Malloc(2 * cap * sizeof(rec_t))
                                        : PyMem_Realloc(recs, 2 * cap * sizeof(rec_t));
            if (more == NULL) {
                Py_DECREF(frame);
                PyErr_NoMemory();
                goto fail;
            }
            if (recs == local)
                memcpy(more, local, nrec * sizeof(rec_t));
            recs = more;
            cap *= 2;
        }
        recs[nrec].frame = frame;
        recs[nrec].arrival = arrival;
        recs[nrec].pool = pool;
        nrec++;
        nbytes += PyBytes_GET_SIZE(frame);
        last = arrival;
    }
    { /* into groups, as Python's loop cuts them */
        Py_ssize_t k0 = 0, size = 0;
        long long first = seq0, seq = seq0;
        for (Py_ssize_t k = 0; k < nrec; k++) {
            Py_ssize_t n = PyBytes_GET_SIZE(recs[k].frame);
            if (size + C_OUTER_LEN + n > C_MAX_DATAGRAM && k > k0) {
                if (flush_dgram(link, recs, k0, k, size, first, w16, window, out) < 0)
                    goto fail;
                k0 = k;
                size = 0;
                first = seq;
            }
            size += C_OUTER_LEN + n;
            seq = (seq + 1) & 0xFFFFFFFFLL;
        }
        if (nrec > k0 && flush_dgram(link, recs, k0, nrec, size, first, w16, window, out) < 0)
            goto fail;
        if (hp_set_count(link, ls_seq, seq) < 0)
            goto fail;
    }
    for (Py_ssize_t k = 0; k < nrec; k++) /* (copied: a frame nobody else holds keeps its buffer for a received one) */
        fpool_put(recs[k].frame, &fp_hint_fr);
    if (recs != local)
        PyMem_Free(recs);
    n_taken += nrec;
    *n_out = (long)nrec;
    *nbytes_out = nbytes;
    *last_out = last;
    return 0;
fail:
    for (Py_ssize_t k = 0; k < nrec; k++)
        Py_DECREF(recs[k].frame);
    if (recs != local)
        PyMem_Free(recs);
    return -1;
}

static PyObject *take(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "take(link, pend, release, window)");
        return NULL;
    }
    long long release, window, nbytes, last;
    long n;
    dgvec_t dgs;
    if (!get_ll(args[2], &release) || !get_ll(args[3], &window)) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "emu._core.take: bad arguments");
        return NULL;
    }
    if (take_into(args[0], args[1], release, window, &dgs, &n, &nbytes, &last) < 0) {
        dgv_clear(&dgs);
        return NULL;
    }
    PyObject *out = PyList_New(dgs.n);
    if (out != NULL) {
        for (Py_ssize_t k = 0; k < dgs.n; k++) /* (the references the list's now) */
            PyList_SET_ITEM(out, k, dgs.v[k]);
        dgs.n = 0;
    }
    dgv_clear(&dgs);
    return out == NULL ? NULL : Py_BuildValue("(NlLL)", out, n, nbytes, last);
}

/* sender == peer address: two (host, port) tuples of a str and an int compared in place (the
 * tuples' comparison otherwise, as Python's ==) -- 1, 0, -1 error */
static int addr_eq(PyObject *a, PyObject *b)
{
    long long pa, pb;
    if (a == b)
        return 1;
    if (PyTuple_CheckExact(a) && PyTuple_CheckExact(b) && PyTuple_GET_SIZE(a) == 2 && PyTuple_GET_SIZE(b) == 2 &&
        PyUnicode_CheckExact(PyTuple_GET_ITEM(a, 0)) && PyUnicode_CheckExact(PyTuple_GET_ITEM(b, 0)) &&
        get_ll(PyTuple_GET_ITEM(a, 1), &pa) && get_ll(PyTuple_GET_ITEM(b, 1), &pb)) {
        if (pa != pb)
            return 0;
        PyObject *ha = PyTuple_GET_ITEM(a, 0), *hb = PyTuple_GET_ITEM(b, 0);
        return ha == hb || PyUnicode_Compare(ha, hb) == 0;
    }
    PyErr_Clear();
    return PyObject_RichCompareBool(a, b, Py_EQ);
}

/* Batch.on_datagram's common case: from ``off``, every DATA / DATA_POOL record of this cluster whose
 * link ends here, from the socket at its other end, in sequence and not late goes into its element's
 * heap as Python would put it, and its input port's counters. Stops at the first other record
 * (Python's: a drop, a gap, a NACK ...). The frames taken are told to their elements' domains before
 * it returns (Domain.frames_arrived: per element and window, the earliest stamp -- what Python's
 * ``got`` adds up, told in groups of its own: the counts are sums, the heap entry the earliest).
 * Returns (the offset it stopped at, n when all were taken; the frames taken). */

typedef struct { PyObject *el; long long n, first, win; } rgot_t; /* (el held) */
#define RGOT_MAX 64
/* an element's entry for a window found by a table of RGOT_SLOTS (open addressing, at most half
 * full; -1 empty) rather than a search of the entries: a datagram's records come one link, and
 * often one element, after another */
#define RGOT_SLOTS 128
static inline size_t rgot_hash(PyObject *el, long long win)
{
    return (size_t)(((uint64_t)(uintptr_t)el ^ (uint64_t)win) * 0x9E3779B97F4A7C15ULL >> 57);
}

/* the counts of ``got`` told to the elements' domains (frames_arrived; a Domain's received and
 * _by_window added once per run of entries of the same domain and window), the entries released */
static int rgot_tell(rgot_t *got, int *ngot)
{
    int rc = 0;
    for (int k = 0; k < *ngot && rc == 0; k++) {
        PyObject *dom = EL_GET(got[k].el, E_DOMAIN), *w = NULL;
        if (dom == NULL || (w = PyLong_FromLongLong(got[k].win)) == NULL)
            rc = -1;
        else if (DomainT == NULL || Py_TYPE(dom) != DomainT)
            rc = frames_arrived(dom, got[k].el, (long)got[k].n, got[k].first, w);
        else { /* (the same sums as one call per element: its heap entry, then the counts of a run) */
            long long total = got[k].n;
            rc = frames_due(dom, got[k].el, got[k].first);
            while (rc == 0 && k + 1 < *ngot && got[k + 1].win == got[k].win) {
                PyObject *d2 = EL_GET(got[k + 1].el, E_DOMAIN);
                int same = d2 == dom;
                Py_XDECREF(d2);
                if (d2 == NULL)
                    rc = -1;
                if (!same || rc < 0)
                    break;
                k++;
                total += got[k].n;
                rc = frames_due(dom, got[k].el, got[k].first);
            }
            if (rc == 0)
                rc = arrived_counts(dom, total, w);
        }
        Py_XDECREF(dom);
        Py_XDECREF(w);
    }
    for (int k = 0; k < *ngot; k++)
        Py_DECREF(got[k].el);
    *ngot = 0;
    return rc;
}

/* records' work on the ``n`` bytes at ``b`` from *off: *off moved to where it stopped, the frames it
 * took in *taken. 0, or -1 with an error set (what was taken stands: counted and told). */
static int records_in(const unsigned char *b, long long *off_io, long long n, long long cid, PyObject *in_list,
                      PyObject *sender, long long *taken)
{
    long long off = *off_io;
    long long cur = -1, cwin = -1, safe = 0, accepted = 0;
    PyObject *same_pa = NULL; /* a peer address found equal to ``sender`` (held) */
    PyObject *el = NULL, *heap = NULL, *lk = NULL, *index = NULL, *inp = NULL, *held = NULL; /* (el, inp, lk,
                                                                     index: of held, the owner tuple; heap owned) */
    rgot_t got[RGOT_MAX];
    signed char gslot[RGOT_SLOTS];            /* (got's entries by rgot_hash) */
    memset(gslot, -1, sizeof gslot);
    int ngot = 0, g = -1;                     /* (g: el's entry in got for window cwin) */
    long long rn = 0, rb = 0;                 /* frames and bytes taken on link ``cur``, not yet on its port */
    PyObject *f_data = PyLong_FromLong(0), *f_pool = PyLong_FromLong(C_POOL);
    if (f_data == NULL || f_pool == NULL)
        goto fail;
    while (off < n) {
        if (n - off < C_OUTER_LEN)
            break;
        const unsigned char *h = b + off;
        long kind = h[3];
        long long link = (long long)sk_be32(h + 8), seq = (long long)sk_be32(h + 12), win = (long long)sk_be16(h + 26);
        uint64_t ts = sk_be64(h + 16);
        long long end = off + C_OUTER_LEN + (long long)sk_be16(h + 24);
        if ((long)sk_be16(h) != C_MAGIC || h[2] != C_VERSION || (long long)sk_be32(h + 4) != cid || end > n ||
            (kind != C_KIND_DATA && kind != C_KIND_POOL) || ts >= ((uint64_t)1 << 62))
            break;
        if (link != cur || win != cwin) {
            if (rn && (hp_add_count(inp, i_rx_frames, rn) < 0 || hp_add_count(inp, i_rx_bytes, rb) < 0))
                goto fail;
            rn = rb = 0;
            cur = -1;
            if (link >= PyList_GET_SIZE(in_list))
                break;
            PyObject *owner = PyList_GET_ITEM(in_list, link);
            if (!PyTuple_CheckExact(owner) || PyTuple_GET_SIZE(owner) != 2 ||
                Py_TYPE(PyTuple_GET_ITEM(owner, 1)) != InPortT)
                break; /* (None: no such link here) */
            PyObject *ip = PyTuple_GET_ITEM(owner, 1), *pa = SLOT(ip, i_peer_addr);
            int same = pa == NULL ? 0 : pa == same_pa ? 1 : addr_eq(sender, pa);
            if (same < 0)
                goto fail;
            if (same && pa != same_pa) /* (one sender per datagram: its peers' address found equal once) */
                Py_XSETREF(same_pa, Py_NewRef(pa));
            if (!same || (lk = SLOT(ip, i_link)) == NULL || Py_TYPE(lk) != ReceiverT)
                break;
            Py_XSETREF(held, Py_NewRef(owner));
            inp = ip;
            el = PyTuple_GET_ITEM(owner, 0);
            PyObject *st = EL_GET(el, E_SAFE_TIME);
            int okst = get_ll(st, &safe);
            Py_XDECREF(st);
            if (!okst) {
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_TypeError, "emu._core.records: safe_time is not an integer");
                goto fail;
            }
            Py_XSETREF(heap, EL_GET(el, E_HEAP));
            if (heap == NULL)
                goto fail;
            if (!PyList_CheckExact(heap)) {
                PyErr_SetString(PyExc_TypeError, "emu._core.records: an element's heap is not a list");
                goto fail;
            }
            index = SLOT(inp, i_index);
            if (g < 0 || got[g].el != el || got[g].win != win) { /* its element's entry for this window */
                size_t h = rgot_hash(el, win);
                while ((g = gslot[h]) >= 0 && (got[g].el != el || got[g].win != win))
                    h = (h + 1) & (RGOT_SLOTS - 1);
                if (g < 0) {
                    if (ngot == RGOT_MAX) {
                        if (rgot_tell(got, &ngot) < 0)
                            goto fail;
                        memset(gslot, -1, sizeof gslot);
                        h = rgot_hash(el, win);
                    }
                    g = ngot++;
                    gslot[h] = (signed char)g;
                    got[g] = (rgot_t){Py_NewRef(el), 0, (long long)1 << 62, win};
                }
            }
            cur = link;
            cwin = win;
        }
        long long expected;
        if (!get_ll(SLOT(lk, lr_expected), &expected)) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "emu._core.records: expected is not an integer");
            goto fail;
        }
        if (seq != expected || (long long)ts < safe)
            break; /* a gap, a duplicate, a late record: Python's */
        if (hp_set_count(lk, lr_expected, (seq + 1) & 0xFFFFFFFFLL) < 0)
            goto fail;
        PyObject *rec = hp_record(NULL, (long long)ts, index, seq,
                                  frame_bytes((const char *)h + C_OUTER_LEN, end - off - C_OUTER_LEN),
                                  kind == C_KIND_POOL ? f_pool : f_data);
        if (rec == NULL)
            goto fail;
        int pushed = heap_push(heap, rec);
        Py_DECREF(rec);
        if (pushed < 0)
            goto fail;
        rn++;
        rb += end - off - C_OUTER_LEN;
        got[g].n++;
        if ((long long)ts < got[g].first)
            got[g].first = (long long)ts;
        accepted++;
        n_records++;
        off = end;
    }
    if (rn && (hp_add_count(inp, i_rx_frames, rn) < 0 || hp_add_count(inp, i_rx_bytes, rb) < 0))
        goto fail;
    rn = 0;
    if (rgot_tell(got, &ngot) < 0)
        goto fail;
    Py_XDECREF(heap);
    Py_XDECREF(held);
    Py_XDECREF(same_pa);
    Py_DECREF(f_data);
    Py_DECREF(f_pool);
    *off_io = off;
    *taken = accepted;
    return 0;
fail:
    { /* what was taken stands: counted and told, the first error kept */
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        if ((rn && (hp_add_count(inp, i_rx_frames, rn) < 0 || hp_add_count(inp, i_rx_bytes, rb) < 0)) || rgot_tell(got, &ngot) < 0)
            PyErr_Clear();
        PyErr_Restore(et, ev, tb);
    }
    Py_XDECREF(heap);
    Py_XDECREF(held);
    Py_XDECREF(same_pa);
    Py_XDECREF(f_data);
    Py_XDECREF(f_pool);
    *off_io = off;
    *taken = accepted;
    return -1;
}

static PyObject *records(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "records(data, off, n, cluster_id, in_list, sender)");
        return NULL;
    }
    PyObject *data = args[0], *in_list = args[4], *sender = args[5];
    long long off, n, cid, taken = 0;
    if (!ready || !PyList_CheckExact(in_list) || !get_ll(args[1], &off) || !get_ll(args[2], &n) ||
        !get_ll(args[3], &cid) || off < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "emu._core.records: bad arguments");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    if (n > view.len) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_TypeError, "emu._core.records: n past the data");
        return NULL;
    }
    int rc = records_in((const unsigned char *)view.buf, &off, n, cid, in_list, sender, &taken);
    PyBuffer_Release(&view);
    return rc < 0 ? NULL : Py_BuildValue("(LL)", off, taken);
}


#endif /* EMU_CSRC_LINKS_H */
