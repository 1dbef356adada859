/* emu/csrc/common.h: the layout read at setup, the constants, slot and int helpers (part of emu/_core.c, one translation unit) */
#ifndef EMU_CSRC_COMMON_H
#define EMU_CSRC_COMMON_H

static PyTypeObject *OutPortT, *InPortT, *LazyT, *SenderT, *ReceiverT;
static PyObject *CausalityError, *s_heap, *s_safe_time, *s_domain, *s_frames_arrived;
static Py_ssize_t i_peer_addr;
static PyObject *s_append, *s_popleft, *s_make, *s_plain, *s_with_fcs;
static PyTypeObject *DequeT; /* collections.deque: its popleft called directly (no method lookup) */
static PyObject *deque_popleft, *deque_append;

/* OutPort slots */
static Py_ssize_t o_free_at, o_pending, o_defer_fcs, o_queued, o_queued_bytes, o_up, o_timeline, o_flow,
    o_priority, o_peak_f, o_peak_b, o_busy_ns, o_tracer, o_head_bytes, o_framing, o_bps, o_latency;
static Py_ssize_t o_local, o_ctl, o_fault_rng, o_link, o_sent_done, o_tx_frames, o_tx_bytes, o_peer_addr, o_peer_domain,
    o_peer, o_line;
/* InPort slots */
static Py_ssize_t i_timeline, i_buf, i_index, i_link, i_rx_frames, i_rx_bytes, i_name;
/* LinkSender / LinkReceiver slots */
static Py_ssize_t ls_seq, ls_retained, ls_prefix, ls_prefix_pool, lr_expected;

/* frame layout and codes (given by emu.element at setup: one source of truth) */
static long C_MAGIC, C_VERSION, C_KIND_DATA, C_KIND_POOL, C_OUTER_LEN, C_MAX_DATAGRAM, C_POOL, C_CLEAN, C_NOFCS, C_FCS_RESIDUE, C_CREDIT_LEN, C_CREDIT_HI, C_CREDIT_LO, C_ET_HI, C_ET_LO, C_HDR_LEN, C_DST_OFF,
    C_PTYPE_OFF, C_FLAGS_OFF, C_HOPS_OFF, C_PRIO_OFF, C_FLAG_BCAST;
static int ready = 0;
static unsigned long long n_forwarded, n_enqueued, n_handed, n_records, n_taken, n_batched; /* what the core did (counts()) */
/* the switch's part (given by emu.switch.forward at its import: the substrate does not know it) */
static long C_MAX_HOPS;
static unsigned char decline[256]; /* packet types a plain switch does not forward by its table */
static int switch_ready = 0;
static long C_QPKT_PORT = -1; /* emu.port's _QPKT (setup's last constant) */

/* what emu/native.py expects: raise it whenever a function's arguments or results change */
#define CORE_API 22

#define SLOT(obj, off) (*(PyObject **)((char *)(obj) + (off)))

/* a new tuple of ``n`` new references (stolen; NULL if any is NULL, all released); inline, for the
 * tuples every crossing makes (a record into a heap, an output port's queued and pending entries, a
 * datagram retained, a domain's heap entry): its loops unrolled for their constant ``n`` */
static inline __attribute__((always_inline)) PyObject *tuple_steal_inline(Py_ssize_t n, PyObject **items)
{
    PyObject *t = NULL;
    for (Py_ssize_t k = 0; k < n; k++)
        if (items[k] == NULL)
            goto fail;
    if ((t = PyTuple_New(n)) == NULL)
        goto fail;
    for (Py_ssize_t k = 0; k < n; k++)
        PyTuple_SET_ITEM(t, k, items[k]);
    return t;
fail:
    for (Py_ssize_t k = 0; k < n; k++)
        Py_XDECREF(items[k]);
    return NULL;
}

/* the same, called (the other places) */
static PyObject *tuple_steal(Py_ssize_t n, PyObject **items)
{
    return tuple_steal_inline(n, items);
}

static int slot_offset(PyTypeObject *t, const char *name, Py_ssize_t *off)
{
    PyObject *d = PyObject_GetAttrString((PyObject *)t, name);
    if (d == NULL)
        return -1;
    if (!Py_IS_TYPE(d, &PyMemberDescr_Type) || ((PyMemberDescrObject *)d)->d_member->type != T_OBJECT_EX) {
        PyErr_Format(PyExc_TypeError, "%s.%s is not an object slot", t->tp_name, name);
        Py_DECREF(d);
        return -1;
    }
    *off = ((PyMemberDescrObject *)d)->d_member->offset;
    Py_DECREF(d);
    return 0;
}

static inline __attribute__((always_inline)) int get_ll(PyObject *o, long long *v)
{
    if (o == NULL || !PyLong_CheckExact(o))
        return 0;
#if PY_VERSION_HEX < 0x030C0000 /* an int of up to two digits read in place (CPython 3.11's layout) */
    const digit *d = ((PyLongObject *)o)->ob_digit;
    Py_ssize_t size = Py_SIZE(o);
    if (__builtin_expect(size == 1, 1)) { /* (one digit, tested first: most times, lengths and counts -- the
                                            * switch's jump table costs twice the instructions) */
        *v = (long long)d[0];
        return 1;
    }
    switch (size) {
    case 0:
        *v = 0;
        return 1;
    case -1:
        *v = -(long long)d[0];
        return 1;
    case 2:
        *v = (long long)d[0] | ((long long)d[1] << PyLong_SHIFT);
        return 1;
    case -2:
        *v = -((long long)d[0] | ((long long)d[1] << PyLong_SHIFT));
        return 1;
    }
#endif
    int overflow;
    *v = PyLong_AsLongLongAndOverflow(o, &overflow);
    return !overflow && !(*v == -1 && PyErr_Occurred());
}

