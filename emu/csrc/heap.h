/* emu/csrc/heap.h: the event heaps, laid out as heapq lays them out (part of emu/_core.c, one translation unit) */
#ifndef EMU_CSRC_HEAP_H
#define EMU_CSRC_HEAP_H

/* -- the event heaps: heapq's algorithm exactly (so a heap is laid out as heapq would lay it out),
 * with the comparison of the entries (time, port, sequence, ...) done on their leading integers */
/* a < b: 1, 0, or -1 (error). Entries are tuples led by integers (an element's (time, port,
 * sequence, ...), a domain's (time, index)): compared on up to three of them, as far as needed;
 * two ints that fit 64 bits (the input-queued router's keys) directly; anything else (or all of them
 * equal) as heapq compares it. */
static int entry_lt(PyObject *a, PyObject *b)
{
    long long ia, ib;
    if (PyLong_CheckExact(a) && PyLong_CheckExact(b) && get_ll(a, &ia) && get_ll(b, &ib))
        return ia < ib; /* (plain ints: the input-queued router's keys) */
    if (PyTuple_CheckExact(a) && PyTuple_CheckExact(b)) {
        Py_ssize_t n = PyTuple_GET_SIZE(a) < PyTuple_GET_SIZE(b) ? PyTuple_GET_SIZE(a) : PyTuple_GET_SIZE(b);
        if (n > 3)
            n = 3;
        Py_ssize_t i = 0;
        for (; i < n; i++) {
            long long x, y;
            if (!get_ll(PyTuple_GET_ITEM(a, i), &x) || !get_ll(PyTuple_GET_ITEM(b, i), &y))
                break;
            if (x != y)
                return x < y;
        }
        if (PyErr_Occurred())
            return -1;
        if (i == n && PyTuple_GET_SIZE(a) == n && PyTuple_GET_SIZE(b) == n)
            return 0; /* equal tuples */
    }
    return PyObject_RichCompareBool(a, b, Py_LT);
}

/* entry_lt(a, b) where it is decided on the leading ints of two tuples -- the first that differ of
 * their first two (a domain's (time, index), an element's (time, port, ...)) --, read in place: no
 * Python code runs, nothing is referenced. 1 or 0 (that answer), -2 (not decided here: entry_lt). */
static inline __attribute__((always_inline)) int entry_lt_fast(PyObject *a, PyObject *b)
{
    if (!PyTuple_CheckExact(a) || !PyTuple_CheckExact(b))
        return -2;
#if PY_VERSION_HEX < 0x030C0000
    if (Py_SIZE(a) > 1 && Py_SIZE(b) > 1) { /* (first, unrolled: leading ints of one digit, most comparisons; the
                                             * items of a tuple anyone can see are never NULL -- heapq's
                                             * comparison would read them too) */
        PyObject *u = PyTuple_GET_ITEM(a, 0), *v = PyTuple_GET_ITEM(b, 0);
        if (Py_TYPE(u) == &PyLong_Type && Py_TYPE(v) == &PyLong_Type && Py_SIZE(u) == 1 && Py_SIZE(v) == 1) {
            digit du = ((PyLongObject *)u)->ob_digit[0], dv = ((PyLongObject *)v)->ob_digit[0];
            if (du != dv)
                return du < dv;
            u = PyTuple_GET_ITEM(a, 1), v = PyTuple_GET_ITEM(b, 1);
            if (Py_TYPE(u) == &PyLong_Type && Py_TYPE(v) == &PyLong_Type && Py_SIZE(u) == 1 && Py_SIZE(v) == 1 &&
                (du = ((PyLongObject *)u)->ob_digit[0]) != (dv = ((PyLongObject *)v)->ob_digit[0]))
                return du < dv;
        }
    }
#endif
    Py_ssize_t n = PyTuple_GET_SIZE(a) < PyTuple_GET_SIZE(b) ? PyTuple_GET_SIZE(a) : PyTuple_GET_SIZE(b);
    if (n > 2)
        n = 2;
    for (Py_ssize_t i = 0; i < n; i++) { /* (the rest: get_ll reads an int of one digit first too) */
        long long x, y;
        if (!get_ll(PyTuple_GET_ITEM(a, i), &x) || !get_ll(PyTuple_GET_ITEM(b, i), &y))
            return -2; /* (not an int, or too large for 64 bits: entry_lt, as before) */
        if (x != y)
            return x < y;
    }
    return -2;
}

