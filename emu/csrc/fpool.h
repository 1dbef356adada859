/* emu/csrc/fpool.h: received frames' copies and sent datagrams made in the buffers of frames and
 * datagrams let go; Element.forget, which lets a link's retained datagrams go (part of emu/_core.c,
 * one translation unit) */
#ifndef EMU_CSRC_FPOOL_H
#define EMU_CSRC_FPOOL_H

/* -- bytes used again: a frame a link has copied into its records (take) and a datagram a link kept
 * for retransmission, once forgotten (every receiver has it), held by nobody else, keep their
 * buffers here for the next frame of their length a datagram brings (records) and the next
 * datagram of theirs a link makes (take): neither then takes a malloc, nor its sender a free --
 * the socket path's allocations per crossing the in-memory path does not make. Only malloc's
 * sizes (pymalloc takes the small ones cheaply), a few lengths, a bounded number of each. */
#define FP_LENS 8
#define FP_DEPTH 4096
#define FP_MIN 513
#define FP_MAX 16384
#define FP_BUDGET ((Py_ssize_t)32 << 20)
static struct { Py_ssize_t len; int n; PyObject *items[FP_DEPTH]; } fpool[FP_LENS];
static Py_ssize_t fpool_bytes; /* (what the pool keeps, at most FP_BUDGET: a run's frames in flight
                                * rise and fall by thousands -- 128 of a length kept a fifth of them) */
static unsigned long long n_reused; /* (counts()) */
static int fp_hint_dg, fp_hint_fr; /* (the place of the length a kind last kept or took, looked at first:
                                    * a run's datagrams (take's, forget's) mostly of one length, its frames
                                    * (records') of another; a length is in one place only, so the place the
                                    * loop finds) */

/* keep ``b`` (a reference the caller gives up: exact bytes held by nobody else) for use again, or let
 * it go; ``hint``: its kind's place (fp_hint_dg or fp_hint_fr) */
static inline __attribute__((always_inline)) void fpool_put(PyObject *b, int *hint)
{
    Py_ssize_t len = PyBytes_GET_SIZE(b);
    if (len >= FP_MIN && len <= FP_MAX && Py_REFCNT(b) == 1 && fpool_bytes + len <= FP_BUDGET) {
        int h = *hint;
        if (fpool[h].len == len && fpool[h].n < FP_DEPTH) {
            fpool[h].items[fpool[h].n++] = b;
            fpool_bytes += len;
            return;
        }
        int empty = -1;
        for (int k = 0; k < FP_LENS; k++) {
            if (fpool[k].len == len) {
                if (fpool[k].n < FP_DEPTH) {
                    *hint = k;
                    fpool[k].items[fpool[k].n++] = b;
                    fpool_bytes += len;
                    return;
                }
                empty = -2; /* (full: let it go) */
                break;
            }
            if (fpool[k].n == 0 && empty == -1)
                empty = k;
        }
        if (empty >= 0) {
            *hint = empty;
            fpool[empty].len = len;
            fpool[empty].items[0] = b;
            fpool[empty].n = 1;
            fpool_bytes += len;
            return;
        }
    }
    Py_DECREF(b);
}

/* a bytes object of ``len`` bytes for the caller to fill (nobody else holds it): a kept buffer of
 * that length, or a new one; ``hint`` as fpool_put's */
static inline PyObject *fpool_take(Py_ssize_t len, int *hint)
{
    if (len >= FP_MIN && len <= FP_MAX) {
        int h = *hint;
        if (fpool[h].len != len) /* (else its one place: the loop would find no other) */
            for (h = 0; h < FP_LENS && fpool[h].len != len; h++)
                ;
        if (h < FP_LENS && fpool[h].n > 0) {
            PyObject *b = fpool[h].items[--fpool[h].n];
            *hint = h;
            fpool_bytes -= len;
            bytes_hash_stale(b); /* (its hash, were it cached, is another frame's) */
            n_reused++;
            return b;
        }
    }
    return PyBytes_FromStringAndSize(NULL, len);
}

/* bytes(src[:len]): a kept buffer of that length written over, or a new one */
static PyObject *frame_bytes(const char *src, Py_ssize_t len)
{
    PyObject *b = fpool_take(len, &fp_hint_fr);
    if (b != NULL)
        memcpy(PyBytes_AS_STRING(b), src, (size_t)len);
    return b;
}

/* -- retained entries used again: an entry let go that nobody else holds (and the collector does
 * not track) is kept, emptied, for take's next (sk_retained_entry), instead of a tuple freed and
 * another made for every crossing */
#define RT_KEEP 1024
static PyObject *rt_kept[RT_KEEP]; /* (4-tuples, seen by nobody: their window and sequence ints kept, their
                                    * group NULL -- or, kept by retained_release, the datagram they held,
                                    * not looked at until the entry is made again: rt_take_dg) */