/* A two-way table's entry for ``key`` (tables of a power of two of entries, keyed by an address: the pair h,
 * h ^ 1), given the keys held at h and h ^ 1: the one holding ``key``, else an empty one of the two, else h
 * (taken from its holder) */
static inline size_t way2(size_t h, const void *at, const void *at1, const void *key)
{
    return at != key && (at1 == key || (at != NULL && at1 == NULL)) ? h ^ 1 : h;
}

/* fw_dict_values: a dict's values for ``n`` interned keys, borrowed (NULL: not there), each key read at
 * the index in the dict's keys where it was found last (``hint``, one per key, shared by every dict read
 * with it -- a class's instances share their keys, so one hint serves them all), checked as CPython 3.11's LOAD_ATTR_WITH_HINT checks
 * it: the index within the keys' entries and the very key (the interned str) there; the value then is
 * the dict's (split: its values array's at that index, NULL absent; combined: the entry's). A key not
 * there (or no longer) is looked up plainly and its index found again. A key read as absent (NULL) is
 * known absent when the keys found account for all the dict's (ma_used): otherwise looked up plainly.
 * A write of a value (an int's new object) leaves every hint good -- a cache keyed on the dict's version
 * missed on every call after one. CPython other than 3.11 (its keys' layout mirrored here, from
 * Include/internal/pycore_dict.h): plain lookups. 0, -1 error. */
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
#define FW_DICT_HINTS 1
typedef struct {
    Py_ssize_t dk_refcnt;
    uint8_t dk_log2_size, dk_log2_index_bytes, dk_kind; /* (kind 0: general, 1 unicode, 2 split) */
    uint32_t dk_version;
    Py_ssize_t dk_usable, dk_nentries;
    char dk_indices[];
} fw_dk_t;
typedef struct { PyObject *key, *value; } fw_due_t; /* (PyDictUnicodeEntry) */
typedef struct { Py_hash_t hash; PyObject *key, *value; } fw_dge_t; /* (PyDictKeyEntry: a general kind's) */
#endif
static int fw_dict_values(Py_ssize_t *hint, PyObject *d, PyObject *const *keys, int n, PyObject **v)
{
#ifdef FW_DICT_HINTS
    PyDictObject *mp = (PyDictObject *)d;
    fw_dk_t *dk = (fw_dk_t *)mp->ma_keys;
    if (dk->dk_kind == 1 || dk->dk_kind == 2) {
        fw_due_t *e = (fw_due_t *)(dk->dk_indices + ((size_t)1 << dk->dk_log2_index_bytes));
        PyObject **vals = mp->ma_values != NULL ? (PyObject **)mp->ma_values : NULL;
        Py_ssize_t ne = dk->dk_nentries, found = 0;
        int absent = 0;
        for (int k = 0; k < n; k++) {
            Py_ssize_t ix = hint[k];
            if (ix >= 0 && ix < ne && e[ix].key == keys[k]) {
                PyObject *x = vals != NULL ? vals[ix] : e[ix].value;
                v[k] = x;
                found += x != NULL;
                absent |= x == NULL;
                continue;
            }
            v[k] = NULL, absent = 1, hint[k] = -1; /* (not where it was: looked up plainly below) */
        }
        if (!absent || found == mp->ma_used)
            return 0;
        for (int k = 0; k < n; k++)
            if (v[k] == NULL) {
                if ((v[k] = PyDict_GetItemWithError(d, keys[k])) == NULL && PyErr_Occurred())
                    return -1;
                Py_ssize_t ix = 0;
                while (ix < ne && e[ix].key != keys[k])
                    ix++;
                if (v[k] != NULL && ix < ne)
                    hint[k] = ix;
            }
        return 0;
    }
#else
    (void)hint;
#endif
    for (int k = 0; k < n; k++)
        if ((v[k] = PyDict_GetItemWithError(d, keys[k])) == NULL && PyErr_Occurred())
            return -1;
    return 0;
}

/* h2_split_values: the values of ``keys`` (at most H2_KEYS, distinct exact strs) in the dict ``d`` when it
 * is a split dict sharing the heap type ``t``'s cached keys (CPython 3.11: an instance's dict as its
 * class's __init__ made it), into v (borrowed; NULL: not there), by the indices of the keys in those
 * shared keys, found once for every instance (``c``): shared keys only grow (a key added appends an
 * entry; a dict that diverges gets keys of its own), so while they are t's cached keys with as many
 * entries the indices stand -- a key not among them is absent, no lookup (fw_dict_values needs the
 * count of all the dict's keys for that). 1 read, 0 not such a dict (v untouched: the caller's
 * other way). Other CPython: 0. */
#define H2_KEYS 16
typedef struct {
    void *keys; /* (t's cached keys as the indices were found; NULL: none) */
    PyTypeObject *t;
    Py_ssize_t nentries, ix[H2_KEYS];
} h2_split_t;
#ifdef FW_DICT_HINTS
/* (h2_split_values's: the keys' indices in the shared keys dk found again; 0 a str equal to one of them
 * but not it there, or a key not a str -- not kept) */