static int sift_down(PyObject *heap, Py_ssize_t startpos, Py_ssize_t pos)
{
    PyObject **arr = ((PyListObject *)heap)->ob_item;
    PyObject *newitem = arr[pos];
    while (pos > startpos) {
        Py_ssize_t parentpos = (pos - 1) >> 1;
        PyObject *parent = arr[parentpos];
        long long x, y;
        int f;
        if ((f = entry_lt_fast(newitem, parent)) >= 0) { /* (tuples decided on their ints: no Python code runs) */
            if (!f)
                break;
        } else if (get_ll(newitem, &x) && get_ll(parent, &y)) { /* (two plain ints, read in place, likewise) */
            if (!(x < y))
                break;
        } else {
            Py_INCREF(newitem);
            Py_INCREF(parent);
            int cmp = entry_lt(newitem, parent);
            Py_DECREF(parent);
            Py_DECREF(newitem);
            if (cmp < 0)
                return -1;
            if (PyList_GET_SIZE(heap) <= pos) {
                PyErr_SetString(PyExc_RuntimeError, "list changed size during iteration");
                return -1;
            }
            if (cmp == 0)
                break;
            arr = ((PyListObject *)heap)->ob_item;
            parent = arr[parentpos];
            newitem = arr[pos];
        }
        arr[parentpos] = newitem;
        arr[pos] = parent;
        pos = parentpos;
    }
    return 0;
}

static int sift_up(PyObject *heap, Py_ssize_t pos)
{
    Py_ssize_t endpos = PyList_GET_SIZE(heap), startpos = pos, limit = endpos >> 1;
    PyObject **arr = ((PyListObject *)heap)->ob_item;
    while (pos < limit) {
        Py_ssize_t childpos = 2 * pos + 1;
        if (childpos + 1 < endpos) {
            PyObject *a = arr[childpos], *b = arr[childpos + 1];
            long long x, y;
            int f;
            if ((f = entry_lt_fast(a, b)) >= 0) /* (tuples decided on their ints: no Python code runs) */
                childpos += f ^ 1;
            else if (get_ll(a, &x) && get_ll(b, &y)) /* (two plain ints, read in place, likewise) */
                childpos += !(x < y);
            else {
                Py_INCREF(a);
                Py_INCREF(b);
                int cmp = entry_lt(a, b);
                Py_DECREF(a);
                Py_DECREF(b);
                if (cmp < 0)
                    return -1;
                childpos += ((unsigned)cmp ^ 1);
                arr = ((PyListObject *)heap)->ob_item;
                if (endpos != PyList_GET_SIZE(heap)) {
                    PyErr_SetString(PyExc_RuntimeError, "list changed size during iteration");
                    return -1;
                }
            }
        }
        PyObject *tmp1 = arr[childpos], *tmp2 = arr[pos];
        arr[childpos] = tmp2;
        arr[pos] = tmp1;
        pos = childpos;
    }
    return sift_down(heap, startpos, pos);
}

/* heapq.heappush(heap, item) (the reference to item is the caller's) */
static int heap_push(PyObject *heap, PyObject *item)
{
    if (PyList_Append(heap, item) < 0)
        return -1;
    return sift_down(heap, 0, PyList_GET_SIZE(heap) - 1);
}