static int rt_n;
static PyObject *rt_later[3 * RT_KEEP]; /* (groups found in kept entries that are not bytes, sequence numbers
                                         * that are not ints: let go at the next forget, where letting go runs
                                         * no code that sees a datagram half made -- at most three of each kept
                                         * entry made again, at most RT_KEEP of those between two forgets) */
static int rt_later_n;

/* the group the entry take makes next (rt_kept's last) held when it was kept, out of it (its slot
 * NULL): that datagram itself when it has ``len`` bytes and nobody else holds it -- the buffer
 * take writes next, read here just before it is written, not when it was let go (forget_ports:
 * windows after it was last touched, its header then the one line forget read that nothing else
 * did) --, else NULL (it into the pool, or let go). */
static inline PyObject *rt_take_dg(Py_ssize_t len)
{
    if (rt_n == 0)
        return NULL;
    PyObject *t = rt_kept[rt_n - 1], *g = PyTuple_GET_ITEM(t, 3);
    if (g == NULL)
        return NULL;
    PyTuple_SET_ITEM(t, 3, NULL);
    if (PyBytes_CheckExact(g)) {
        if (Py_REFCNT(g) == 1 && PyBytes_GET_SIZE(g) == len) {
            bytes_hash_stale(g); /* (its hash, were it cached, is another datagram's) */
            n_reused++;
            return g;
        }
        if (Py_REFCNT(g) == 1)
            fpool_put(g, &fp_hint_dg); /* (or freed: a bytes object runs no code) */
        else
            Py_DECREF(g); /* (held elsewhere too: only counted down) */
    }
    else
        rt_later[rt_later_n++] = g;
    return NULL;
}

/* what rt_take_dg put off letting go, let go (forget_ports' start) */
static void rt_later_release(void)
{
    while (rt_later_n > 0) {
        PyObject *g = rt_later[--rt_later_n];
        Py_DECREF(g);
    }
}

/* an item of an exact int (not NULL) */
static inline int fg_long(PyObject *o) { return o != NULL && PyLong_CheckExact(o); }

static void retained_keep_or_free(PyObject *x)
{
    if (rt_n < RT_KEEP && Py_REFCNT(x) == 1 && PyTuple_CheckExact(x) && PyTuple_GET_SIZE(x) == 4 &&
        !PyObject_GC_IsTracked(x)) {
        rt_kept[rt_n++] = x; /* (kept before anything is released: a release runs no code that sees it half made) */
        for (int i = 0; i < 4; i++) { /* (its window and sequence ints kept: written in place when made again) */
            PyObject *it = PyTuple_GET_ITEM(x, i);
            if (i == 3 || (it != NULL && !PyLong_CheckExact(it))) {
                PyTuple_SET_ITEM(x, i, NULL);
                Py_XDECREF(it);
            }
        }
        return;
    }
    Py_DECREF(x);
}

/* (window, first, last, datagram): ``win`` borrowed, ``dg`` a new reference (stolen; NULL: an error
 * set); a kept entry filled again -- its sequence ints written in place when nobody else holds them
 * (put_ll), each its own -- or a new tuple; not tracked by the collector (ints and bytes: no cycle
 * through it). NULL with an error. */
static PyObject *sk_retained_entry(PyObject *win, long long first, long long last, PyObject *dg)
{
    if (dg == NULL)
        return NULL;
    if (rt_n == 0) {
        PyObject *t = tuple_steal_inline(4, (PyObject *[]){Py_NewRef(win), PyLong_FromLongLong(first),
                                                           PyLong_FromLongLong(last), dg});
        if (t != NULL)
            PyObject_GC_UnTrack(t);
        return t;
    }
    if (PyTuple_GET_ITEM(rt_kept[rt_n - 1], 3) != NULL) /* (a datagram kept with it not taken by rt_take_dg) */
        Py_XDECREF(rt_take_dg(-1));
    PyObject *t = rt_kept[--rt_n];
    PyTuple_SET_ITEM(t, 3, dg); /* (NULL now) */
    for (int i = 1; i < 3; i++) { /* (its sequence ints, read now -- written below --, not when it was kept) */
        PyObject *o = PyTuple_GET_ITEM(t, i);
        if (o != NULL && !PyLong_CheckExact(o)) {
            PyTuple_SET_ITEM(t, i, NULL);
            rt_later[rt_later_n++] = o;
        }
    }
    if (PyTuple_GET_ITEM(t, 0) != win) {
        PyObject *old = PyTuple_GET_ITEM(t, 0);
        PyTuple_SET_ITEM(t, 0, Py_NewRef(win));
        Py_XDECREF(old);
    }
    if (hp_put_count(&PyTuple_GET_ITEM(t, 1), first) < 0 || hp_put_count(&PyTuple_GET_ITEM(t, 2), last) < 0) {
        Py_DECREF(t); /* (its items released: tupledealloc's Py_XDECREF) */
        return NULL;
    }
    return t;
}