static int h2_split_find(h2_split_t *c, PyTypeObject *t, fw_dk_t *dk, PyObject *const *keys, int n)
{
    fw_due_t *e = (fw_due_t *)(dk->dk_indices + ((size_t)1 << dk->dk_log2_index_bytes));
    c->keys = NULL;
    for (int k = 0; k < n; k++)
        c->ix[k] = -1;
    for (Py_ssize_t i = 0; i < dk->dk_nentries; i++) {
        PyObject *ek = e[i].key;
        int mine = 0;
        for (int k = 0; k < n && !mine; k++)
            if (ek == keys[k])
                c->ix[k] = i, mine = 1;
        for (int k = 0; k < n && !mine; k++)
            if (ek == NULL || !PyUnicode_CheckExact(ek) ||
                (PyObject_Hash(ek) == PyObject_Hash(keys[k]) && PyUnicode_Compare(ek, keys[k]) == 0)) {
                PyErr_Clear();
                return 0;
            }
    }
    c->keys = dk, c->t = t, c->nentries = dk->dk_nentries;
    return 1;
}
#endif
static inline __attribute__((always_inline)) int h2_split_values(h2_split_t *c, PyTypeObject *t, PyObject *d,
                                                                 PyObject *const *keys, int n, PyObject **v)
{
#ifdef FW_DICT_HINTS
    PyDictObject *mp = (PyDictObject *)d;
    fw_dk_t *dk = (fw_dk_t *)mp->ma_keys;
    if (n > H2_KEYS || mp->ma_values == NULL || !(t->tp_flags & Py_TPFLAGS_HEAPTYPE) ||
        (void *)dk != (void *)((PyHeapTypeObject *)t)->ht_cached_keys || dk->dk_kind != 2)
        return 0;
    if ((c->keys != (void *)dk || c->t != t || c->nentries != dk->dk_nentries) && !h2_split_find(c, t, dk, keys, n))
        return 0;
    PyObject **vals = (PyObject **)mp->ma_values;
    for (int k = 0; k < n; k++)
        v[k] = c->ix[k] >= 0 ? vals[c->ix[k]] : NULL;
    return 1;
#else
    (void)c, (void)t, (void)d, (void)keys, (void)n, (void)v;
    return 0;
#endif
}

/* an instance's fields: its dict ``d``'s values for ``keys`` into v (borrowed; NULL: not there) -- a dict
 * as its class ``t``'s __init__ made it (the class's shared keys) by h2_split_values, the first
 * ``n_split`` keys (those read: the indices found once), any other dict by fw_dict_values, all ``n``
 * at the indices where they were last (``hint``: the keys after n_split asked for only so that the ones
 * found account for all of a plain instance's: a key's absence then known without a lookup). For a dict
 * written on nearly every call, where a cache keyed on its version would miss nearly always. 0, -1
 * error. */
static inline int split_or_hinted(h2_split_t *c, Py_ssize_t *hint, PyTypeObject *t, PyObject *d,
                                  PyObject *const *keys, int n_split, int n, PyObject **v)
{
    if (t != NULL && h2_split_values(c, t, d, keys, n_split, v))
        return 0;
    return fw_dict_values(hint, d, keys, n, v);
}

/* a bytes object whose contents were just written in place: its cached hash, were there one, forgotten
 * (CPython < 3.13 caches it in the object) */
static inline void bytes_hash_stale(PyObject *b)
{
#if PY_VERSION_HEX < 0x030D0000
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    ((PyBytesObject *)b)->ob_shash = -1;
#pragma GCC diagnostic pop
#else
    (void)b;
#endif
}

/* busy[p] = None (an element's ``busy``: its ports with something to send, each to None), the store left
 * out when p is there with None already: the dict's keys, their order and values as the store leaves
 * them (a dict's store of a key it holds keeps its place), for a lookup instead of a lookup and a
 * store: for a port marked again and again (hostflow.h's hf_wake, ports.h's forward and emit; where the
 * key is mostly new, as a credit's port, the lookup costs more than it saves). 0, -1 error. */
static inline int busy_mark(PyObject *busy, PyObject *p)
{
    Py_hash_t h = PyObject_Hash(p);
    if (h == -1)
        return -1;
    PyObject *cur = _PyDict_GetItem_KnownHash(busy, p, h);
    if (cur == Py_None)
        return 0;
    if (cur == NULL && PyErr_Occurred())
        return -1;
    return _PyDict_SetItem_KnownHash(busy, p, Py_None, h);
}

/* len(q): a deque's its size field (a deque keeps its length there, as len reads it), anything
 * else's by the sequence protocol (-1 with an error) */
static inline Py_ssize_t q_len(PyObject *q)
{
    return Py_TYPE(q) == DequeT ? Py_SIZE(q) : PySequence_Size(q);
}

/* collections.deque's own C functions, found once in its method table through the descriptors of
 * ``deque.append`` (METH_O) and ``deque.popleft`` (METH_NOARGS): what the descriptor's call runs
 * after checking its arguments (a deque: checked by the caller), without that call. Its first item
 * read in place (CPython 3.11's dequeobject: its left block and index), when a check at the first
 * use finds the layout reads what deque[0] does; else by the sequence protocol. */
typedef PyObject *(*dq_fn_t)(PyObject *, PyObject *);
static dq_fn_t dq_append_fn, dq_popleft_fn;
static int dq_state; /* 0 not looked at yet, 1 the C functions known, 2 not (the descriptors' calls) */
static int dq_layout; /* the first item read in place (checked) */
#if PY_VERSION_HEX < 0x030C0000
typedef struct dq_block { struct dq_block *leftlink; PyObject *data[64]; struct dq_block *rightlink; } dq_block;
typedef struct { PyObject_VAR_HEAD dq_block *leftblock, *rightblock; Py_ssize_t leftindex, rightindex; } dq_object;
#endif

static dq_fn_t dq_method(PyObject *descr, int flags)
{
    if (descr == NULL || !Py_IS_TYPE(descr, &PyMethodDescr_Type))
        return NULL;
    PyMethodDef *m = ((PyMethodDescrObject *)descr)->d_method;
    return m != NULL && (m->ml_flags & ~METH_COEXIST) == flags ? (dq_fn_t)(void (*)(void))m->ml_meth : NULL;
}

/* the first item of the non-empty deque ``q``, borrowed, read in place */
static inline PyObject *dq_first_in_place(PyObject *q)
{
#if PY_VERSION_HEX < 0x030C0000
    dq_object *d = (dq_object *)q;
    return d->leftblock->data[d->leftindex];
#else
    (void)q;
    return NULL;
#endif
}