/* heapq.heappop(heap): a new reference */
static PyObject *heap_pop(PyObject *heap)
{
    Py_ssize_t n = PyList_GET_SIZE(heap);
    if (n == 0) {
        PyErr_SetString(PyExc_IndexError, "index out of range");
        return NULL;
    }
    PyObject *lastelt = PyList_GET_ITEM(heap, n - 1);
    Py_SET_SIZE(heap, n - 1); /* (the list's last reference, now lastelt's: its room kept for the next push) */
    n--;
    if (!n)
        return lastelt;
    PyObject *returnitem = PyList_GET_ITEM(heap, 0);
    PyList_SET_ITEM(heap, 0, lastelt);
    if (sift_up(heap, 0) < 0) {
        Py_DECREF(returnitem);
        return NULL;
    }
    return returnitem;
}


/* -- heap records and domain entries kept for reuse. A record (arrival, index, seq, frame, flags) that
 * left an element's heap, or a domain's (time, index) entry that left the domain's heap, is made
 * again for the next one when nobody else can see it: exactly a tuple of its size, one reference (the
 * caller's, given up here). A tuple is immutable to everyone who can see it; a kept one nobody else
 * can. Kept ones are untracked by the GC and hold only ints (a record's frame dropped: NULL until it
 * is made again); an int in one is written in place only when the tuple is its only holder (put_ll).
 * hp_rec_kept / hp_dom_kept count the tuples made again (counts()). */
#define HP_REC_SPARES 256  /* (a window's records popped before the sends make new ones) */
#define HP_DOM_SPARES 1024 /* (a window's entries popped -- one per element that ran -- before the next pushed) */
static PyObject *hp_rec_spare[HP_REC_SPARES], *hp_dom_spare[HP_DOM_SPARES];
static int hp_rec_spares, hp_dom_spares;
static unsigned long long hp_rec_kept, hp_dom_kept;

/* ``t`` (a reference, given up) kept as a spare of ``n`` items in ``spare`` (up to ``cap``) when nobody else holds it,
 * its items other than exact ints (a record's frame) dropped; else released */
static inline void hp_keep(PyObject *t, Py_ssize_t n, PyObject **spare, int *count, int cap)
{
    if (Py_REFCNT(t) != 1 || !PyTuple_CheckExact(t) || PyTuple_GET_SIZE(t) != n || *count >= cap) {
        Py_DECREF(t);
        return;
    }
    PyObject_GC_UnTrack(t); /* (untracked, if it was) */
    spare[(*count)++] = t; /* (kept before anything is released: a release runs no code that sees it half made) */
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *v = PyTuple_GET_ITEM(t, k);
        if (v != NULL && !PyLong_CheckExact(v)) {
            PyTuple_SET_ITEM(t, k, NULL);
            Py_DECREF(v);
        }
    }
}

/* an output port's queued entry (done, bytes) that left its queue, other than the one its enqueue
 * makes again itself (the caller's reference, given up); hp_q_take: one kept (a reference: dq_reuse2
 * fills it), or NULL */
#define HP_Q_SPARES 256
static PyObject *hp_q_spare[HP_Q_SPARES];
static int hp_q_spares;
static inline void hp_q_keep(PyObject *t) { hp_keep(t, 2, hp_q_spare, &hp_q_spares, HP_Q_SPARES); }
static unsigned long long hp_q_kept;
static inline PyObject *hp_q_take(void) { return hp_q_spares > 0 ? (hp_q_kept++, hp_q_spare[--hp_q_spares]) : NULL; }

/* a record that left an element's heap (popped: the caller's reference, given up) */
static inline void hp_rec_keep(PyObject *t) { hp_keep(t, 5, hp_rec_spare, &hp_rec_spares, HP_REC_SPARES); }

/* a domain's heap entry that left its heap (the caller's reference, given up) */
static inline void hp_dom_keep(PyObject *t) { hp_keep(t, 2, hp_dom_spare, &hp_dom_spares, HP_DOM_SPARES); }

/* an engine's output entry (port, frame, at) that an emit queued (the result list's reference, given
 * up), kept for the NIC's next one-frame send (hp_out_entry) when nobody else holds it */