/* a retained entry (window, first, last, group) let go: its datagram (take's group) or its frames
 * (a group of parts) kept for use again when nobody else holds them (the entry, its group and the
 * frame each held once: by what is let go); the entry itself kept too (retained_keep_or_free) */
static void fg_release_slow(PyObject *x)
{
    PyObject *g;
    if (Py_REFCNT(x) == 1 && PyTuple_CheckExact(x) && PyTuple_GET_SIZE(x) == 4 &&
        PyBytes_CheckExact(g = PyTuple_GET_ITEM(x, 3)) && Py_REFCNT(g) == 1) {
        PyTuple_SET_ITEM(x, 3, Py_NewRef(Py_None)); /* (the tuple's reference is now g's, given to the pool) */
        fpool_put(g, &fp_hint_dg);
    }
    else if (Py_REFCNT(x) == 1 && PyTuple_CheckExact(x) && PyTuple_GET_SIZE(x) == 4 &&
        PyList_CheckExact(g = PyTuple_GET_ITEM(x, 3)) && Py_REFCNT(g) == 1)
        for (Py_ssize_t k = 1; k < PyList_GET_SIZE(g); k += 2) {
            PyObject *f = PyList_GET_ITEM(g, k);
            if (PyBytes_CheckExact(f) && Py_REFCNT(f) == 1 && PyBytes_GET_SIZE(f) >= FP_MIN &&
                PyBytes_GET_SIZE(f) <= FP_MAX) {
                PyList_SET_ITEM(g, k, Py_NewRef(Py_None)); /* (the list's reference is now f's, given to the pool) */
                fpool_put(f, &fp_hint_fr);
            }
        }
    retained_keep_or_free(x);
}

/* fg_release_slow's steps, take's entry (the common case) at once: what they come to -- the entry
 * kept, its ints in it, its datagram into the pool (a bytes object let go runs no code) */
static inline __attribute__((always_inline)) void retained_release(PyObject *x)
{
    if (Py_REFCNT(x) == 1 && PyTuple_CheckExact(x) && PyTuple_GET_SIZE(x) == 4 && rt_n < RT_KEEP &&
        PyTuple_GET_ITEM(x, 3) != NULL && fg_long(PyTuple_GET_ITEM(x, 0)) && !PyObject_GC_IsTracked(x)) {
        rt_kept[rt_n++] = x; /* (its datagram and sequence numbers in it, unread: rt_take_dg, sk_retained_entry) */
        return;
    }
    fg_release_slow(x);
}

/* -- what a link forgets: its retained datagrams, into the pool */

/* a retained entry's window (its first item, an int): 1, or 0 with an error set */
static inline int fg_entry_window(PyObject *head, long long *w)
{
    if (PyTuple_Check(head) && PyTuple_GET_SIZE(head) >= 1 && get_ll(PyTuple_GET_ITEM(head, 0), w))
        return 1;
    if (!PyErr_Occurred())
        PyErr_SetString(PyExc_TypeError, "emu._core.forget: a retained entry is not (window, ...)");
    return 0;
}

/* Element.forget: every output port's retained datagrams of windows <= ``upto`` are dropped (every
 * receiver has them). ``ports``: the element's output ports (a list). 0, or -1 with an error */
