/* emu/csrc/iq.h: the input-queued router's allocation round, the twin of switch/iqround.py's plain
 * case (part of emu/_core.c, one translation unit).
 *
 *   iq_round(st, consts, fresh, now, again, up, credit_out) -> list of (output, frame, depart)
 *   iq_retime(st, consts, fresh, now, granted, slot) -> the next round's time (``Rounds._retime``, ``_lost``)
 *
 * does what ``InputQueuedEngine.on_timer``'s round does once ``self.active`` is not empty:
 * ``_rc_done``, ``_va_round`` (``_va_output``), ``_sa_round`` with the separable allocator
 * (``Allocators._separable``), ``_grant``, ``_pop`` and ``_credit_left``, on the engine's own lists
 * and dicts (``Rounds._core_state`` lays them out), in the same order, moving the same pointers and
 * counters. Python decides when it may (``Rounds._core_plain``): round robin, no high-priority
 * ports, no shared pools; anything else never reaches this code. A high-priority copy or a busy
 * output met here anyway is refused with an error (the guard was wrong), never allocated otherwise.
 */
#ifndef EMU_CSRC_IQ_H
#define EMU_CSRC_IQ_H

static PyTypeObject *CopyT, *PacketT;
static int iqtimer_setup(PyObject *cls); /* (csrc/iqtimer.h) */
static Py_ssize_t c_pkt, c_out, c_frame, c_group, c_ovc, c_need, c_sa_at, c_granted, c_prio, c_n, c_ser, c_lag,
    c_rank, c_vpart, c_va_try, c_sa_try;
static Py_ssize_t p_cost;
static Py_ssize_t p_port, p_vc, p_head, p_tail, p_copies, p_left, p_exit, p_hexit, p_rc_at, p_vpart, p_ppart;
static PyObject *s_va_grants, *s_sa_grants, *s_sa_conflicts;
static int iq_ready = 0;
static PyObject *iq_zero;

static PyObject *iq_setup(PyObject *self, PyObject *args)
{
    PyObject *copy, *packet, *engine;
    if (!PyArg_ParseTuple(args, "O!O!O!", &PyType_Type, &copy, &PyType_Type, &packet, &PyType_Type, &engine))
        return NULL;
    struct { const char *n; Py_ssize_t *o; } cs[] = {
        {"pkt", &c_pkt}, {"out", &c_out}, {"frame", &c_frame}, {"group", &c_group}, {"ovc", &c_ovc},
        {"need", &c_need}, {"sa_at", &c_sa_at}, {"granted", &c_granted}, {"prio", &c_prio}, {"n", &c_n},
        {"ser", &c_ser}, {"lag", &c_lag}, {"rank", &c_rank}, {"vpart", &c_vpart}, {"va_try", &c_va_try},
        {"sa_try", &c_sa_try}};
    struct { const char *n; Py_ssize_t *o; } ps[] = {
        {"port", &p_port}, {"vc", &p_vc}, {"head", &p_head}, {"tail", &p_tail}, {"copies", &p_copies},
        {"left", &p_left}, {"exit", &p_exit}, {"hexit", &p_hexit}, {"rc_at", &p_rc_at}, {"vpart", &p_vpart},
        {"ppart", &p_ppart}, {"cost", &p_cost}};
    for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++)
        if (slot_offset((PyTypeObject *)copy, cs[k].n, cs[k].o) < 0)
            return NULL;
    for (size_t k = 0; k < sizeof ps / sizeof ps[0]; k++)
        if (slot_offset((PyTypeObject *)packet, ps[k].n, ps[k].o) < 0)
            return NULL;
    if (s_va_grants == NULL) {
        iq_zero = PyLong_FromLong(0);
        iq_inf = PyLong_FromLongLong((long long)1 << 62);
        s_va_grants = PyUnicode_InternFromString("va_grants");
        s_sa_grants = PyUnicode_InternFromString("sa_grants");
        s_sa_conflicts = PyUnicode_InternFromString("sa_conflicts");
        if (!iq_zero || !iq_inf || !s_va_grants || !s_sa_grants || !s_sa_conflicts)
            return NULL;
    }
    if (iqtimer_setup(engine) < 0) /* (csrc/iqtimer.h) */
        return NULL;
    Py_XSETREF(CopyT, (PyTypeObject *)Py_NewRef(copy));
    Py_XSETREF(PacketT, (PyTypeObject *)Py_NewRef(packet));
    iq_ready = 1;
    Py_RETURN_NONE;
}

/* the round's state and settings, read once per call */
enum { IS_ACTIVE, IS_RCQ, IS_Q, IS_VA, IS_CHK, IS_SA, IS_HOLD, IS_FREE, IS_ALLOWED, IS_VAPTR, IS_CREDITS, IS_POOLS, IS_CAPS,
       IS_FRAMES, IS_WAITVC, IS_WAITN, IS_WAITB, IS_INR, IS_OUTR, IS_INPTR, IS_OUTPTR, IS_REL, IS_LINE, IS_OCC, IS_BPOOL,
       IS_TAILW, IS_STATS, IS_PRIOPORTS, IS_CUTTABLE, IS_N };
enum { IK_RK, IK_VMAX, IK_V1, IK_N, IK_RS, IK_OUT, IK_VCF, IK_VS, IK_NPORTS, IK_V, IK_FB, IK_VA, IK_SA, IK_ST, IK_RC, IK_VCT,
       IK_VCRULE, IK_CRULE, IK_CDELAY, IK_INPOOL, IK_SEL, IK_VCOFF, IK_FLAGSOFF, IK_FLAGPOOL, IK_INF, IK_PTYPEOFF, IK_QPKT, IK_PRIOOFF, IK_COUNT };

typedef struct {
    PyObject **s; /* (the state tuple's own items: the caller holds the tuple for the call) */
    const long long *k; /* (kbuf, or an entry nothing refills during the call: csrc/iqtimer.h's t_tc) */
    long long kbuf[IK_COUNT];
    PyObject *fresh, *up, *credit_out;
    long long now;
    long long va_grants, sa_grants, sa_conflicts;
    int shared_empty; /* (1: the caller only reads the size of the frames list returned -- csrc/iqtimer.h's
                       * iq_on_timer, for csrc/window.h -- so an empty one may be iq_empty_list's) */
} IQ;

static int iq_bad(const char *what)
{
    if (!PyErr_Occurred())
        PyErr_Format(PyExc_TypeError, "emu._core.iq_round: %s", what);
    return -1;
}

#define IRD(o, off, var)                                                                                       \
    do {                                                                                                       \
        if (!get_ll(SLOT(o, off), &(var))) {                                                                   \
            iq_bad("a copy's or packet's field is not an integer");                                           \
            goto fail;                                                                                         \
        }                                                                                                      \
    } while (0)
#define IWR(o, off, v)                                                                                         \
    do {                                                                                                       \
        if (iqr_set_ll(o, off, v) < 0)                                                                             \
            goto fail;                                                                                         \
    } while (0)

/* list[i] as an int (an error when it is not one) */
static inline __attribute__((always_inline)) int li(PyObject *l, Py_ssize_t i, long long *v)
{
    if (!PyList_CheckExact(l) || i < 0 || i >= PyList_GET_SIZE(l))
        return iq_bad("an index outside a list");
    if (!get_ll(PyList_GET_ITEM(l, i), v))
        return iq_bad("a list item is not an integer");
    return 0;
}

static inline __attribute__((always_inline)) int lset(PyObject *l, Py_ssize_t i, long long v)
{
    if (!PyList_CheckExact(l) || i < 0 || i >= PyList_GET_SIZE(l))
        return iq_bad("an index outside a list");
    return iqr_put_ll(&((PyListObject *)l)->ob_item[i], v);
}

/* PyList_GetItem(l, i), inlined: borrowed, NULL with its errors (not a list, an index outside it) */
static inline __attribute__((always_inline)) PyObject *lget(PyObject *l, Py_ssize_t i)
{
    if (!PyList_Check(l)) {
        PyErr_BadInternalCall();
        return NULL;
    }
    if ((size_t)i >= (size_t)PyList_GET_SIZE(l)) {
        PyErr_SetString(PyExc_IndexError, "list index out of range");
        return NULL;
    }
    return PyList_GET_ITEM(l, i);
}

static inline long long pymod(long long a, long long m) /* Python's a % m, m > 0 */
{
    long long r = a % m;
    return r < 0 ? r + m : r;
}

static inline long long pyfloordiv(long long a, long long m)
{
    long long q = a / m;
    return (a % m != 0 && ((a < 0) != (m < 0))) ? q - 1 : q;
}

/* (a, b): a new tuple of two ints */
static inline PyObject *pair_ll(long long a, long long b)
{
    return tuple_steal(2, (PyObject *[]){PyLong_FromLongLong(a), PyLong_FromLongLong(b)});
}

/* wait_vc's values (copies, bytes): written in place when the dict's is the tuple's only reference
 * (nobody can tell it from the new tuple Python's ``wait_vc[key] = (n, b)`` stores), and the pairs a
 * grant deletes from it with nobody else holding them kept for the next VC allocation's new entry,
 * instead of a tuple and two ints freed and made again per copy. Their ints are their own (own_int:
 * not the small-int cache's), so that the next count writes them in place too. */
#define IQ_PFREE 64
static PyObject *iq_pairfree[IQ_PFREE];
static int iq_npairfree;

/* can count_in_place write v into o (its conditions, nothing written) */
static inline int count_fits(PyObject *o, long long v)
{
#if PY_VERSION_HEX < 0x030C0000
    if (Py_REFCNT(o) != 1 || !PyLong_CheckExact(o) || v <= 0)
        return 0;
    Py_ssize_t sz = Py_SIZE(o);
    return (sz == 1 && !(v >> PyLong_SHIFT)) || (sz == 2 && (v >> PyLong_SHIFT) && !(v >> (2 * PyLong_SHIFT)));
#else
    (void)o;
    (void)v;
    return 0;
#endif
}

/* the pair t = (a, b) in place when nobody but its holder (one reference: the dict's, or the pool's)
 * can see it: 1 done, 0 not (t untouched), -1 an error (t untouched) */