#define HP_OUT_SPARES 64
static PyObject *hp_out_spare[HP_OUT_SPARES];
static int hp_out_spares;
static inline void hp_out_keep(PyObject *t) { hp_keep(t, 3, hp_out_spare, &hp_out_spares, HP_OUT_SPARES); }

/* item ``k`` of a kept tuple set to ``v`` (a new reference, stolen) */
static inline void hp_put(PyObject *t, Py_ssize_t k, PyObject *v)
{
    PyObject *old = PyTuple_GET_ITEM(t, k);
    PyTuple_SET_ITEM(t, k, v);
    Py_XDECREF(old);
}

/* a record (arrival, index, seq, frame, flags) as Python pushes it: ``arr`` the arrival's int (a new
 * reference, stolen; NULL: an int of ``at``), ``frame`` stolen (NULL: an error set, all released),
 * ``index`` and ``flags`` borrowed. Untracked by the GC when its frame is bytes (ints and bytes: no
 * cycle through it), as a new one is otherwise. NULL with an error. */
static inline PyObject *hp_record(PyObject *arr, long long at, PyObject *index, long long seq, PyObject *frame,
                                  PyObject *flags)
{
    if (frame == NULL) {
        Py_XDECREF(arr);
        return NULL;
    }
    if (hp_rec_spares > 0) {
        PyObject *t = hp_rec_spare[--hp_rec_spares];
        PyTuple_SET_ITEM(t, 3, frame); /* (NULL while kept) */
        if (arr != NULL)
            hp_put(t, 0, arr);
        if (PyTuple_GET_ITEM(t, 1) != index)
            hp_put(t, 1, Py_NewRef(index));
        if (PyTuple_GET_ITEM(t, 4) != flags)
            hp_put(t, 4, Py_NewRef(flags));
        if ((arr == NULL && put_ll(&PyTuple_GET_ITEM(t, 0), at) < 0) || put_ll(&PyTuple_GET_ITEM(t, 2), seq) < 0) {
            Py_DECREF(t); /* (its items released: tupledealloc's Py_XDECREF) */
            return NULL;
        }
        if (!PyBytes_CheckExact(frame))
            PyObject_GC_Track(t);
        hp_rec_kept++;
        return t;
    }
    PyObject *t = tuple_steal_inline(5, (PyObject *[]){arr != NULL ? arr : PyLong_FromLongLong(at), Py_NewRef(index),
                                                       PyLong_FromLongLong(seq), frame, Py_NewRef(flags)});
    if (t != NULL && PyBytes_CheckExact(frame))
        PyObject_GC_UnTrack(t);
    return t;
}

/* an output entry (port, frame, at) as NicEngine._put_message appends it: ``port`` and ``frame`` new
 * references (stolen; frame NULL: an error set, port released), a kept entry made again (its ``at``
 * int written in place when nobody else holds it) or a new one; untracked by the GC when its frame
 * is bytes (ints and bytes: no cycle through it), as a record is. NULL with an error. */
static inline PyObject *hp_out_entry(PyObject *port, PyObject *frame, long long at)
{
    if (frame == NULL || port == NULL) {
        Py_XDECREF(port);
        Py_XDECREF(frame);
        return NULL;
    }
    if (hp_out_spares > 0) {
        PyObject *t = hp_out_spare[--hp_out_spares];
        PyTuple_SET_ITEM(t, 1, frame); /* (NULL while kept) */
        if (PyTuple_GET_ITEM(t, 0) != port)
            hp_put(t, 0, port);
        else
            Py_DECREF(port);
        if (put_ll(&PyTuple_GET_ITEM(t, 2), at) < 0) {
            Py_DECREF(t); /* (its items released: tupledealloc's Py_XDECREF) */
            return NULL;
        }
        if (!PyBytes_CheckExact(frame))
            PyObject_GC_Track(t);
        return t;
    }
    PyObject *t = tuple_steal_inline(3, (PyObject *[]){port, frame, PyLong_FromLongLong(at)});
    if (t != NULL && PyBytes_CheckExact(frame))
        PyObject_GC_UnTrack(t);
    return t;
}