/* 1 (deque's C functions known), 0 (not: its descriptors are called), -1 error (at the check) */
static int dq_init(void)
{
    if (dq_state)
        return dq_state == 1;
    dq_state = 2;
    dq_append_fn = dq_method(deque_append, METH_O);
    dq_popleft_fn = dq_method(deque_popleft, METH_NOARGS);
    if (dq_append_fn == NULL || dq_popleft_fn == NULL || DequeT->tp_as_sequence == NULL ||
        DequeT->tp_as_sequence->sq_item == NULL)
        return 0;
    dq_state = 1;
#if PY_VERSION_HEX < 0x030C0000
    /* the layout checked against deque[0]: 200 distinct ints in a deque, popped from the left one by
     * one (across its blocks), appended to on the right now and then */
    PyObject *q = PyObject_CallNoArgs((PyObject *)DequeT);
    if (q == NULL)
        return -1;
    int same = 1;
    for (long k = 0; k < 200 && same; k++) {
        PyObject *v = PyLong_FromLong(1000 + k), *r = v == NULL ? NULL : dq_append_fn(q, v);
        Py_XDECREF(v);
        if (r == NULL) {
            Py_DECREF(q);
            return -1;
        }
        Py_DECREF(r);
    }
    for (long k = 0; k < 260 && same && Py_SIZE(q) > 0; k++) {
        PyObject *h = DequeT->tp_as_sequence->sq_item(q, 0);
        if (h == NULL) {
            Py_DECREF(q);
            return -1;
        }
        same = dq_first_in_place(q) == h;
        Py_DECREF(h);
        PyObject *r = dq_popleft_fn(q, NULL);
        if (r == NULL) {
            Py_DECREF(q);
            return -1;
        }
        Py_DECREF(r);
        if (k % 3 == 0) {
            PyObject *v = PyLong_FromLong(5000 + k);
            r = v == NULL ? NULL : dq_append_fn(q, v);
            Py_XDECREF(v);
            if (r == NULL) {
                Py_DECREF(q);
                return -1;
            }
            Py_DECREF(r);
        }
    }
    Py_DECREF(q);
    dq_layout = same;
#endif
    return 1;
}

/* deque.append(q, item) / deque.popleft(q): deque's own C functions for a deque (dq_init), by name
 * for anything else: a new reference, or NULL with an error */
static inline PyObject *q_append(PyObject *q, PyObject *item)
{
    if (Py_TYPE(q) == DequeT) {
        if (dq_state == 1 || dq_init() > 0)
            return dq_append_fn(q, item);
        if (PyErr_Occurred())
            return NULL;
        PyObject *args[2] = {q, item};
        return PyObject_Vectorcall(deque_append, args, 2, NULL);
    }
    return PyObject_CallMethodOneArg(q, s_append, item);
}

static inline PyObject *q_popleft(PyObject *q)
{
    if (Py_TYPE(q) == DequeT) {
        if (dq_state == 1 || dq_init() > 0)
            return dq_popleft_fn(q, NULL);
        if (PyErr_Occurred())
            return NULL;
        return PyObject_Vectorcall(deque_popleft, &q, 1, NULL);
    }
    return PyObject_CallMethodNoArgs(q, s_popleft);
}

/* q[0] of a non-empty ``q`` (a new reference, or NULL with an error): a deque's read in place (dq_init) */
static inline PyObject *q_first(PyObject *q)
{
    if (Py_TYPE(q) == DequeT) {
        int known = dq_state == 1 ? 1 : dq_init();
        if (known < 0)
            return NULL;
        if (known && dq_layout)
            return Py_NewRef(dq_first_in_place(q));
    }
    return PySequence_GetItem(q, 0);
}

/* the time of the first entry of ``seq`` (a list or deque of tuples): 1 (in *t), 0 (empty), 2 (not
 * what this code reads: Python's), -1 (error) */
static int head_time(PyObject *seq, int field, long long *t)
{
    if (seq == NULL)
        return 2;
    Py_ssize_t n = PyList_CheckExact(seq) ? PyList_GET_SIZE(seq) : (Py_TYPE(seq) == DequeT ? Py_SIZE(seq) : -2);
    if (n == -2)
        return 2;
    if (n <= 0)
        return (int)n;
    PyObject *head = PyList_CheckExact(seq) ? Py_NewRef(PyList_GET_ITEM(seq, 0)) : q_first(seq);
    if (head == NULL)
        return -1;
    int ok = PyTuple_Check(head) && PyTuple_GET_SIZE(head) > field && get_ll(PyTuple_GET_ITEM(head, field), t);
    Py_DECREF(head);
    return ok ? 1 : (PyErr_Occurred() ? -1 : 2);
}

/* Write ``v`` into the int ``o`` itself when nobody else can see it: ``o`` held by one reference
 * only (the caller's slot or dict entry), not a small int, and ``v`` of the same sign and number of
 * digits (CPython 3.11's layout, as get_ll reads it). A counter's update then makes no new object.
 * 1 written, 0 not (the caller makes a new int). */
static inline int int_in_place(PyObject *o, long long v)
{
#if PY_VERSION_HEX < 0x030C0000
    if (Py_REFCNT(o) != 1 || !PyLong_CheckExact(o))
        return 0;
    Py_ssize_t sz = Py_SIZE(o);
    digit *d = ((PyLongObject *)o)->ob_digit;
    if (sz == 1 && (unsigned long long)v - 257 < (1ULL << PyLong_SHIFT) - 257) { /* (first: one digit, 256 < v <
                                                                                   * 2**30, most times and counts) */
        d[0] = (digit)v;
        return 1;
    }
    if (v >= -5 && v <= 256)
        return 0;
    unsigned long long a = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    if ((sz < 0) != (v < 0))
        return 0;
    if (sz == 1 || sz == -1) {
        if (a >> PyLong_SHIFT)
            return 0;
        d[0] = (digit)a;
        return 1;
    }
    if (sz == 2 || sz == -2) {
        if (!(a >> PyLong_SHIFT) || (a >> (2 * PyLong_SHIFT)))
            return 0;
        d[0] = (digit)(a & PyLong_MASK);
        d[1] = (digit)(a >> PyLong_SHIFT);
        return 1;
    }
#endif
    return 0;
}