static int pair_in_place(PyObject *t, long long a, long long b)
{
    if (!PyTuple_CheckExact(t) || Py_REFCNT(t) != 1 || PyTuple_GET_SIZE(t) != 2)
        return 0;
    long long v[2] = {a, b};
    PyObject *nv[2] = {NULL, NULL}, **it = ((PyTupleObject *)t)->ob_item;
    for (int i = 0; i < 2; i++)
        if (!count_fits(it[i], v[i]) && (nv[i] = own_int(v[i])) == NULL) {
            Py_XDECREF(nv[0]);
            return -1;
        }
    for (int i = 0; i < 2; i++)
        if (nv[i] != NULL)
            Py_SETREF(it[i], nv[i]);
        else
            count_in_place(it[i], v[i]);
    return 1;
}

/* a new pair (a, b): a kept one (pair_keep's) written in place, else a new tuple of ints of its own */
static PyObject *pair_new(long long a, long long b)
{
    while (iq_npairfree) {
        PyObject *t = iq_pairfree[--iq_npairfree];
        int r = pair_in_place(t, a, b);
        if (r > 0)
            return t;
        Py_DECREF(t);
        if (r < 0)
            return NULL;
    }
    return tuple_steal(2, (PyObject *[]){own_int(a), own_int(b)});
}

/* the caller's reference to a pair taken out of wait_vc: kept for pair_new when it is the last one */
static inline void pair_keep(PyObject *t)
{
    if (Py_REFCNT(t) == 1 && PyTuple_CheckExact(t) && PyTuple_GET_SIZE(t) == 2 && iq_npairfree < IQ_PFREE)
        iq_pairfree[iq_npairfree++] = t;
    else
        Py_DECREF(t);
}

/* the key (o, w) of wait_vc and _tail_wait: a new reference, from a cache for small o and w (a tuple
 * of two ints never changes; bounded: 256 outputs x 64 VCs), its hash in *h (kept with it: the
 * dicts' operations then take it known, without hashing the tuple again) */
static PyObject *ow_keys[256][64];
static Py_hash_t ow_hash[256][64];
static PyObject *ow_key(long long o, long long w, Py_hash_t *h)
{
    if (o < 0 || o >= 256 || w < 0 || w >= 64) {
        PyObject *k = pair_ll(o, w);
        if (k != NULL && (*h = PyObject_Hash(k)) == -1)
            Py_CLEAR(k);
        return k;
    }
    PyObject **k = &ow_keys[o][w];
    if (*k == NULL) {
        PyObject *t = pair_ll(o, w);
        Py_hash_t th = t == NULL ? -1 : PyObject_Hash(t);
        if (th == -1) {
            Py_XDECREF(t);
            return NULL;
        }
        ow_hash[o][w] = th;
        *k = t;
    }
    *h = ow_hash[o][w];
    return Py_NewRef(*k);
}

static inline void copy_drop(PyObject *c);

/* [start, done, n, cut, c, []]: a line's entry (Py_BuildValue's "[LLLOO[]]", without its format) */
static PyObject *line_entry(long long start, long long done, long long n, PyObject *cut, PyObject *c)
{
    PyObject *items[6] = {int_new(start), int_new(done), int_new(n),
                          Py_NewRef(cut), Py_NewRef(c), PyList_New(0)}, *l = NULL;
    for (int k = 0; k < 6; k++)
        if (items[k] == NULL)
            goto fail;
    if ((l = PyList_New(6)) == NULL)
        goto fail;
    for (int k = 0; k < 6; k++)
        PyList_SET_ITEM(l, k, items[k]);
    return l;
fail:
    for (int k = 0; k < 6; k++)
        Py_XDECREF(items[k]);
    return NULL;
}

/* lines[o] = [start, done, n, cut, c, []] written into the entry there when nobody else holds it (the
 * line's list its only reference: an entry of the same six items, its own empty list kept when it is
 * still empty and unshared), the old items released once the new are in: 1 done, 0 not (a new
 * entry: line_entry), -1 error */
static int line_reuse(PyObject *lines, long long o, long long start, long long done, long long n, PyObject *cut,
                      PyObject *c)
{
    if (!PyList_CheckExact(lines) || o < 0 || o >= PyList_GET_SIZE(lines))
        return 0;
    PyObject *e = PyList_GET_ITEM(lines, o);
    if (!PyList_CheckExact(e) || Py_REFCNT(e) != 1 || PyList_GET_SIZE(e) != 6)
        return 0;
    PyObject **it = ((PyListObject *)e)->ob_item, *old[6] = {NULL, NULL, NULL, NULL, NULL, NULL};
    long long v[3] = {start, done, n};
    for (int k = 0; k < 3; k++)
        if (!int_in_place(it[k], v[k])) {
            PyObject *x = int_new(v[k]);
            if (x == NULL)
                goto fail;
            old[k] = it[k];
            it[k] = x;
        }
    PyObject *inner = it[5];
    if (!PyList_CheckExact(inner) || Py_REFCNT(inner) != 1 || PyList_GET_SIZE(inner) != 0) {
        PyObject *x = PyList_New(0);
        if (x == NULL)
            goto fail;
        old[5] = inner;
        it[5] = x;
    }
    old[3] = it[3];
    it[3] = Py_NewRef(cut);
    old[4] = it[4];
    it[4] = Py_NewRef(c);
    for (int k = 0; k < 6; k++)
        if (k == 4 && old[4] != NULL)
            copy_drop(old[4]); /* (the line's last copy: kept for the next when that was its last reference) */
        else if (k < 3 && old[k] != NULL)
            int_drop(old[k]);
        else
            Py_XDECREF(old[k]);
    return 1;
fail:
    for (int k = 0; k < 6; k++)
        Py_XDECREF(old[k]);
    return -1;
}

/* (the heaps' int keys popped and dropped: int_drop / int_new, csrc/iqhooks.h) */

/* heapq.heappush(heap, v) for an int v */
static int push_int(PyObject *heap, long long v)
{
    PyObject *n = iw_int_new(v); /* (a kept int, or a small one) */
    if (n == NULL)
        return -1;
    int rc = heap_push(heap, n);
    Py_DECREF(n);
    return rc;
}

/* del l[i] for a list l and 0 <= i < len(l) (list_ass_slice's work without the resize) */
static inline void list_del(PyObject *l, Py_ssize_t i)
{
    PyObject **it = ((PyListObject *)l)->ob_item, *x = it[i];
    Py_ssize_t n = PyList_GET_SIZE(l);
    memmove(&it[i], &it[i + 1], (size_t)(n - i - 1) * sizeof(PyObject *));
    Py_SET_SIZE(l, n - 1);
    Py_DECREF(x);
}

/* a dict key's hash: an int's own value for the outputs' keys (0 <= o < 2**61 - 1: hash(o) == o),
 * PyObject_Hash otherwise; -1 with an error */
static inline Py_hash_t kh_of(PyObject *k)
{
    long long v;
    if (PyLong_CheckExact(k) && get_ll(k, &v) && v >= 0 && v < (long long)_PyHASH_MODULUS)
        return (Py_hash_t)v;
    return PyObject_Hash(k);
}

/* d[key] / d[key] = v / del d[key] with the key's hash taken once (kh_of) */
static inline PyObject *kd_get(PyObject *d, PyObject *key)
{
    Py_hash_t h = kh_of(key);
    return h == -1 ? NULL : _PyDict_GetItem_KnownHash(d, key, h);
}

static inline int kd_set(PyObject *d, PyObject *key, PyObject *v)
{
    Py_hash_t h = kh_of(key);
    return h == -1 ? -1 : _PyDict_SetItem_KnownHash(d, key, v, h);
}

static inline int kd_del(PyObject *d, PyObject *key)
{
    Py_hash_t h = kh_of(key);
    return h == -1 ? -1 : _PyDict_DelItem_KnownHash(d, key, h);
}

static int dict_set_ll(PyObject *d, PyObject *key, long long v)
{
    PyObject *n = v == ((long long)1 << 62) && iq_inf != NULL ? Py_NewRef(iq_inf) : PyLong_FromLongLong(v);
    if (n == NULL)
        return -1;
    int rc = kd_set(d, key, n);
    Py_DECREF(n);
    return rc;
}

/* _va_chk[o] = v (a list per output): the shared 0 and INF, else an int written in place when the
 * list's is its only reference (iqr_put_ll) */
static int chk_set(PyObject *chk, long long o, long long v)
{
    if (!PyList_CheckExact(chk) || o < 0 || o >= PyList_GET_SIZE(chk))
        return iq_bad("an output outside _va_chk");
    PyObject **it = &((PyListObject *)chk)->ob_item[o], *shared = v == 0 ? iq_zero : v == ((long long)1 << 62) ? iq_inf : NULL;
    if (shared == NULL)
        return iqr_put_ll(it, v);
    if (*it != shared)
        Py_SETREF(*it, Py_NewRef(shared));
    return 0;
}

/* d[key] += n for the router's counters (iq_stats, a switch's stats: dict_add's work, the same values
 * in the dict) without a lookup per count: per (dict, key), the value object last seen there, kept
 * while the dict's version tag is unchanged (CPython 3.11: every change of any dict takes a new number
 * from one global counter, so an equal tag is that dict unchanged, still holding that object), and
 * written in place while the dict's is its only reference. A count the small-int cache would share
 * (<= 256) gets an int object of its own (equal, not identical: nothing reads a count by identity), so
 * that it too is written in place from then on. A later CPython: dict_add. */
#if PY_VERSION_HEX < 0x030C0000
#define IQR_CC 4096 /* (a power of two, well above the counters of a run: an 8x8 mesh's 64 routers have about 450) */
static struct { PyObject *d, *key, *val; uint64_t ver; } iqr_cc[IQR_CC];

#endif

