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
    Py_ssize_t n = PyTuple_GET_SIZE(a) < PyTuple_GET_SIZE(b) ? PyTuple_GET_SIZE(a) : PyTuple_GET_SIZE(b);
    if (n > 2)
        n = 2;
    for (Py_ssize_t i = 0; i < n; i++) {
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
        if (get_ll(newitem, &x) && get_ll(parent, &y)) { /* (two plain ints, read in place: no Python code runs) */
            if (!(x < y))
                break;
        } else if ((f = entry_lt_fast(newitem, parent)) >= 0) { /* (tuples decided on their ints, likewise) */
            if (!f)
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
            if (get_ll(a, &x) && get_ll(b, &y)) /* (two plain ints, read in place: no Python code runs) */
                childpos += !(x < y);
            else if ((f = entry_lt_fast(a, b)) >= 0) /* (tuples decided on their ints, likewise) */
                childpos += f ^ 1;
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


#endif /* EMU_CSRC_HEAP_H */