/* A count's int ``o`` set to v > 0 in place when its holder (a dict's entry, a slot) is its only
 * reference -- so not the small-int cache's, which holds its own -- and v has as many digits (one or
 * two; CPython 3.11's layout): 1 written, 0 not. With own_int, a count that stays small is written
 * in place too, where int_in_place leaves the values of the small-int cache alone. (3.12 on:
 * int_in_place.) */
static inline __attribute__((always_inline)) int count_in_place(PyObject *o, long long v)
{
#if PY_VERSION_HEX < 0x030C0000
    if (Py_REFCNT(o) != 1 || !PyLong_CheckExact(o) || v <= 0)
        return 0;
    Py_ssize_t sz = Py_SIZE(o);
    digit *dg = ((PyLongObject *)o)->ob_digit;
    if (sz == 1 && !(v >> PyLong_SHIFT)) {
        dg[0] = (digit)v;
        return 1;
    }
    if (sz == 2 && (v >> PyLong_SHIFT) && !(v >> (2 * PyLong_SHIFT))) {
        dg[0] = (digit)(v & PyLong_MASK);
        dg[1] = (digit)(v >> PyLong_SHIFT);
        return 1;
    }
    return 0;
#else
    return int_in_place(o, v);
#endif
}

/* A new int of value v, of its own -- not the small-int cache's, equal to it in all but identity --
 * when 0 < v < 2**30 (CPython 3.11), so that count_in_place can write it later */
static PyObject *own_int(long long v)
{
#if PY_VERSION_HEX < 0x030C0000
    if (v > 0 && !(v >> PyLong_SHIFT)) {
        PyLongObject *o = _PyLong_New(1);
        if (o != NULL)
            o->ob_digit[0] = (digit)v;
        return (PyObject *)o;
    }
#endif
    return PyLong_FromLongLong(v);
}

/* *slot = v (an int; the slot's reference): in place if it can be (int_in_place), else a new int */
static inline __attribute__((always_inline)) int put_ll(PyObject **slot, long long v)
{
    if (*slot != NULL && int_in_place(*slot, v))
        return 0;
    PyObject *n = PyLong_FromLongLong(v);
    if (n == NULL)
        return -1;
    Py_XSETREF(*slot, n);
    return 0;
}

static inline int set_ll(PyObject *obj, Py_ssize_t off, long long v)
{
    return put_ll(&SLOT(obj, off), v);
}

static inline void drop(PyObject **o) { Py_CLEAR(*o); }

/* the ``k`` bytes at ``b`` as a big-endian (network order) number, and the other way */
static inline uint64_t be(const unsigned char *b, int k)
{
    uint64_t v = 0;
    for (int i = 0; i < k; i++)
        v = v << 8 | b[i];
    return v;
}

static inline void put_be(unsigned char *b, uint64_t v, int k)
{
    for (int i = k - 1; i >= 0; i--, v >>= 8)
        b[i] = (unsigned char)(v & 0xFF);
}

static inline int set_attr_ll(PyObject *obj, PyObject *name, long long v)
{
    PyObject *n = PyLong_FromLongLong(v);
    if (n == NULL)
        return -1;
    int rc = PyObject_SetAttr(obj, name, n);
    Py_DECREF(n);
    return rc;
}

static inline int add_ll(PyObject *obj, Py_ssize_t off, long long d)
{
    long long v;
    if (!get_ll(SLOT(obj, off), &v)) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "emu._core: a counter is not an integer");
        return -1;
    }
    return set_ll(obj, off, v + d);
}


/* d[key] += n in a dict of counts (``missing_ok``: d.get(key, 0) + n, as a Python counter dict
 * that may lack the key): 0, or -1 with an error set (``what`` names the count) */
static int dict_add(PyObject *d, PyObject *key, long long n, int missing_ok, const char *what)
{
    long long v = 0;
    PyObject *old = PyDict_CheckExact(d) ? PyDict_GetItemWithError(d, key) : NULL;
    if (!PyDict_CheckExact(d) || PyErr_Occurred() || (old == NULL ? !missing_ok : !get_ll(old, &v))) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_TypeError, "emu._core: %s is not a count", what);
        return -1;
    }
    if (old != NULL && (int_in_place(old, v + n) || count_in_place(old, v + n))) /* (the dict's is the only reference) */
        return 0;
    /* (a count that stays small -- a router's over a short run -- in an int of its own, which the next
     * adds write in place, not a new dict item each: the small-int cache's cannot be written) */
    PyObject *nv = old != NULL ? own_int(v + n) : PyLong_FromLongLong(v + n);
    int rc = nv == NULL ? -1 : PyDict_SetItem(d, key, nv);
    Py_XDECREF(nv);
    return rc;
}

/* Entries made again from those that left a queue, when nobody else can see them: a tuple of one
 * reference (the caller's), exactly a tuple, its items written (ints in place when they can be,
 * put_ll). A tuple is immutable to everyone who can see it; this one nobody else can. */

/* ``t`` (a reference, consumed; an exact 2-tuple of ints, or NULL) as (a, b): ``t`` itself when
 * nobody else holds it, else NULL (released; an error set only when an int could not be made) */
static inline PyObject *dq_reuse2(PyObject *t, long long a, PyObject *b)
{
    if (t == NULL)
        return NULL;
    if (Py_REFCNT(t) != 1 || !PyTuple_CheckExact(t) || PyTuple_GET_SIZE(t) != 2 || put_ll(&PyTuple_GET_ITEM(t, 0), a) < 0) {
        Py_DECREF(t);
        return NULL;
    }
    if (PyTuple_GET_ITEM(t, 1) != b)
        Py_XSETREF(PyTuple_GET_ITEM(t, 1), Py_NewRef(b));
    return t;
}