static int iqr_count_add(PyObject *d, PyObject *key, long long n, int missing_ok, const char *what)
{
#if PY_VERSION_HEX < 0x030C0000
    if (!PyDict_CheckExact(d))
        return dict_add(d, key, n, missing_ok, what);
    __typeof__(iqr_cc[0]) *e =
        &iqr_cc[(((uint64_t)(uintptr_t)d ^ ((uint64_t)(uintptr_t)key << 1)) * 0x9E3779B97F4A7C15ULL) >> 52]; /* (of IQR_CC: 4096) */
    uint64_t ver = ((PyDictObject *)d)->ma_version_tag;
    PyObject *old;
    if (e->d == d && e->key == key && e->ver == ver)
        old = e->val; /* (the dict unchanged: d[key] is still that object) */
    else if ((old = PyDict_GetItemWithError(d, key)) == NULL)
        return dict_add(d, key, n, missing_ok, what); /* (missing, an error: as dict_add says) */
    long long v;
    if (!PyLong_CheckExact(old) || !get_ll(old, &v)) {
        PyErr_Clear();
        return dict_add(d, key, n, missing_ok, what);
    }
    v += n;
    if (!count_in_place(old, v)) {
        PyObject *nv = own_int(v);
        int rc = nv == NULL ? -1 : PyDict_SetItem(d, key, nv);
        Py_XDECREF(nv);
        if (rc < 0)
            return -1;
        old = nv; /* (held by the dict) */
        ver = ((PyDictObject *)d)->ma_version_tag;
    }
    e->d = d, e->key = key, e->val = old, e->ver = ver;
    return 0;
#else
    return dict_add(d, key, n, missing_ok, what);
#endif
}

/* The one-copy lists of va and sa taken out of their dict with nobody else holding them, kept (emptied)
 * for the next output that needs one: no list and no item array freed and made again per copy */
#define IQ_LFREE 32
static PyObject *iq_lfree[IQ_LFREE];
static int iq_nlfree;

static inline void list_recycle(PyObject *l) /* (the caller's reference, its dict's entry gone) */
{
    if (Py_REFCNT(l) == 1 && PyList_CheckExact(l) && iq_nlfree < IQ_LFREE && ((PyListObject *)l)->allocated >= 1 &&
        ((PyListObject *)l)->allocated <= 8) {
        PyObject **it = ((PyListObject *)l)->ob_item;
        Py_ssize_t n = PyList_GET_SIZE(l);
        Py_SET_SIZE(l, 0);
        for (Py_ssize_t i = 0; i < n; i++)
            Py_DECREF(it[i]);
        iq_lfree[iq_nlfree++] = l;
        return;
    }
    Py_DECREF(l);
}

/* Copies and packets whose last reference the round drops, kept for iq_receive's next copy and
 * packet (every slot written there again) instead of freed and made anew: a Copy (exactly, no
 * subclass) held by the caller's reference only, its frame and packet let go, and its packet too
 * when that copy held the only reference to it. Slotted objects without __weakref__ or __dict__:
 * nobody else can see them. */
#define IQ_OFREE 64
static PyObject *iq_cfree[IQ_OFREE], *iq_pfree[IQ_OFREE];
static int iq_ncfree, iq_npfree;

static inline void pkt_drop(PyObject *pkt) /* (the caller's reference) */
{
    if (Py_REFCNT(pkt) == 1 && Py_TYPE(pkt) == PacketT && iq_npfree < IQ_OFREE) {
        iq_pfree[iq_npfree++] = pkt;
        return;
    }
    Py_DECREF(pkt);
}

static inline void copy_drop(PyObject *c) /* (the caller's reference) */
{
    if (Py_REFCNT(c) == 1 && Py_TYPE(c) == CopyT && iq_ncfree < IQ_OFREE) {
        PyObject *pkt = SLOT(c, c_pkt);
        SLOT(c, c_pkt) = NULL;
        Py_CLEAR(SLOT(c, c_frame));
        iq_cfree[iq_ncfree++] = c;
        if (pkt != NULL)
            pkt_drop(pkt);
        return;
    }
    Py_DECREF(c);
}

/* pkt.copies = []: its list emptied in place when nobody else holds it (its copies let go through
 * copy_drop; the caller holds pkt), else a new list. 0, or -1 with an error. */
static int copies_clear(PyObject *pkt)
{
    PyObject *l = SLOT(pkt, p_copies);
    if (l != NULL && PyList_CheckExact(l) && Py_REFCNT(l) == 1) {
        Py_ssize_t n = PyList_GET_SIZE(l);
        PyObject **it = ((PyListObject *)l)->ob_item;
        Py_SET_SIZE(l, 0);
        for (Py_ssize_t i = 0; i < n; i++)
            copy_drop(it[i]);
        return 0;
    }
    PyObject *e = PyList_New(0);
    if (e == NULL)
        return -1;
    Py_XSETREF(SLOT(pkt, p_copies), e);
    return 0;
}

/* a kept object of type ``t`` (a new reference: its slots as they were) or a new one (slots unset) */
static inline PyObject *obj_reuse(PyTypeObject *t, PyObject **free, int *nfree)
{
    while (*nfree) {
        PyObject *o = free[--*nfree];
        if (Py_TYPE(o) == t && Py_REFCNT(o) == 1)
            return o;
        Py_DECREF(o); /* (kept under a type set up before, or found since -- gc.get_objects(): not made again) */
    }
    return t->tp_alloc(t, 0);
}

/* a dict's list value: append c, the list made when missing */
static int dict_append(PyObject *d, PyObject *key, PyObject *c)
{
    PyObject *r = kd_get(d, key);
    if (r == NULL) {
        if (PyErr_Occurred())
            return -1;
        PyObject *l = NULL;
        while (l == NULL && iq_nlfree) { /* (a kept list Python found since -- gc.get_objects() -- is let go: held,
                                           or changed and let go again) */
            l = iq_lfree[--iq_nlfree];
            if (Py_REFCNT(l) != 1 || PyList_GET_SIZE(l) != 0 || ((PyListObject *)l)->allocated < 1) {
                Py_DECREF(l);
                l = NULL;
            }
        }
        if (l == NULL && (l = PyList_New(1)) == NULL)
            return -1;
        PyList_SET_ITEM(l, 0, Py_NewRef(c));
        Py_SET_SIZE(l, 1);
        int rc = kd_set(d, key, l);
        Py_DECREF(l);
        return rc;
    }
    if (!PyList_CheckExact(r))
        return iq_bad("a dict value is not a list");
    return PyList_Append(r, c);
}

/* ``_rc_done``: heads whose route computation is over by now ask for a VC */
static int iq_rc_done(IQ *z)
{
    PyObject *q = z->s[IS_RCQ], *va = z->s[IS_VA], *chk = z->s[IS_CHK], *bufs = z->s[IS_Q];
    long long K = z->k[IK_RK], vm = z->k[IK_VMAX], due = (z->now + 1) * K;
    while (PyList_GET_SIZE(q)) {
        long long key;
        if (!get_ll(PyList_GET_ITEM(q, 0), &key))
            return iq_bad("a route-computation key is not an integer");
        if (key >= due)
            break;
        PyObject *top = heap_pop(q);
        if (top == NULL)
            return -1;
        int_drop(top);
        long long r = pymod(key, K), p = r / vm, v = r % vm;
        PyObject *row = lget(bufs, p);
        PyObject *qv = row == NULL ? NULL : lget(row, v);
        PyObject *pkt = qv == NULL ? NULL : PySequence_GetItem(qv, 0);
        if (pkt == NULL)
            return -1;
        if (Py_TYPE(pkt) != PacketT) {
            Py_DECREF(pkt);
            return iq_bad("a head is not a Packet");
        }
        PyObject *copies = SLOT(pkt, p_copies);
        if (copies == NULL || !PyList_CheckExact(copies)) {
            Py_DECREF(pkt);
            return iq_bad("a packet's copies are not a list");
        }
        Py_INCREF(copies);
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(copies); i++) {
            PyObject *c = PyList_GET_ITEM(copies, i);
            PyObject *o = SLOT(c, c_out);
            long long ov;
            if (Py_TYPE(c) != CopyT || o == NULL || !get_ll(o, &ov) || dict_append(va, o, c) < 0 || chk_set(chk, ov, 0) < 0) {
                Py_DECREF(copies);
                Py_DECREF(pkt);
                return iq_bad("a copy is not a Copy");
            }
        }
        Py_DECREF(copies);
        Py_DECREF(pkt);
    }
    return 0;
}

/* a stable sort of ``n`` items by ``keys`` (insertion: the lists are short) */
static void sort_by(PyObject **items, long long *keys, Py_ssize_t n)
{
    for (Py_ssize_t i = 1; i < n; i++) {
        PyObject *it = items[i];
        long long k = keys[i];
        Py_ssize_t j = i;
        while (j > 0 && keys[j - 1] > k) {
            items[j] = items[j - 1];
            keys[j] = keys[j - 1];
            j--;
        }
        items[j] = it;
        keys[j] = k;
    }
}

/* a copy's (input, VC) in the VC allocator's rotation: input * (vcs + 1) + VC */
static int iq_pv(IQ *z, PyObject *c, long long *pv, long long *port, long long *vc)
{
    PyObject *pkt = SLOT(c, c_pkt);
    if (pkt == NULL || Py_TYPE(pkt) != PacketT || !get_ll(SLOT(pkt, p_port), port) || !get_ll(SLOT(pkt, p_vc), vc))
        return iq_bad("a copy's packet is not a Packet");
    *pv = *port * z->k[IK_V1] + *vc;
    return 0;
}

/* is ``w`` in the list of ints ``l``? */
static int in_list(PyObject *l, long long w)
{
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(l); i++) {
        long long x;
        if (!get_ll(PyList_GET_ITEM(l, i), &x))
            return iq_bad("an allowed VC is not an integer");
        if (x == w)
            return 1;
    }
    return 0;
}