static int forget_ports(PyObject *ports, long long upto)
{
    rt_later_release();
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(ports); k++) {
        PyObject *p = PyList_GET_ITEM(ports, k), *link, *r;
        if (Py_TYPE(p) != OutPortT || (link = SLOT(p, o_link)) == NULL || Py_TYPE(link) != SenderT ||
            (r = SLOT(link, ls_retained)) == NULL) {
            PyErr_SetString(PyExc_TypeError, "emu._core.forget: not an output port with a link sender");
            return -1;
        }
        if (PyList_CheckExact(r)) { /* (LinkSender's: a list, its head cut at once, at most FG_MAX a time) */
            enum { FG_MAX = 16 };
            if (PyList_GET_SIZE(r) == 0)
                continue; /* (nothing retained: the common port of a window two back) */
            Py_INCREF(r);
            for (;;) {
                PyObject *xs[FG_MAX], **items = ((PyListObject *)r)->ob_item;
                Py_ssize_t n = 0, len = PyList_GET_SIZE(r), lim = len < FG_MAX ? len : FG_MAX;
                while (n < lim) {
                    long long w;
                    if (!fg_entry_window(items[n], &w)) {
                        Py_DECREF(r);
                        return -1;
                    }
                    if (w > upto)
                        break;
                    n++;
                }
                if (n == 0)
                    break;
                /* (the head cut in place: the list's references to it become ours; a few moved
                 * by hand, not by a call) */
                for (Py_ssize_t j = 0; j < n; j++)
                    xs[j] = items[j];
                if (len - n > FG_MAX)
                    memmove(items, items + n, (size_t)(len - n) * sizeof(PyObject *));
                else
                    for (Py_ssize_t j = n; j < len; j++)
                        items[j - n] = items[j];
                Py_SET_SIZE(r, len - n);
                for (Py_ssize_t j = 0; j < n; j++) /* (each now held here alone: its frames kept for use again) */
                    retained_release(xs[j]);
                if (n < FG_MAX)
                    break;
            }
            Py_DECREF(r);
            continue;
        }
        Py_INCREF(r);
        for (; !PyList_CheckExact(r);) {
            Py_ssize_t len = PySequence_Size(r);
            if (len <= 0) {
                if (len < 0) {
                    Py_DECREF(r);
                    return -1;
                }
                break;
            }
            PyObject *head = PySequence_GetItem(r, 0);
            long long w;
            int ok = head != NULL && fg_entry_window(head, &w);
            Py_XDECREF(head);
            if (!ok) {
                Py_DECREF(r);
                return -1;
            }
            if (w > upto)
                break;
            PyObject *x = q_popleft(r);
            if (x == NULL) {
                Py_DECREF(r);
                return -1;
            }
            retained_release(x);
        }
        Py_DECREF(r);
    }
    return 0;
}

static PyObject *forget(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    long long upto;
    if (nargs != 2 || !PyList_CheckExact(args[0]) || !get_ll(args[1], &upto)) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "forget(ports, upto_window)");
        return NULL;
    }
    if (forget_ports(args[0], upto) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* the retained entries at the heads of ``els``' output ports' lists -- each a tuple forget_ports
 * reads (its window) and keeps, written windows ago and mostly out of the cache -- read all at once
 * (loads that wait for nothing but their own line, so that many are under way together) before
 * forget_ports reads them one after another. Only reads; nothing runs in between. */
#define FG_AHEAD 1024
static void fg_prefetch(PyObject *els)
{
    PyObject *heads[FG_AHEAD];
    int n = 0;
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(els) && n < FG_AHEAD; k++) {
        PyObject *el = PyList_GET_ITEM(els, k), *ports;
        if (Py_TYPE(el) != ElementT || (ports = SLOT(el, el_attr[E_OUT_PORTS].off)) == NULL || !PyList_CheckExact(ports))
            continue;
        for (Py_ssize_t j = 0; j < PyList_GET_SIZE(ports) && n < FG_AHEAD; j++) {
            PyObject *p = PyList_GET_ITEM(ports, j), *link, *r;
            if (Py_TYPE(p) != OutPortT || (link = SLOT(p, o_link)) == NULL || Py_TYPE(link) != SenderT ||
                (r = SLOT(link, ls_retained)) == NULL || !PyList_CheckExact(r) || PyList_GET_SIZE(r) == 0)
                continue;
            heads[n++] = PyList_GET_ITEM(r, 0);
            if (PyList_GET_SIZE(r) > 1 && n < FG_AHEAD)
                heads[n++] = PyList_GET_ITEM(r, 1);
        }
    }
    uintptr_t acc = 0;
    for (int k = 0; k < n; k++) /* (each entry's type and collector header: the lines forget_ports reads) */
        acc += (uintptr_t)Py_TYPE(heads[k]) + (uintptr_t)((PyObject **)heads[k])[-1];
    __asm__ volatile("" : : "r"(acc)); /* (the loads kept: their values used nowhere else) */
}

/* Domain._window's ``for el in els: el.forget(upto)``: an Element's output ports here, any other
 * object's method */
static PyObject *forget_elements(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    long long upto;
    if (nargs != 2 || !PyList_CheckExact(args[0]) || !get_ll(args[1], &upto)) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "forget_elements(elements, upto_window)");
        return NULL;
    }
    PyObject *els = args[0];
    fg_prefetch(els);
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(els); k++) {
        PyObject *el = Py_NewRef(PyList_GET_ITEM(els, k)), *ports = NULL;
        int rc;
        if (Py_TYPE(el) == ElementT && (ports = SLOT(el, el_attr[E_OUT_PORTS].off)) != NULL && PyList_CheckExact(ports)) {
            Py_INCREF(ports); /* (held: what a retained queue does may run Python code) */
            rc = forget_ports(ports, upto);
            Py_DECREF(ports);
        }
        else {
            PyObject *r = PyObject_CallMethodOneArg(el, s_forget, args[1]);
            rc = r == NULL ? -1 : 0;
            Py_XDECREF(r);
        }
        Py_DECREF(el);
        if (rc < 0)
            return NULL;
    }
    Py_RETURN_NONE;
}

#endif /* EMU_CSRC_FPOOL_H */