/* pending entries' 4-tuples that left (pop_due), kept for the next ones (dq_pending): untracked,
 * held here only, items 2 and 3 empty (NULL), 0 and 1 ints or NULL */
#define DQ_SPARES 16
static PyObject *dq_spare[DQ_SPARES];
static int dq_spares;

/* a pending entry (start, arrival, frame, pool): a 4-tuple kept (dq_spare) or a new one; the frame
 * and pool new references taken (stolen); NULL with an error */
static inline PyObject *dq_pending(long long start, long long arrival, PyObject *frame, PyObject *pool)
{
    if (dq_spares > 0) {
        PyObject *t = dq_spare[--dq_spares];
        PyTuple_SET_ITEM(t, 2, frame);
        PyTuple_SET_ITEM(t, 3, pool);
        if (put_ll(&PyTuple_GET_ITEM(t, 0), start) < 0 || put_ll(&PyTuple_GET_ITEM(t, 1), arrival) < 0) {
            Py_DECREF(t); /* (its items released: tupledealloc's Py_XDECREF) */
            return NULL;
        }
        if (!PyBytes_CheckExact(frame))
            PyObject_GC_Track(t); /* (as a new tuple is: anything in it) */
        return t;
    }
    PyObject *t = tuple_steal_inline(4, (PyObject *[]){PyLong_FromLongLong(start), PyLong_FromLongLong(arrival), frame, pool});
    if (t != NULL && PyBytes_CheckExact(frame))
        PyObject_GC_UnTrack(t); /* (ints and bytes: no cycle through it) */
    return t;
}

/* ``t`` (a pending entry popped, the caller's only reference -- checked by the caller -- its items
 * 2 and 3 already taken out and NULL) kept for dq_pending, or released when enough are kept */
static inline void dq_keep(PyObject *t)
{
    if (dq_spares < DQ_SPARES) {
        PyObject_GC_UnTrack(t);
        dq_spare[dq_spares++] = t;
    } else
        Py_DECREF(t);
}

/* pop_due's taking of the head of ``pend`` (due, checked: a 4-tuple): ``head`` a reference to it (given
 * up), or NULL (a deque's: the entry its popleft returns). Its frame made if lazy (emu.wire.lazy), a new
 * reference in *frame; 1 (taken) or -1 (error). */
static int pd_pop_head(PyObject *pend, PyObject *head, PyObject **frame, int *pool, PyObject **arrival_obj)
{
    PyObject *r = q_popleft(pend);
    if (r == NULL) {
        Py_XDECREF(head);
        return -1;
    }
    if (head == NULL)
        head = r;
    else
        Py_DECREF(r);
    PyObject *f, *pl;
    if (Py_REFCNT(head) == 1 && PyTuple_CheckExact(head)) { /* (nobody else can see it: its items taken, it kept) */
        PyObject *start = PyTuple_GET_ITEM(head, 0); /* (kept only when an int: nothing else held longer) */
        f = PyTuple_GET_ITEM(head, 2);
        pl = PyTuple_GET_ITEM(head, 3);
        PyTuple_SET_ITEM(head, 2, NULL);
        PyTuple_SET_ITEM(head, 3, NULL);
        if (start != NULL && !PyLong_CheckExact(start))
            PyTuple_SET_ITEM(head, 0, NULL);
        else
            start = NULL;
        if (arrival_obj != NULL)
            *arrival_obj = Py_NewRef(PyTuple_GET_ITEM(head, 1));
        dq_keep(head);
        Py_XDECREF(start);
    } else {
        f = Py_NewRef(PyTuple_GET_ITEM(head, 2));
        pl = Py_NewRef(PyTuple_GET_ITEM(head, 3));
        if (arrival_obj != NULL)
            *arrival_obj = Py_NewRef(PyTuple_GET_ITEM(head, 1));
        Py_DECREF(head);
    }
    *pool = pl == Py_False ? 0 : pl == Py_True ? 1 : PyObject_IsTrue(pl);
    Py_DECREF(pl);
    if (*pool < 0) {
        if (arrival_obj != NULL)
            Py_CLEAR(*arrival_obj);
        Py_DECREF(f);
        return -1;
    }
    if (Py_TYPE(f) == LazyT) { /* made from its sender's buffer now */
        PyObject *made = PyObject_CallMethodNoArgs(f, s_make);
        Py_DECREF(f);
        if (made == NULL) {
            if (arrival_obj != NULL)
                Py_CLEAR(*arrival_obj);
            return -1;
        }
        f = made;
    }
    *frame = f;
    return 1;
}

/* pop_due for any queue (a deque not read in place, another sequence): its head by the sequence protocol */
static int pd_pop_due_any(PyObject *pend, long long release, long long *arrival, PyObject **frame, int *pool,
                          const char *who, PyObject **arrival_obj)
{
    Py_ssize_t len = q_len(pend);
    if (len <= 0)
        return (int)len; /* (0: empty, -1: error) */
    PyObject *head = q_first(pend);
    if (head == NULL)
        return -1;
    if (!PyTuple_Check(head) || PyTuple_GET_SIZE(head) != 4 || !get_ll(PyTuple_GET_ITEM(head, 1), arrival)) {
        Py_DECREF(head);
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_TypeError, "emu._core.%s: a pending entry is not a 4-tuple", who);
        return -1;
    }
    if (*arrival >= release) {
        Py_DECREF(head);
        return 0;
    }
    return pd_pop_head(pend, head, frame, pool, arrival_obj);
}