/* ``_va_output``: output o's VC allocator over ``reqs`` (a list, sorted in place as Python does) */
static int iq_va_output(IQ *z, long long o, PyObject *oobj, PyObject *reqs)
{
    PyObject *hold = lget(z->s[IS_HOLD], o);
    if (hold == NULL)
        return -1;
    long long now = z->now, va_at = now + z->k[IK_VA];
    Py_ssize_t nr = PyList_GET_SIZE(reqs);
    if (hold == Py_None) {
        for (Py_ssize_t i = 0; i < nr; i++) {
            PyObject *c = PyList_GET_ITEM(reqs, i);
            long long g;
            IRD(c, c_group, g);
            IWR(c, c_ovc, g);
            IWR(c, c_sa_at, va_at);
        }
        return 1;
    }
    PyObject *free_at = lget(z->s[IS_FREE], o), *allowed = lget(z->s[IS_ALLOWED], o);
    if (free_at == NULL || allowed == NULL || !PyList_CheckExact(hold) || !PyList_CheckExact(free_at) ||
        !PyList_CheckExact(allowed))
        return iq_bad("an output's VC state is not lists");
    Py_ssize_t nv = PyList_GET_SIZE(hold), nfree = 0, w1 = -1;
    for (Py_ssize_t w = 0; w < nv; w++) {
        long long f = 0;
        if (PyList_GET_ITEM(hold, w) != Py_None)
            continue;
        if (li(free_at, w, &f) < 0)
            return -1;
        if (f <= now) {
            nfree++;
            w1 = w;
        }
    }
    if (!nfree)
        return 0;
    long long V = z->k[IK_V1], N = z->k[IK_N], p0;
    if (li(z->s[IS_VAPTR], o, &p0) < 0)
        return -1;
    PyObject *one[1];
    PyObject **order = NULL;
    Py_ssize_t norder = nr;
    if (nfree == 1 && nr > 1) { /* the first in that order whose group may take it */
        PyObject *best = NULL;
        long long bk = 2 * N;
        for (Py_ssize_t i = 0; i < nr; i++) {
            PyObject *c = PyList_GET_ITEM(reqs, i);
            long long g, pv, port, vc, prio;
            IRD(c, c_group, g);
            IRD(c, c_prio, prio);
            if (prio)
                return iq_bad("a high-priority copy (the compiled round takes priority 0 only)");
            PyObject *ag = lget(allowed, g);
            if (ag == NULL || !PyList_CheckExact(ag))
                return iq_bad("allowed VCs are not a list");
            int in = in_list(ag, w1);
            if (in < 0)
                return -1;
            if (in) {
                if (iq_pv(z, c, &pv, &port, &vc) < 0)
                    return -1;
                long long k = N + pymod(pv - p0, N);
                if (k < bk) {
                    best = c;
                    bk = k;
                }
            }
        }
        if (best == NULL)
            return 0;
        one[0] = best;
        order = one;
        norder = 1;
    } else {
        if (nr > 1) { /* reqs.sort(key=(-prio, (port * V + vc - ptr) % N)): in place, stable */
            long long keys_s[32], *keys = nr <= 32 ? keys_s : PyMem_Malloc(sizeof(long long) * nr);
            if (keys == NULL) {
                PyErr_NoMemory();
                return -1;
            }
            for (Py_ssize_t i = 0; i < nr; i++) {
                long long pv, port, vc, prio;
                if (!get_ll(SLOT(PyList_GET_ITEM(reqs, i), c_prio), &prio) || prio ||
                    iq_pv(z, PyList_GET_ITEM(reqs, i), &pv, &port, &vc) < 0) {
                    if (keys != keys_s)
                        PyMem_Free(keys);
                    return iq_bad("a high-priority copy (the compiled round takes priority 0 only)");
                }
                keys[i] = pymod(pv - p0, N);
            }
            sort_by(((PyListObject *)reqs)->ob_item, keys, nr);
            if (keys != keys_s)
                PyMem_Free(keys);
        }
        order = ((PyListObject *)reqs)->ob_item;
    }
    int given = 0;
    for (Py_ssize_t i = 0; i < norder; i++) {
        PyObject *c = order[i];
        long long g, w = -1;
        IRD(c, c_group, g);
        PyObject *ag = lget(allowed, g);
        if (ag == NULL || !PyList_CheckExact(ag))
            return iq_bad("allowed VCs are not a list");
        for (Py_ssize_t j = 0; j < PyList_GET_SIZE(ag); j++) {
            long long x, f = 0;
            if (!get_ll(PyList_GET_ITEM(ag, j), &x) || x < 0 || x >= nv)
                return iq_bad("an allowed VC outside the receiver's");
            if (PyList_GET_ITEM(hold, x) == Py_None) {
                if (li(free_at, x, &f) < 0)
                    return -1;
                if (f <= now) {
                    w = x;
                    break;
                }
            }
        }
        if (w < 0)
            continue;
        Py_SETREF(((PyListObject *)hold)->ob_item[w], Py_NewRef(c));
        IWR(c, c_ovc, w);
        IWR(c, c_sa_at, va_at);
        long long cn, pv, port, vc, wn = 0, wb = 0;
        IRD(c, c_n, cn);
        Py_hash_t kh;
        PyObject *key = ow_key(o, w, &kh);
        if (key == NULL)
            return -1;
        PyObject *old = _PyDict_GetItem_KnownHash(z->s[IS_WAITVC], key, kh);
        if (old == NULL && PyErr_Occurred()) {
            Py_DECREF(key);
            return -1;
        }
        if (old != NULL && (!PyTuple_Check(old) || PyTuple_GET_SIZE(old) != 2 || !get_ll(PyTuple_GET_ITEM(old, 0), &wn) ||
                            !get_ll(PyTuple_GET_ITEM(old, 1), &wb))) {
            Py_DECREF(key);
            return iq_bad("wait_vc's value is not a pair of integers");
        }
        int rc = old == NULL ? 0 : pair_in_place(old, wn + 1, wb + cn); /* (wait_vc[key] = (n + 1, b + c.n)) */
        if (rc == 0) {
            PyObject *nvv = pair_new(wn + 1, wb + cn);
            rc = nvv == NULL ? -1 : _PyDict_SetItem_KnownHash(z->s[IS_WAITVC], key, nvv, kh);
            Py_XDECREF(nvv);
        } else if (rc > 0)
            rc = 0;
        Py_DECREF(key);
        if (rc < 0 || iq_pv(z, c, &pv, &port, &vc) < 0 || lset(z->s[IS_VAPTR], o, pymod(pv + 1, N)) < 0)
            return -1;
        z->va_grants++;
        given = 1;
        if (!--nfree)
            break;
    }
    (void)oobj;
    (void)V;
    return given;
fail:
    return -1;
}

/* ``_va_round``'s body for the output ``oobj`` (a key of va, held by the caller) and its requests
 * ``reqs`` (va[oobj], as the caller's PyDict_Next found it: borrowed) */
static int iq_va_one(IQ *z, int again, PyObject *oobj, PyObject *reqs)
{
    PyObject *va = z->s[IS_VA], *chk = z->s[IS_CHK], *sa = z->s[IS_SA];
    long long now = z->now, INF_ = z->k[IK_INF];
    {
        PyObject *ask = NULL;
        long long o, ck = 0;
        if (!get_ll(oobj, &o) || li(chk, o, &ck) < 0) {
            iq_bad("an output is not an integer");
            goto fail;
        }
        if (!PyList_CheckExact(reqs)) {
            iq_bad("requests are not a list");
            goto fail;
        }
        if (ck > now)
            return 0;
        Py_INCREF(reqs);
        if (again) { /* ask = [c for c in reqs if c.va_try != now]: made only when some but not all ask, or more
                      * than one (sorted in place by the allocator: a list of its own, as Python's) */
            Py_ssize_t nr = PyList_GET_SIZE(reqs), nask = 0;
            for (Py_ssize_t j = 0; j < nr; j++) {
                long long t;
                if (!get_ll(SLOT(PyList_GET_ITEM(reqs, j), c_va_try), &t)) {
                    iq_bad("va_try is not an integer");
                    goto fail_r;
                }
                nask += t != now;
            }
            if (!nask) {
                Py_DECREF(reqs);
                return 0;
            }
            if (nr == 1)
                ask = Py_NewRef(reqs); /* (its one copy asks: nothing to sort, the same list read) */
            else if ((ask = PyList_New(nask)) == NULL)
                goto fail_r;
            else
                for (Py_ssize_t j = 0, i = 0; j < nr; j++) {
                    PyObject *c = PyList_GET_ITEM(reqs, j);
                    long long t;
                    if (!get_ll(SLOT(c, c_va_try), &t)) {
                        iq_bad("va_try is not an integer");
                        goto fail_r;
                    }
                    if (t != now)
                        PyList_SET_ITEM(ask, i++, Py_NewRef(c));
                }
        } else {
            ask = Py_NewRef(reqs);
        }
        for (Py_ssize_t j = 0; j < PyList_GET_SIZE(ask); j++)
            if (iqr_set_ll(PyList_GET_ITEM(ask, j), c_va_try, now) < 0)
                goto fail_r;
        int given = iq_va_output(z, o, oobj, ask);
        Py_CLEAR(ask);
        if (given < 0)
            goto fail_r;
        if (given) {
            PyObject *left = NULL; /* (made at its first copy: mostly none is left) */
            for (Py_ssize_t j = 0; j < PyList_GET_SIZE(reqs); j++) {
                PyObject *c = PyList_GET_ITEM(reqs, j);
                long long ovc, sa_at;
                if (!get_ll(SLOT(c, c_ovc), &ovc) || !get_ll(SLOT(c, c_sa_at), &sa_at)) {
                    Py_XDECREF(left);
                    iq_bad("a copy's VC is not an integer");
                    goto fail_r;
                }
                if (ovc < 0) {
                    if ((left == NULL && (left = PyList_New(0)) == NULL) || PyList_Append(left, c) < 0) {
                        Py_XDECREF(left);
                        goto fail_r;
                    }
                    continue;
                }
                if (dict_append(sa, oobj, c) < 0 || (sa_at > now && PyList_Append(z->fresh, c) < 0)) {
                    Py_XDECREF(left);
                    goto fail_r;
                }
            }
            if (left == NULL) {
                int rc = kd_del(va, oobj);
                list_recycle(reqs);
                return rc;
            }
            int rc = kd_set(va, oobj, left);
            Py_DECREF(left);
            if (rc < 0)
                goto fail_r;
        }
        Py_DECREF(reqs);
        PyObject *hold = lget(z->s[IS_HOLD], o), *free_at = lget(z->s[IS_FREE], o);
        if (hold == NULL || free_at == NULL)
            goto fail;
        if (!PyList_CheckExact(hold) || !PyList_CheckExact(free_at)) {
            iq_bad("an output's VC state is not lists");
            goto fail;
        }
        long long t = INF_;
        for (Py_ssize_t w = 0; w < PyList_GET_SIZE(hold); w++) {
            long long f = 0;
            if (PyList_GET_ITEM(hold, w) != Py_None)
                continue;
            if (li(free_at, w, &f) < 0)
                goto fail;
            if (now < f && f < t)
                t = f;
        }
        return chk_set(chk, o, t);
    fail_r:
        Py_XDECREF(ask);
        Py_DECREF(reqs);
    }
fail:
    return -1;
}