/* a domain's heap entry (t, i) -- ``i`` borrowed --, its time's int also set in *ts (a new reference):
 * a kept entry's int written in place when nobody else holds it, else a new one. Untracked by the GC
 * (ints: no cycle through it). NULL with an error. */
static inline PyObject *hp_dom_entry(long long t, PyObject *i, PyObject **ts)
{
    if (hp_dom_spares > 0) {
        PyObject *e = hp_dom_spare[--hp_dom_spares];
        if (PyTuple_GET_ITEM(e, 1) != i)
            hp_put(e, 1, Py_NewRef(i));
        if (put_ll(&PyTuple_GET_ITEM(e, 0), t) < 0) {
            Py_DECREF(e);
            return NULL;
        }
        *ts = Py_NewRef(PyTuple_GET_ITEM(e, 0));
        hp_dom_kept++;
        return e;
    }
    PyObject *n = PyLong_FromLongLong(t);
    if (n == NULL)
        return NULL;
    *ts = Py_NewRef(n);
    PyObject *e = tuple_steal_inline(2, (PyObject *[]){n, Py_NewRef(i)});
    if (e == NULL)
        Py_CLEAR(*ts);
    else
        PyObject_GC_UnTrack(e); /* (ints: no cycle through it) */
    return e;
}

/* the int of a record's flags ``v`` (0 <= v < 64: C_CLEAN, C_NOFCS, C_POOL and their sums), made once and
 * kept: a borrowed reference (NULL with an error) */
static inline __attribute__((always_inline)) PyObject *hp_flag_int(long long v)
{
    static PyObject *ints[64];
    if (v < 0 || v >= 64)
        return PyErr_Format(PyExc_ValueError, "emu._core: a record's flags %lld are not what they were", v), NULL;
    if (ints[v] == NULL)
        ints[v] = PyLong_FromLongLong(v);
    return ints[v];
}

/* *slot = v for a count (or a sequence number) of ``obj``: written in place when the slot's int is
 * nobody else's (count_in_place, int_in_place), else an int of its own (own_int: equal to the
 * small-int cache's in all but identity) that the next one writes in place */
static inline __attribute__((always_inline)) int hp_put_count(PyObject **slot, long long v)
{
    PyObject *o = *slot;
    if (o != NULL && (count_in_place(o, v) || int_in_place(o, v)))
        return 0;
    PyObject *n = own_int(v);
    if (n == NULL)
        return -1;
    Py_XSETREF(*slot, n);
    return 0;
}

static inline __attribute__((always_inline)) int hp_set_count(PyObject *obj, Py_ssize_t off, long long v)
{
    return hp_put_count(&SLOT(obj, off), v);
}

/* add_ll for a count: obj.<slot> += d, by hp_put_count */
static inline __attribute__((always_inline)) int hp_add_count(PyObject *obj, Py_ssize_t off, long long d)
{
    long long v;
    if (!get_ll(SLOT(obj, off), &v)) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "emu._core: a counter is not an integer");
        return -1;
    }
    return hp_put_count(&SLOT(obj, off), v + d);
}

/* counts()'s entries for the tuples made again here: records_reused, entries_reused, queued_reused */
static int hp_counts(PyObject *d)
{
    PyObject *a = PyLong_FromUnsignedLongLong(hp_rec_kept), *b = PyLong_FromUnsignedLongLong(hp_dom_kept),
             *c = PyLong_FromUnsignedLongLong(hp_q_kept);
    int rc = a == NULL || b == NULL || c == NULL || PyDict_SetItemString(d, "records_reused", a) < 0 ||
                     PyDict_SetItemString(d, "entries_reused", b) < 0 || PyDict_SetItemString(d, "queued_reused", c) < 0
                 ? -1 : 0;
    Py_XDECREF(a);
    Py_XDECREF(b);
    Py_XDECREF(c);
    return rc;
}

#endif /* EMU_CSRC_HEAP_H */