/* The next entry of an output port's pending queue ``pend`` ((start, arrival, frame, pool), in
 * order) if it arrives before ``release``: popped, its frame made if lazy (emu.wire.lazy), a new
 * reference in *frame. Returns 1 (taken), 0 (none due) or -1 (error; ``who`` names the caller).
 * Inline: a deque's head read in place (dq_first_in_place, borrowed) -- the loops that call it end
 * on an entry not due, about every other call. */
static inline __attribute__((always_inline)) int pop_due(PyObject *pend, long long release, long long *arrival,
                                                         PyObject **frame, int *pool, const char *who,
                                                         PyObject **arrival_obj /* (or NULL: the entry's arrival int, a new reference) */)
{
    if (Py_TYPE(pend) == DequeT && dq_layout) { /* (dq_layout: set by dq_init, which found deque's C functions) */
        if (Py_SIZE(pend) == 0)
            return 0;
        PyObject *head = dq_first_in_place(pend);
        if (PyTuple_CheckExact(head) && PyTuple_GET_SIZE(head) == 4 && get_ll(PyTuple_GET_ITEM(head, 1), arrival))
            return *arrival >= release ? 0 : pd_pop_head(pend, NULL, frame, pool, arrival_obj);
    }
    return pd_pop_due_any(pend, release, arrival, frame, pool, who, arrival_obj);
}

/* PyDict_Next(d, pos, k, v) inlined for a combined dict (CPython 3.11's layout, the keys' mirrored above as
 * fw_dk_t): the same entries in the same order, the same *pos after each (the next entry's index), without the
 * two calls per step -- the routers' small dicts of busy ports and of outputs with requests, walked at every
 * window and round. Any other dict or CPython: PyDict_Next. */
static inline __attribute__((always_inline)) int iw_dict_next(PyObject *d, Py_ssize_t *pos, PyObject **k, PyObject **v)
{
#ifdef FW_DICT_HINTS
    PyDictObject *mp = (PyDictObject *)d;
    if (PyDict_Check(d) && mp->ma_values == NULL && *pos >= 0) {
        fw_dk_t *dk = (fw_dk_t *)mp->ma_keys;
        Py_ssize_t i = *pos, n = dk->dk_nentries;
        char *base = dk->dk_indices + ((size_t)1 << dk->dk_log2_index_bytes);
        if (dk->dk_kind == 0) {
            for (const fw_dge_t *e = (const fw_dge_t *)base; i < n; i++)
                if (e[i].value != NULL) {
                    *k = e[i].key, *v = e[i].value, *pos = i + 1;
                    return 1;
                }
            return 0;
        }
        if (dk->dk_kind == 1) {
            for (const fw_due_t *e = (const fw_due_t *)base; i < n; i++)
                if (e[i].value != NULL) {
                    *k = e[i].key, *v = e[i].value, *pos = i + 1;
                    return 1;
                }
            return 0;
        }
    }
#endif
    return PyDict_Next(d, pos, k, v);
}

/* Ints whose last reference is let go, kept for the next ones made: an int of one digit held by the caller's
 * reference only (nobody else can see it) is written in place with the next value that fits one digit and
 * is not a small int (those stay CPython's own), instead of freeing one and making another -- the router's
 * heap keys and fields (csrc/iq.h, iqrecv.h), the times of the events and records every crossing makes and
 * drops. (iw_int_drop: the caller's reference; iw_int_new: a new reference.) */
#define IW_IFREE 64
static PyObject *iw_ifree[IW_IFREE];
static int iw_nifree;

static inline void iw_int_drop(PyObject *x)
{
#if PY_VERSION_HEX < 0x030C0000
    if (Py_REFCNT(x) == 1 && PyLong_CheckExact(x) && Py_SIZE(x) == 1 && iw_nifree < IW_IFREE) {
        iw_ifree[iw_nifree++] = x;
        return;
    }
#endif
    Py_DECREF(x);
}

static PyObject *iw_small[262]; /* (-5..256: CPython's own small ints, as PyLong_FromLongLong gave them, held here) */

static inline PyObject *iw_int_new(long long v)
{
#if PY_VERSION_HEX < 0x030C0000
    if (v > 256 && v <= (long long)PyLong_MASK && iw_nifree) {
        PyObject *n = iw_ifree[--iw_nifree];
        ((PyLongObject *)n)->ob_digit[0] = (digit)v;
        return n;
    }
#endif
    if (v >= -5 && v <= 256) { /* (the small-int cache's object, without the call) */
        PyObject **s = &iw_small[v + 5];
        if (*s == NULL && (*s = PyLong_FromLongLong(v)) == NULL)
            return NULL;
        return Py_NewRef(*s);
    }
    return PyLong_FromLongLong(v);
}

/* *slot = v (an int; the slot's reference), as put_ll: in place if it can be (int_in_place), else a kept int
 * (iw_int_new), the slot's old one kept for the next (iw_int_drop) when the slot's was its last reference */
static inline __attribute__((always_inline)) int iw_put_ll(PyObject **slot, long long v)
{
    PyObject *o = *slot;
    if (o != NULL && int_in_place(o, v))
        return 0;
    PyObject *n = iw_int_new(v);
    if (n == NULL)
        return -1;
    *slot = n;
    if (o != NULL)
        iw_int_drop(o);
    return 0;
}

/* *slot = [start, done, n, cut, []] (an output port's ``line``, as Python's ``self.line = [...]``): the
 * slot's list written in place when nobody else holds it (five items, its fifth an empty list nobody else
 * holds either -- none can tell it from a new one), its ints in place or kept ones; else a new list. 0, or
 * -1 with an error. */