/* ``_va_round``: VC allocation at the outputs with requests (``for o in list(va)``, in place: nothing
 * here adds a key to va -- a value replaced or a key deleted leaves the other entries where they are
 * -- and no Python code runs) */
static int iq_va_round(IQ *z, int again)
{
    Py_ssize_t pos = 0;
    PyObject *oobj, *reqs;
    while (iw_dict_next(z->s[IS_VA], &pos, &oobj, &reqs)) {
        Py_INCREF(oobj); /* (its entry may go; reqs is held by iq_va_one before anything changes) */
        int rc = iq_va_one(z, again, oobj, reqs);
        Py_DECREF(oobj);
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* ``_credit``: the room of a packet's part back to its sender */
static int iq_credit(IQ *z, long long port, long long vc, long long a, long long b, long long at)
{
    if (port >= z->k[IK_NPORTS] || z->credit_out == Py_None)
        return 0;
    long long f = z->k[IK_INPOOL] ? 1 : 0;
    at += z->k[IK_CDELAY];
    for (int part = 0; part < 2; part++) {
        long long n = part ? b : a;
        if (!n)
            continue;
        int c = iq_credit_out_c(z->credit_out, port, vc, n, at, part, part ? (a ? 0 : f) : f); /* (csrc/iqhooks.h) */
        if (c < 0)
            return -1;
        if (c == 0)
            continue;
        PyObject *r = PyObject_CallFunction(z->credit_out, "LLLLOL", port, vc, n, at, part ? Py_True : Py_False,
                                            part ? (a ? 0 : f) : f);
        if (r == NULL)
            return -1;
        Py_DECREF(r);
    }
    return 0;
}

/* ``_pop``: ``pkt`` leaves its buffer (its last copy granted; the input busy until ``t_next``) */
static int iq_pop(IQ *z, PyObject *pkt, long long t_next)
{
    long long port, vc, vpart, ppart;
    IRD(pkt, p_port, port);
    IRD(pkt, p_vc, vc);
    IRD(pkt, p_vpart, vpart);
    IRD(pkt, p_ppart, ppart);
    PyObject *row = lget(z->s[IS_Q], port);
    PyObject *qv = row == NULL ? NULL : lget(row, vc);
    if (qv == NULL)
        return -1;
    PyObject *r = q_popleft(qv);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    int inner = port < z->k[IK_NPORTS];
    if (inner) {
        long long x;
        PyObject *occ = lget(z->s[IS_OCC], port);
        if (occ == NULL || li(occ, vc, &x) < 0 || lset(occ, vc, x - vpart) < 0 || li(z->s[IS_BPOOL], port, &x) < 0 ||
            lset(z->s[IS_BPOOL], port, x - ppart) < 0)
            return -1;
        /* ``_credit_left`` */
        long long ex, hx;
        IRD(pkt, p_exit, ex);
        IRD(pkt, p_hexit, hx);
        long long rule = z->k[IK_CRULE];
        if (rule == 0) {
            if (iq_credit(z, port, vc, vpart, ppart, ex) < 0)
                return -1;
        } else if (rule == 1) {
            if (iq_credit(z, port, vc, vpart, ppart, hx) < 0)
                return -1;
        } else {
            long long fb = z->k[IK_FB], F = pyfloordiv(vpart, fb), span = ex - hx;
            for (long long k = 1; k < F; k++)
                if (iq_credit(z, port, vc, fb, 0, hx + pyfloordiv(span * k, F)) < 0)
                    return -1;
            if (iq_credit(z, port, vc, F ? vpart - (F - 1) * fb : vpart, ppart, ex) < 0)
                return -1;
        }
    }
    Py_ssize_t len = PySequence_Size(qv);
    if (len < 0)
        return -1;
    if (len) {
        PyObject *nxt = PySequence_GetItem(qv, 0);
        if (nxt == NULL)
            return -1;
        long long base, rc_at;
        if (Py_TYPE(nxt) != PacketT || !get_ll(SLOT(nxt, (z->k[IK_VCT] || !inner) ? p_head : p_tail), &base)) {
            Py_DECREF(nxt);
            return iq_bad("a buffer's packet is not a Packet");
        }
        rc_at = (base > t_next ? base : t_next) + (inner ? z->k[IK_RC] : 0);
        int rc = iqr_set_ll(nxt, p_rc_at, rc_at);
        Py_DECREF(nxt);
        if (rc < 0 || push_int(z->s[IS_RCQ], rc_at * z->k[IK_RK] + port * z->k[IK_VMAX] + vc) < 0)
            return -1;
    } else { /* active.remove(port * VMAX + vc) */
        PyObject *act = z->s[IS_ACTIVE];
        long long want = port * z->k[IK_VMAX] + vc, x;
        Py_ssize_t i = 0;
        for (; i < PyList_GET_SIZE(act); i++) {
            if (!get_ll(PyList_GET_ITEM(act, i), &x))
                return iq_bad("an active key is not an integer");
            if (x == want)
                break;
        }
        if (i == PyList_GET_SIZE(act)) {
            PyErr_SetString(PyExc_ValueError, "list.remove(x): x not in list");
            return -1;
        }
        list_del(act, i);
    }
    return 0;
fail:
    return -1;
}

/* ``o in prio_ports`` (its int ``oobj``): 1, 0, -1 (an error); a frozenset's answer kept per (set, o) --
 * it never changes, and the set, held here, is not freed while kept */
#define IQ_PP 1024
static struct { PyObject *s; long long o; int in; } iq_pp[IQ_PP];
static int prio_port(PyObject *s, PyObject *oobj, long long o)
{
    if (!PySet_GET_SIZE(s))
        return 0;
    if (!PyFrozenSet_CheckExact(s))
        return PySet_Contains(s, oobj);
    size_t h = (size_t)((((uint64_t)(uintptr_t)s) ^ ((uint64_t)o * 0xBF58476D1CE4E5B9ULL)) * 0x9E3779B97F4A7C15ULL >> 54); /* (of IQ_PP: 1024) */
    if (iq_pp[h].s == s && iq_pp[h].o == o)
        return iq_pp[h].in;
    int r = PySet_Contains(s, oobj);
    if (r < 0)
        return r;
    Py_XSETREF(iq_pp[h].s, Py_NewRef(s));
    iq_pp[h].o = o;
    iq_pp[h].in = r;
    return r;
}

/* ``_grant``: ``c`` won switch allocation at now; (output, frame, depart) */
static PyObject *iq_grant(IQ *z, PyObject *c)
{
    long long now = z->now, o, n, ser, lag, tail, w, port;
    PyObject *pkt = SLOT(c, c_pkt), *res = NULL;
    if (pkt == NULL || Py_TYPE(pkt) != PacketT) {
        iq_bad("a copy's packet is not a Packet");
        return NULL;
    }
    Py_INCREF(pkt);
    Py_INCREF(c);
    z->sa_grants++;
    IRD(c, c_out, o);
    IRD(c, c_n, n);
    IRD(c, c_ser, ser);
    IRD(c, c_lag, lag);
    IRD(c, c_ovc, w);
    IRD(pkt, p_tail, tail);
    IRD(pkt, p_port, port);
    long long x = 0; /* (li sets it; 0: the compiler's uninitialized-use warning) */
    if (li(z->s[IS_WAITN], o, &x) < 0 || lset(z->s[IS_WAITN], o, x - 1) < 0 || li(z->s[IS_WAITB], o, &x) < 0 ||
        lset(z->s[IS_WAITB], o, x - n) < 0)
        goto fail;
    long long st = z->k[IK_ST], depart = now + z->k[IK_SA] + st;
    if (z->k[IK_VCT] && tail - lag > depart)
        depart = tail - lag;
    long long lead = ser - z->k[IK_SA] - st, RS = z->k[IK_RS];
    if (li(z->s[IS_OUTR], o, &x) < 0)
        goto fail;
    if (x > now) {
        iq_bad("a grant into a busy output (the compiled round takes no cut-in)");
        goto fail;
    }
    long long busy = depart + lead;
    if (lset(z->s[IS_OUTR], o, busy) < 0 || push_int(z->s[IS_REL], busy * RS + z->k[IK_OUT] + o) < 0)
        goto fail;
    {
        /* o in prio_ports and cuttable(c.frame): a priority-0 QsNet packet high-priority ones may cut into */
        PyObject *cut = NULL, *fr = SLOT(c, c_frame);
        int inp = prio_port(z->s[IS_PRIOPORTS], SLOT(c, c_out), o);
        if (inp < 0)
            goto fail;
        if (inp && PyBytes_CheckExact(fr)) {
            const unsigned char *d = (const unsigned char *)PyBytes_AS_STRING(fr);
            Py_ssize_t len = PyBytes_GET_SIZE(fr);
            long long po = z->k[IK_PTYPEOFF], pr = z->k[IK_PRIOOFF];
            int yes = len > po && d[po] == z->k[IK_QPKT];
            if (yes && len <= pr) {
                PyErr_SetString(PyExc_IndexError, "index out of range");
                goto fail;
            }
            cut = Py_NewRef(yes && !d[pr] ? Py_True : Py_False);
        } else if (inp) {
            cut = PyObject_CallOneArg(z->s[IS_CUTTABLE], fr);
            if (cut == NULL)
                goto fail;
        } else
            cut = Py_NewRef(Py_False);
        int lr = line_reuse(z->s[IS_LINE], o, depart, depart + ser, n, cut, c);
        if (lr == 0) {
            PyObject *ln = line_entry(depart, depart + ser, n, cut, c);
            lr = ln == NULL || PyList_SetItem(z->s[IS_LINE], o, ln) < 0 ? -1 : 1;
        }
        Py_DECREF(cut);
        if (lr < 0)
            goto fail;
    }
    if (lset(z->s[IS_INR], port, busy) < 0 || push_int(z->s[IS_REL], busy * RS + port) < 0)
        goto fail;
    PyObject *cr = lget(z->s[IS_CREDITS], o);
    if (cr == NULL)
        goto fail;
    int pool = 0, debited = 0;
    if (cr != Py_None) {
        long long need, head, crw = 0, pl = 0;
        IRD(c, c_need, need);
        IRD(c, c_vpart, head);
        if (li(cr, w, &crw) < 0 || li(z->s[IS_POOLS], o, &pl) < 0)
            goto fail;
        pool = !(crw >= head && pl >= need - head);
        int up = 1;
        if (z->up != Py_None && (up = iq_up_c(z->up, o, depart)) < 0) /* (csrc/iqhooks.h) */
            goto fail;
        if (up == 2) {
            PyObject *r = PyObject_CallFunction(z->up, "LL", o, depart);
            if (r == NULL)
                goto fail;
            up = PyObject_IsTrue(r);
            Py_DECREF(r);
            if (up < 0)
                goto fail;
        }
        if (up) {
            debited = 1;
            if (pool) {
                if (lset(z->s[IS_POOLS], o, pl - need) < 0)
                    goto fail;
            } else if (lset(cr, w, crw - head) < 0 || lset(z->s[IS_POOLS], o, pl - (need - head)) < 0)
                goto fail;
            PyObject *cap = lget(z->s[IS_CAPS], o);
            long long pcap;
            if (cap == NULL || !PyTuple_Check(cap) || PyTuple_GET_SIZE(cap) != 2 || !get_ll(PyTuple_GET_ITEM(cap, 1), &pcap)) {
                iq_bad("a receiver's capacity is not a pair");
                goto fail;
            }
            if (pcap) {
                PyObject *fr = lget(z->s[IS_FRAMES], o);
                if (fr == NULL || li(fr, w, &x) < 0 || lset(fr, w, x + 1) < 0)
                    goto fail;
            }
        }
    }
    PyObject *hold = lget(z->s[IS_HOLD], o);
    if (hold == NULL)
        goto fail;
    if (hold != Py_None) {
        if (!PyList_CheckExact(hold) || w < 0 || w >= PyList_GET_SIZE(hold)) {
            iq_bad("a held VC outside the receiver's");
            goto fail;
        }
        Py_SETREF(((PyListObject *)hold)->ob_item[w], Py_NewRef(Py_None));
        Py_hash_t kh;
        PyObject *key = ow_key(o, w, &kh);
        if (key == NULL)
            goto fail;
        PyObject *old = _PyDict_GetItem_KnownHash(z->s[IS_WAITVC], key, kh);
        long long k, b;
        if (old == NULL || !PyTuple_Check(old) || PyTuple_GET_SIZE(old) != 2 || !get_ll(PyTuple_GET_ITEM(old, 0), &k) ||
            !get_ll(PyTuple_GET_ITEM(old, 1), &b)) {
            if (!PyErr_Occurred())
                PyErr_SetObject(PyExc_KeyError, key);
            Py_DECREF(key);
            goto fail;
        }
        int rc;
        if (k == 1) {
            Py_INCREF(old); /* (kept for the next VC allocation's entry when the dict's was its only other reference) */
            rc = _PyDict_DelItem_KnownHash(z->s[IS_WAITVC], key, kh);
            pair_keep(old);
        } else if ((rc = pair_in_place(old, k - 1, b - n)) > 0)
            rc = 0;
        else if (rc == 0) {
            PyObject *nv = pair_new(k - 1, b - n);
            rc = nv == NULL ? -1 : _PyDict_SetItem_KnownHash(z->s[IS_WAITVC], key, nv, kh);
            Py_XDECREF(nv);
        }
        long long rule = z->k[IK_VCRULE], t = 0, INF_ = z->k[IK_INF];
        if (rc == 0) {
            if (rule == 0)
                t = depart - st + lag;
            else if (rule == 2 && debited) {
                t = INF_;
                PyObject *tv = PyLong_FromLongLong(depart + ser);
                rc = tv == NULL ? -1 : _PyDict_SetItem_KnownHash(z->s[IS_TAILW], key, tv, kh);
                Py_XDECREF(tv);
            } else
                t = depart + ser;
        }
        Py_DECREF(key);
        if (rc < 0)
            goto fail;
        PyObject *fa = lget(z->s[IS_FREE], o);
        if (fa == NULL || lset(fa, w, t) < 0)
            goto fail;
        if (t < INF_) {
            long long ck = 0;
            if (push_int(z->s[IS_REL], t * RS + z->k[IK_VCF] + o * z->k[IK_VS] + w) < 0 ||
                li(z->s[IS_CHK], o, &ck) < 0 || (ck > t && chk_set(z->s[IS_CHK], o, t) < 0))
                goto fail;
        }
    }
    Py_SETREF(SLOT(c, c_granted), Py_NewRef(Py_True));
    {
        PyObject *oo = SLOT(c, c_out);
        PyObject *lst = kd_get(z->s[IS_SA], oo);
        if (lst == NULL || !PyList_CheckExact(lst)) {
            if (!PyErr_Occurred())
                PyErr_SetObject(PyExc_KeyError, oo);
            goto fail;
        }
        if (PyList_GET_SIZE(lst) == 1) {
            Py_INCREF(lst);
            int rc = kd_del(z->s[IS_SA], oo);
            list_recycle(lst);
            if (rc < 0)
                goto fail;
        } else {
            Py_ssize_t i = 0;
            while (i < PyList_GET_SIZE(lst) && PyList_GET_ITEM(lst, i) != c)
                i++;
            if (i == PyList_GET_SIZE(lst)) {
                PyErr_SetString(PyExc_ValueError, "list.remove(x): x not in list");
                goto fail;
            }
            list_del(lst, i);
        }
    }
    PyObject *frame = Py_NewRef(SLOT(c, c_frame));
    int setvc = cr != Py_None || z->k[IK_SEL], setpool = z->k[IK_INPOOL] || pool;
    long long voff = z->k[IK_VCOFF], foff = z->k[IK_FLAGSOFF], fpool = z->k[IK_FLAGPOOL];
    int remake = !PyBytes_CheckExact(frame);
    if (!remake && setvc) {
        if (PyBytes_GET_SIZE(frame) <= voff) {
            Py_DECREF(frame);
            PyErr_SetString(PyExc_IndexError, "index out of range");
            goto fail;
        }
        remake = (unsigned char)PyBytes_AS_STRING(frame)[voff] != w;
    }
    if (!remake && setpool && PyBytes_GET_SIZE(frame) > foff)
        remake = (((unsigned char)PyBytes_AS_STRING(frame)[foff] & fpool) != 0) != pool;
    if (remake) { /* (bytes(bytearray(frame)) with its bytes set: a new bytes object, written before anyone sees it) */
        PyObject *src = frame;
        if (!PyBytes_CheckExact(src)) {
            PyObject *ba = PyByteArray_FromObject(src);
            Py_DECREF(src);
            if (ba == NULL)
                goto fail;
            src = ba;
        }
        int isb = PyBytes_CheckExact(src);
        Py_ssize_t n = isb ? PyBytes_GET_SIZE(src) : PyByteArray_GET_SIZE(src);
        frame = PyBytes_FromStringAndSize(NULL, n); /* (a new object of its own, the empty one aside: written only at len > 0) */
        if (frame != NULL)
            memcpy(PyBytes_AS_STRING(frame), isb ? PyBytes_AS_STRING(src) : PyByteArray_AS_STRING(src), (size_t)n);
        Py_DECREF(src);
        if (frame == NULL)
            goto fail;
        unsigned char *d = (unsigned char *)PyBytes_AS_STRING(frame);
        Py_ssize_t len = PyBytes_GET_SIZE(frame);
        if (setvc) {
            if (len <= voff || w < 0 || w > 255) {
                Py_DECREF(frame);
                PyErr_SetString(PyExc_IndexError, "bytearray index out of range");
                goto fail;
            }
            d[voff] = (unsigned char)w;
        }
        if (setpool && len > foff)
            d[foff] = pool ? (d[foff] | fpool) : (d[foff] & ~fpool & 0xFF);
    }
    long long left, ex, hx;
    IRD(pkt, p_left, left);
    IRD(pkt, p_exit, ex);
    IRD(pkt, p_hexit, hx);
    left--;
    IWR(pkt, p_left, left);
    if (depart - st + ser > ex)
        IWR(pkt, p_exit, depart - st + ser);
    if (depart - st > hx)
        IWR(pkt, p_hexit, depart - st);
    if (left == 0) {
        if (iq_pop(z, pkt, busy) < 0) {
            Py_DECREF(frame);
            goto fail;
        }
        if (tail <= now && copies_clear(pkt) < 0) {
            Py_DECREF(frame);
            goto fail;
        }
    }
    res = hp_out_entry(iw_int_new(o), frame, depart); /* (an entry an emit kept, or a new one: csrc/heap.h) */
fail:
    Py_DECREF(c);
    Py_DECREF(pkt);
    return res;
}

typedef struct {
    PyObject *c;
    long long p, v, key2;
} Cand;

/* A round-robin arbiter's pick among c[i..j): the copy whose key (its VC, by_v, else its input port)
   comes first at or after the pointer ptr, modulo m; the earliest on a tie (switch/iqalloc.py's
   (key - ptr) % m loops). */
static Py_ssize_t rr_pick(const Cand *c, Py_ssize_t i, Py_ssize_t j, int by_v, long long ptr, long long m)
{
    Py_ssize_t b = i;
    long long best = m;
    for (Py_ssize_t x = i; x < j; x++) {
        long long k = pymod((by_v ? c[x].v : c[x].p) - ptr, m);
        if (k < best) {
            best = k;
            b = x;
        }
    }
    return b;
}

static void sort_cands(Cand *a, Py_ssize_t n) /* stable, by (p, key2) */
{
    for (Py_ssize_t i = 1; i < n; i++) {
        Cand x = a[i];
        Py_ssize_t j = i;
        while (j > 0 && (a[j - 1].p > x.p || (a[j - 1].p == x.p && a[j - 1].key2 > x.key2))) {
            a[j] = a[j - 1];
            j--;
        }
        a[j] = x;
    }
}

/* the candidates' two arrays, twice as long (their first n kept): 0, or -1 with an error (the arrays
 * as they were) */
#define IQ_CANDS 64
static int iq_cands_grow(Cand **cd, Cand **pk, Cand *cd_s, Cand *pk_s, Py_ssize_t *cap, Py_ssize_t n)
{
    Py_ssize_t m = *cap * 2;
    Cand *a = PyMem_Malloc(sizeof(Cand) * m), *b = PyMem_Malloc(sizeof(Cand) * m);
    if (a == NULL || b == NULL) {
        PyMem_Free(a);
        PyMem_Free(b);
        PyErr_NoMemory();
        return -1;
    }
    memcpy(a, *cd, sizeof(Cand) * n);
    if (*cd != cd_s)
        PyMem_Free(*cd);
    if (*pk != pk_s)
        PyMem_Free(*pk);
    *cd = a;
    *pk = b;
    *cap = m;
    return 0;
}

/* ``_sa_round`` with ``_separable``, then ``_grant`` of each grant: the list of what leaves */
static PyObject *iq_sa_round(IQ *z, int again)
{
    PyObject *sa = z->s[IS_SA], *out = NULL;
    long long now = z->now;
    Py_ssize_t cap = IQ_CANDS, n = 0, pos = 0;
    PyObject *oobj, *lst;
    Cand cd_s[IQ_CANDS], pk_s[IQ_CANDS], *cd = cd_s, *pk = pk_s; /* (on the stack; more: grown on the heap) */
    while (iw_dict_next(sa, &pos, &oobj, &lst)) {
        long long o, x, vc, rank;
        if (!get_ll(oobj, &o) || li(z->s[IS_OUTR], o, &x) < 0) {
            iq_bad("an output is not an integer");
            goto done;
        }
        if (x > now)
            continue; /* busy: only a high-priority copy may go into its packet, and there is none */
        PyObject *cr = lget(z->s[IS_CREDITS], o);
        long long pl;
        if (cr == NULL || li(z->s[IS_POOLS], o, &pl) < 0)
            goto done;
        if (!PyList_CheckExact(lst)) {
            iq_bad("an output's copies are not a list");
            goto done;
        }
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(lst); i++) {
            PyObject *c = PyList_GET_ITEM(lst, i);
            long long sa_at, sa_try, p, ovc, vpart, need;
            if (Py_TYPE(c) != CopyT) {
                iq_bad("a copy is not a Copy");
                goto done;
            }
            IRD(c, c_sa_at, sa_at);
            IRD(c, c_sa_try, sa_try);
            if (sa_at > now || (again && sa_try == now))
                continue;
            PyObject *pkt = SLOT(c, c_pkt);
            if (pkt == NULL || Py_TYPE(pkt) != PacketT) {
                iq_bad("a copy's packet is not a Packet");
                goto done;
            }
            IRD(pkt, p_port, p);
            if (li(z->s[IS_INR], p, &x) < 0)
                goto done;
            if (x > now)
                continue;
            if (cr != Py_None) {
                long long crw = 0;
                IRD(c, c_ovc, ovc);
                IRD(c, c_vpart, vpart);
                IRD(c, c_need, need);
                if (li(cr, ovc, &crw) < 0)
                    goto done;
                if ((crw < vpart || pl < need - vpart) && pl < need)
                    continue;
            }
            IRD(pkt, p_vc, vc);
            IRD(c, c_rank, rank);
            if (n == cap && iq_cands_grow(&cd, &pk, cd_s, pk_s, &cap, n) < 0)
                goto done;
            cd[n].c = c;
            cd[n].p = p;
            cd[n].v = vc;
            cd[n].key2 = vc * ((long long)1 << 31) + rank; /* (vc, rank): both small */
            n++;
        }
    }
    if (!n) { /* (no grant: an empty list, the shared one when the caller only reads its size) */
        out = z->shared_empty ? iq_empty_list() : PyList_New(0);
        goto done;
    }
    if ((out = z->shared_empty ? iw_list_take() : PyList_New(0)) == NULL) /* (the window's: a list it kept) */
        goto done;
    for (Py_ssize_t i = 0; i < n; i++)
        if (iqr_set_ll(cd[i].c, c_sa_try, now) < 0)
            goto bad;
    sort_cands(cd, n);
    /* the input stage: per input (ascending), its copy nearest after its pointer over VCs */
    long long V = z->k[IK_V], nin = z->k[IK_NPORTS] + 1;
    Py_ssize_t np = 0;
    for (Py_ssize_t i = 0; i < n;) {
        Py_ssize_t j = i;
        while (j < n && cd[j].p == cd[i].p)
            j++;
        Py_ssize_t b = i;
        if (j - i > 1) {
            long long ptr = 0;
            if (li(z->s[IS_INPTR], cd[i].p, &ptr) < 0)
                goto bad;
            b = rr_pick(cd, i, j, 1, ptr, V);
        }
        pk[np] = cd[b];
        IRD(cd[b].c, c_out, pk[np].key2); /* (by output now) */
        pk[np].p = cd[b].p;
        np++;
        i = j;
    }
    /* the output stage: per output (ascending), the input nearest after its pointer */
    for (Py_ssize_t i = 1; i < np; i++) { /* stable sort by output */
        Cand x = pk[i];
        Py_ssize_t j = i;
        while (j > 0 && pk[j - 1].key2 > x.key2) {
            pk[j] = pk[j - 1];
            j--;
        }
        pk[j] = x;
    }
    PyObject **grants = (PyObject **)cd; /* (cd no longer needed: its room holds the grants) */
    Py_ssize_t ng = 0;
    for (Py_ssize_t i = 0; i < np;) {
        Py_ssize_t j = i;
        while (j < np && pk[j].key2 == pk[i].key2)
            j++;
        Py_ssize_t b = i;
        long long o = pk[i].key2;
        if (j - i > 1) {
            long long ptr = 0;
            if (li(z->s[IS_OUTPTR], o, &ptr) < 0)
                goto bad;
            b = rr_pick(pk, i, j, 0, ptr, nin);
            z->sa_conflicts += j - i - 1;
        }
        if (lset(z->s[IS_OUTPTR], o, pymod(pk[b].p + 1, nin)) < 0 || lset(z->s[IS_INPTR], pk[b].p, pymod(pk[b].v + 1, V)) < 0)
            goto bad;
        grants[ng++] = pk[b].c;
        i = j;
    }
    for (Py_ssize_t i = 0; i < ng; i++)
        Py_INCREF(grants[i]);
    for (Py_ssize_t i = 0; i < ng; i++) {
        PyObject *g = out == NULL ? NULL : iq_grant(z, grants[i]);
        if (g == NULL || PyList_Append(out, g) < 0)
            Py_CLEAR(out);
        Py_XDECREF(g);
    }
    for (Py_ssize_t i = 0; i < ng; i++)
        copy_drop(grants[i]);
    goto done;
fail:
bad:
    Py_CLEAR(out);
done:
    if (out == NULL && !PyErr_Occurred())
        iq_bad("a copy's field is not an integer");
    if (cd != cd_s)
        PyMem_Free(cd);
    if (pk != pk_s)
        PyMem_Free(pk);
    return out;
}

/* the state, settings, fresh list and now of a call (args[0..3]): 0, or -1 with an error */
/* the settings tuple's integers, read once per tuple (a tuple never changes: kept, with a reference,
 * by its address) */
#define IQ_KC 512
static struct { PyObject *t; long long k[IK_COUNT]; long long lim; } iq_kc[IQ_KC];
/* the settings' integers in k, and in *lim the largest now a call may take (its keys' products fit) */
static int iq_consts(PyObject *ks, long long *k, long long *lim)
{
    size_t h = (size_t)(((uint64_t)(uintptr_t)ks * 0x9E3779B97F4A7C15ULL) >> 55); /* (of IQ_KC: 512) */
    h = way2(h, iq_kc[h].t, iq_kc[h ^ 1].t, ks); /* (two ways: the routers of a mesh whose tuples share an
                                                 * entry do not take it from each other) */
    if (iq_kc[h].t == ks) {
        memcpy(k, iq_kc[h].k, sizeof iq_kc[h].k);
        *lim = iq_kc[h].lim;
        return 0;
    }
    for (int i = 0; i < IK_COUNT; i++)
        if (!get_ll(PyTuple_GET_ITEM(ks, i), &k[i]))
            return iq_bad("a setting is not an integer");
    if (k[IK_V] < 1 || k[IK_N] < 1 || k[IK_VMAX] < 1 || k[IK_FB] < 1 || k[IK_RK] < 1 || k[IK_RS] < 1) {
        PyErr_SetString(PyExc_TypeError, "emu._core: the state is not laid out as Rounds._core_state lays it out");
        return -1;
    }
    *lim = LLONG_MAX / (k[IK_RK] > k[IK_RS] ? k[IK_RK] : k[IK_RS]) / 4 - 1;
    Py_XSETREF(iq_kc[h].t, Py_NewRef(ks));
    memcpy(iq_kc[h].k, k, sizeof iq_kc[h].k);
    iq_kc[h].lim = *lim;
    return 0;
}

/* the state tuples whose items' types iq_state checked (a tuple's items never change, nor can the type
 * of a list, dict or set: kept, with a reference, by its address) */
#define IQ_SC 4096
static PyObject *iq_sc[IQ_SC];

/* The state tuple's items (copied at once from the tuple's own array) and the settings (iq_consts),
 * the items' types checked (once per tuple: iq_sc) */
static int iq_state(PyObject *st, PyObject *ks, IQ *z, long long *lim)
{
    z->s = ((PyTupleObject *)st)->ob_item; /* (IS_N items: the caller checked its size) */
    z->k = z->kbuf;
    if (iq_consts(ks, z->kbuf, lim) < 0)
        return -1;
    size_t h = (size_t)(((uint64_t)(uintptr_t)st * 0x9E3779B97F4A7C15ULL) >> 52); /* (of IQ_SC: 4096) */
    if (iq_sc[h] == st)
        return 0;
    if (!PyList_CheckExact(z->s[IS_RCQ]) || !PyList_CheckExact(z->s[IS_REL]) || !PyList_CheckExact(z->s[IS_ACTIVE]) ||
        !PyDict_CheckExact(z->s[IS_VA]) || !PyList_CheckExact(z->s[IS_CHK]) || !PyDict_CheckExact(z->s[IS_SA]) ||
        !PyDict_CheckExact(z->s[IS_WAITVC]) || !PyDict_CheckExact(z->s[IS_TAILW]) || !PyDict_CheckExact(z->s[IS_STATS]) ||
        !PyAnySet_Check(z->s[IS_PRIOPORTS]) || !PyList_CheckExact(z->s[IS_LINE])) {
        PyErr_SetString(PyExc_TypeError, "emu._core: the state is not laid out as Rounds._core_state lays it out");
        return -1;
    }
    Py_XSETREF(iq_sc[h], Py_NewRef(st));
    return 0;
}

static int iq_parse(IQ *z, PyObject *const *args, Py_ssize_t nargs, Py_ssize_t want, const char *usage)
{
    if (nargs != want || !PyTuple_CheckExact(args[0]) || PyTuple_GET_SIZE(args[0]) != IS_N ||
        !PyTuple_CheckExact(args[1]) || PyTuple_GET_SIZE(args[1]) != IK_COUNT || !PyList_CheckExact(args[2]) || !iq_ready) {
        PyErr_SetString(PyExc_TypeError, usage);
        return -1;
    }
    long long lim;
    if (iq_state(args[0], args[1], z, &lim) < 0)
        return -1;
    z->fresh = args[2];
    if (!get_ll(args[3], &z->now))
        return iq_bad("now is not an integer");
    if (z->now < 0 || z->now > lim) { /* (now + 1 > LLONG_MAX / max(K, RS) / 4) */
        PyErr_SetString(PyExc_OverflowError, "emu._core: a time too large for the compiled round");
        return -1;
    }
    z->up = z->credit_out = Py_None;
    z->va_grants = z->sa_grants = z->sa_conflicts = 0;
    z->shared_empty = 0;
    return 0;
}

/* iq_round on parsed arguments (``z``: iq_parse's, its up and credit_out set; its counters written
 * into the stats here) */
static PyObject *iq_round_z(IQ *zp, int again)
{
#define z (*zp)
    z.va_grants = z.sa_grants = z.sa_conflicts = 0;
    long long K = z.k[IK_RK];
    PyObject *out = NULL;
    long long top;
    if (PyList_GET_SIZE(z.s[IS_RCQ]) && get_ll(PyList_GET_ITEM(z.s[IS_RCQ], 0), &top) && top < (z.now + 1) * K &&
        iq_rc_done(&z) < 0)
        goto end;
    if (PyDict_GET_SIZE(z.s[IS_VA]) && iq_va_round(&z, again) < 0)
        goto end;
    out = PyDict_GET_SIZE(z.s[IS_SA]) ? iq_sa_round(&z, again) : z.shared_empty ? iq_empty_list() : PyList_New(0);
end:
    if ((z.va_grants && iqr_count_add(z.s[IS_STATS], s_va_grants, z.va_grants, 1, "va_grants") < 0) ||
        (z.sa_grants && iqr_count_add(z.s[IS_STATS], s_sa_grants, z.sa_grants, 1, "sa_grants") < 0) ||
        (z.sa_conflicts && iqr_count_add(z.s[IS_STATS], s_sa_conflicts, z.sa_conflicts, 1, "sa_conflicts") < 0))
        Py_CLEAR(out);
    return out;
#undef z
}

/* ``_lost``: did a copy that could have gone at now lose the round, with credit for it? */
static int iq_lost(IQ *z)
{
    PyObject *oobj, *lst;
    Py_ssize_t pos = 0;
    long long now = z->now;
    while (iw_dict_next(z->s[IS_SA], &pos, &oobj, &lst)) {
        long long o, x, pl, cap0 = 0;
        if (!get_ll(oobj, &o) || li(z->s[IS_OUTR], o, &x) < 0 || !PyList_CheckExact(lst))
            return iq_bad("an output is not an integer");
        if (x > now)
            continue; /* (busy: no high-priority copy may cut into it here) */
        PyObject *cr = lget(z->s[IS_CREDITS], o);
        if (cr == NULL || li(z->s[IS_POOLS], o, &pl) < 0)
            return -1;
        if (cr != Py_None) {
            PyObject *cap = lget(z->s[IS_CAPS], o);
            if (cap == NULL || !PyTuple_Check(cap) || PyTuple_GET_SIZE(cap) != 2 || !get_ll(PyTuple_GET_ITEM(cap, 0), &cap0))
                return iq_bad("a receiver's capacity is not a pair");
        }
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(lst); i++) {
            PyObject *c = PyList_GET_ITEM(lst, i), *pkt;
            long long sa_at, p, ovc, need, crw = 0;
            IRD(c, c_sa_at, sa_at);
            if (sa_at > now)
                continue;
            pkt = SLOT(c, c_pkt);
            if (pkt == NULL || Py_TYPE(pkt) != PacketT)
                return iq_bad("a copy's packet is not a Packet");
            IRD(pkt, p_port, p);
            if (li(z->s[IS_INR], p, &x) < 0)
                return -1;
            if (x > now)
                continue;
            if (cr == Py_None)
                return 1;
            IRD(c, c_ovc, ovc);
            IRD(c, c_need, need);
            if (li(cr, ovc, &crw) < 0)
                return -1;
            long long head = need < cap0 ? need : cap0; /* (``pool_place``: not None) */
            if ((crw >= head && pl >= need - head) || pl >= need)
                return 1;
        }
    }
    return 0;
fail:
    return -1;
}

/* ``_retime``: the next round's time after a round at now (INF: none); ``fresh`` kept in place */
static PyObject *iq_round(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    IQ z;
    if (iq_parse(&z, args, nargs, 7, "iq_round(state, consts, fresh, now, again, up, credit_out), after iq_setup") < 0)
        return NULL;
    int again = PyObject_IsTrue(args[4]);
    if (again < 0)
        return NULL;
    z.up = args[5];
    z.credit_out = args[6];
    return iq_round_z(&z, again);
}

/* iq_retime on parsed arguments (``z``: iq_parse's) */
static PyObject *iq_retime_z(IQ *zp, int granted, long long slot)
{
#define z (*zp)
    long long now = z.now, K = z.k[IK_RK], t, top;
    PyObject *rcq = z.s[IS_RCQ];
    if (PyList_GET_SIZE(rcq)) {
        if (!get_ll(PyList_GET_ITEM(rcq, 0), &top))
            return iq_bad("a route-computation key is not an integer") < 0 ? NULL : NULL;
        if (top < (now + 1) * K && iq_rc_done(&z) < 0)
            return NULL;
    }
    if (PyList_GET_SIZE(rcq)) {
        if (!get_ll(PyList_GET_ITEM(rcq, 0), &top))
            return iq_bad("a route-computation key is not an integer") < 0 ? NULL : NULL;
        t = pyfloordiv(top, K);
    } else
        t = z.k[IK_INF];
    PyObject *fresh = z.fresh;
    Py_ssize_t nf = PyList_GET_SIZE(fresh), j = 0;
    if (nf) {
        for (Py_ssize_t i = 0; i < nf; i++) {
            PyObject *c = PyList_GET_ITEM(fresh, i), *pkt = SLOT(c, c_pkt), *gv = SLOT(c, c_granted);
            long long sa_at, prio, p, o, r;
            int g = gv == Py_True ? 1 : gv == Py_False ? 0 : PyObject_IsTrue(gv);
            if (g < 0)
                return NULL;
            IRD(c, c_sa_at, sa_at);
            if (g || sa_at <= now)
                continue;
            IRD(c, c_prio, prio);
            if (prio || pkt == NULL || Py_TYPE(pkt) != PacketT)
                return iq_bad("a high-priority copy (the compiled round takes priority 0 only)") < 0 ? NULL : NULL;
            if (j != i) { /* keep.append(c), in place */
                PyObject **items = ((PyListObject *)fresh)->ob_item;
                PyObject *old = items[j];
                items[j] = Py_NewRef(c);
                Py_DECREF(old);
            }
            j++;
            long long cand = sa_at;
            IRD(pkt, p_port, p);
            IRD(c, c_out, o);
            if (li(z.s[IS_INR], p, &r) < 0)
                return NULL;
            if (r > cand)
                cand = r;
            if (li(z.s[IS_OUTR], o, &r) < 0)
                return NULL;
            if (r > cand)
                cand = r;
            if (cand < t)
                t = cand;
        }
        if (j < nf) { /* (del fresh[j:], in place: the list's size first, then its references let go -- a
                       * copy freed here runs no Python code) */
            PyObject **items = ((PyListObject *)fresh)->ob_item;
            Py_SET_SIZE(fresh, j);
            for (Py_ssize_t i = j; i < nf; i++)
                Py_DECREF(items[i]);
        }
    }
    if (granted && now + slot < t) {
        int lost = iq_lost(&z);
        if (lost < 0)
            return NULL;
        if (lost)
            t = now + slot;
    }
    if (PyList_GET_SIZE(z.s[IS_ACTIVE])) {
        PyObject *rel = z.s[IS_REL];
        long long RS = z.k[IK_RS], OUT = z.k[IK_OUT], VCF = z.k[IK_VCF], VS = z.k[IK_VS];
        while (PyList_GET_SIZE(rel)) {
            long long key, r, sl, cur;
            if (!get_ll(PyList_GET_ITEM(rel, 0), &key))
                return iq_bad("a release key is not an integer") < 0 ? NULL : NULL;
            r = pyfloordiv(key, RS);
            sl = key - r * RS;
            if (r > now) {
                if (sl < OUT) {
                    if (li(z.s[IS_INR], sl, &cur) < 0)
                        return NULL;
                } else if (sl < VCF) {
                    if (li(z.s[IS_OUTR], sl - OUT, &cur) < 0)
                        return NULL;
                } else {
                    PyObject *fa = lget(z.s[IS_FREE], (sl - VCF) / VS);
                    if (fa == NULL || li(fa, (sl - VCF) % VS, &cur) < 0)
                        return NULL;
                }
                if (cur == r) {
                    if (r < t)
                        t = r;
                    break;
                }
            }
            PyObject *x = heap_pop(rel);
            if (x == NULL)
                return NULL;
            int_drop(x);
        }
    }
    return int_new(t);
fail:
    return NULL;
#undef z
}

static PyObject *iq_retime(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    IQ z;
    if (iq_parse(&z, args, nargs, 6, "iq_retime(state, consts, fresh, now, granted, slot), after iq_setup") < 0)
        return NULL;
    int granted = PyObject_IsTrue(args[4]);
    long long slot;
    if (granted < 0 || !get_ll(args[5], &slot))
        return iq_bad("granted, slot: a bool and an integer") < 0 ? NULL : NULL;
    return iq_retime_z(&z, granted, slot);
}

#endif /* EMU_CSRC_IQ_H */