static int iw_port_line(PyObject **slot, long long start, long long done, long long n, int cut)
{
    PyObject *old = *slot, *c = cut ? Py_True : Py_False;
    if (old != NULL && PyList_CheckExact(old) && Py_REFCNT(old) == 1 && PyList_GET_SIZE(old) == 5) {
        PyObject **it = ((PyListObject *)old)->ob_item, *inner = it[4];
        if (PyList_CheckExact(inner) && Py_REFCNT(inner) == 1 && PyList_GET_SIZE(inner) == 0 &&
            PyLong_CheckExact(it[0]) && PyLong_CheckExact(it[1]) && PyLong_CheckExact(it[2])) {
            long long v[3] = {start, done, n};
            for (int k = 0; k < 3; k++)
                if (iw_put_ll(&it[k], v[k]) < 0)
                    return -1;
            if (it[3] != c)
                Py_SETREF(it[3], Py_NewRef(c));
            return 0;
        }
    }
    PyObject *line = PyList_New(5), *e = PyList_New(0);
    if (line == NULL || e == NULL) {
        Py_XDECREF(line);
        Py_XDECREF(e);
        return -1;
    }
    PyList_SET_ITEM(line, 0, iw_int_new(start));
    PyList_SET_ITEM(line, 1, iw_int_new(done));
    PyList_SET_ITEM(line, 2, iw_int_new(n));
    PyList_SET_ITEM(line, 3, Py_NewRef(c));
    PyList_SET_ITEM(line, 4, e);
    if (!PyList_GET_ITEM(line, 0) || !PyList_GET_ITEM(line, 1) || !PyList_GET_ITEM(line, 2)) {
        Py_DECREF(line);
        return -1;
    }
    Py_XSETREF(*slot, line);
    return 0;
}

/* Four-item tuples the core makes and lets go at every crossing (a router's credit event on its element's
 * port events, the credit's entry on its port's link control), kept when their last reference is let go
 * (iw_t4_keep: the caller's reference; its items released first, ints kept by iw_int_drop, the tuple
 * untracked and empty until made again) and made again by iw_t4_new (four new references, stolen; NULL
 * when any is NULL, all released). Untracked: they hold ints, bytes, strs and tuples of ints -- no cycle. */
#define IW_T4 128
static PyObject *iw_t4[IW_T4];
static int iw_nt4;

static inline void iw_t4_keep(PyObject *t)
{
    if (Py_REFCNT(t) != 1 || !PyTuple_CheckExact(t) || PyTuple_GET_SIZE(t) != 4 || iw_nt4 >= IW_T4) {
        Py_DECREF(t);
        return;
    }
    PyObject *v[4];
    for (int k = 0; k < 4; k++) {
        v[k] = PyTuple_GET_ITEM(t, k);
        PyTuple_SET_ITEM(t, k, NULL);
    }
    PyObject_GC_UnTrack(t);
    iw_t4[iw_nt4++] = t; /* (kept empty before its items go: a release that runs code finds it whole) */
    for (int k = 0; k < 4; k++)
        if (v[k] != NULL)
            iw_int_drop(v[k]);
}

static inline PyObject *iw_t4_new(PyObject *a, PyObject *b, PyObject *c, PyObject *d)
{
    if (a == NULL || b == NULL || c == NULL || d == NULL || !iw_nt4)
        return tuple_steal_inline(4, (PyObject *[]){a, b, c, d});
    PyObject *t = iw_t4[--iw_nt4];
    PyTuple_SET_ITEM(t, 0, a);
    PyTuple_SET_ITEM(t, 1, b);
    PyTuple_SET_ITEM(t, 2, c);
    PyTuple_SET_ITEM(t, 3, d);
    return t;
}

/* Small lists whose last reference is let go (iw_list_keep: the caller's reference; emptied, its items released
 * after it is kept) and made again empty (iw_list_take: a new reference) -- an element's frames list from a
 * router's round or a host's timer, read by the window and let go at every call that sent something. */
#define IW_LISTS 32
static PyObject *iw_lists[IW_LISTS];
static int iw_nlists;

static inline PyObject *iw_list_take(void)
{
    while (iw_nlists) {
        PyObject *l = iw_lists[--iw_nlists];
        if (Py_REFCNT(l) == 1 && PyList_GET_SIZE(l) == 0) /* (found since -- gc.get_objects() -- and held or filled: let go) */
            return l;
        Py_DECREF(l);
    }
    return PyList_New(0);
}

static inline void iw_list_keep(PyObject *l)
{
    if (Py_REFCNT(l) != 1 || !PyList_CheckExact(l) || iw_nlists >= IW_LISTS || ((PyListObject *)l)->allocated > 8) {
        Py_DECREF(l);
        return;
    }
    PyObject *v[8];
    Py_ssize_t n = PyList_GET_SIZE(l);
    memcpy(v, ((PyListObject *)l)->ob_item, (size_t)n * sizeof(PyObject *));
    Py_SET_SIZE(l, 0);
    iw_lists[iw_nlists++] = l; /* (kept empty before its items go: a release that runs code finds it whole) */
    for (Py_ssize_t i = 0; i < n; i++)
        Py_DECREF(v[i]);
}

/* get_ll3: get_ll with an int of three digits read in place first (CPython 3.11's layout, a positive
 * value below 2**63). INF (1 << 62) is one: a router's next round or timer when it has none, read at
 * every timer (csrc/iq*.h), and an element's _at entry when it is not due, read at every frames_due --
 * get_ll takes such an int to PyLong_AsLongLongAndOverflow */
static inline __attribute__((always_inline)) int get_ll3(PyObject *o, long long *v)
{
#if PY_VERSION_HEX < 0x030C0000
    if (o != NULL && PyLong_CheckExact(o) && Py_SIZE(o) == 3) {
        const digit *d = ((PyLongObject *)o)->ob_digit;
        if (!(d[2] >> (63 - 2 * PyLong_SHIFT))) {
            *v = (long long)d[0] | ((long long)d[1] << PyLong_SHIFT) | ((long long)d[2] << (2 * PyLong_SHIFT));
            return 1;
        }
    }
#endif
    return get_ll(o, v);
}

#endif /* EMU_CSRC_COMMON_H */
