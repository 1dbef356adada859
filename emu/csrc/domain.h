/* emu/csrc/domain.h: a Domain's frame counts kept inline for the Domain class (part of emu/_core.c, one translation unit) */
#ifndef EMU_CSRC_DOMAIN_H
#define EMU_CSRC_DOMAIN_H

/* Domain.frames_local(peer, n, first_ts, window) and frames_arrived -- inline for the Domain class
 * (domain_setup), their bookkeeping exactly: sent_to[index] += n (local); received += n;
 * _by_window[window] += n; the element's entry in the domain's heap no later than first_ts. Any
 * other class: its method. */
/* c[key] = c.get(key, 0) + n for a domain's counts by window (a dict, ``key`` an int): the count's
 * int of the last window added to, kept per dict with the dict's version (CPython 3.11: a new version
 * with every change of any dict) and the key's value -- while they stand the dict still holds that int
 * under that key, and it is written in place when nobody else holds it (count_in_place, int_in_place:
 * the version stays); else dict_add's lookup, and the entry noted again */
#define BW_SLOTS 64
static struct { PyObject *d, *val; uint64_t ver; long long k; } bw_cache[BW_SLOTS];

static int window_add(PyObject *c, PyObject *key, long long n)
{
#if PY_VERSION_HEX < 0x030C0000
    long long kv, v;
    if (PyDict_CheckExact(c) && PyLong_CheckExact(key) && get_ll(key, &kv)) {
        size_t h = (size_t)((uint64_t)(uintptr_t)c * 0x9E3779B97F4A7C15ULL >> 58); /* (of BW_SLOTS: 64) */
        uint64_t ver = ((PyDictObject *)c)->ma_version_tag;
        if (bw_cache[h].d == c && bw_cache[h].ver == ver && ver && bw_cache[h].k == kv &&
            get_ll(bw_cache[h].val, &v) && (int_in_place(bw_cache[h].val, v + n) || count_in_place(bw_cache[h].val, v + n)))
            return 0;
        bw_cache[h].d = NULL;
        if (dict_add(c, key, n, 1, "a domain's count by window") < 0)
            return -1;
        PyObject *val = PyDict_GetItemWithError(c, key); /* (an exact int: no Python code runs) */
        if (val == NULL)
            return PyErr_Occurred() ? -1 : 0;
        bw_cache[h].d = c, bw_cache[h].val = val, bw_cache[h].ver = ((PyDictObject *)c)->ma_version_tag, bw_cache[h].k = kv;
        return 0;
    }
#endif
    return dict_add(c, key, n, 1, "a domain's count by window");
}

static int add_attr_item(PyObject *domain, int which, PyObject *key, long long n, int is_list)
{
    PyObject *c = DOM_GET(domain, which);
    if (c == NULL)
        return -1;
    int rc = -1;
    if (is_list) { /* c[key] += n */
        Py_ssize_t k = PyLong_AsSsize_t(key);
        if (!(k == -1 && PyErr_Occurred()) && PyList_CheckExact(c) && k >= 0 && k < PyList_GET_SIZE(c)) {
            long long v;
            if (get_ll(PyList_GET_ITEM(c, k), &v)) /* (an int of its own, written in place: hp_put_count) */
                rc = hp_put_count(&PyList_GET_ITEM(c, k), v + n);
        }
    } else /* c[key] = c.get(key, 0) + n */
        rc = window_add(c, key, n);
    if (rc < 0 && !PyErr_Occurred())
        PyErr_SetString(PyExc_TypeError, "emu._core: a domain's counts are not what they were");
    Py_DECREF(c);
    return rc;
}

/* _idx[el] (a borrowed reference; NULL: an error set), kept per element with the dict's address and
 * version (CPython 3.11: a new version with every change of a dict, and for every new dict): while
 * both stand the dict holds the element and its int, so the entry is what a lookup would find --
 * one frames_due per crossing looks an element up (its hash and the dict's probe) no more */
#define SK_IDX_SLOTS 1024
static struct { PyObject *el, *idx, *i; uint64_t ver; Py_ssize_t k; } sk_idx_cache[SK_IDX_SLOTS];

static PyObject *sk_dom_index(PyObject *idx, PyObject *el, Py_ssize_t *k)
{
#if PY_VERSION_HEX < 0x030C0000
    uint64_t ver = ((PyDictObject *)idx)->ma_version_tag;
    size_t h = (size_t)((uint64_t)(uintptr_t)el * 0x9E3779B97F4A7C15ULL >> 54); /* (of SK_IDX_SLOTS: 1024) */
    if (sk_idx_cache[h].el == el && sk_idx_cache[h].idx == idx && sk_idx_cache[h].ver == ver && ver) {
        *k = sk_idx_cache[h].k;
        return sk_idx_cache[h].i;
    }
#endif
    PyObject *i = PyDict_GetItemWithError(idx, el);
    if (i == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetObject(PyExc_KeyError, el);
        return NULL;
    }
    *k = PyLong_AsSsize_t(i);
    if (*k == -1 && PyErr_Occurred())
        return NULL;
#if PY_VERSION_HEX < 0x030C0000
    sk_idx_cache[h].el = el, sk_idx_cache[h].idx = idx, sk_idx_cache[h].i = i;
    sk_idx_cache[h].ver = ver, sk_idx_cache[h].k = *k;
#endif
    return i;
}

/* the element's entry in the domain's heap no later than ``t`` (Domain.schedule's and
 * frames_arrived's: i = _idx[el]; if t < _at[i]: _at[i] = t; heappush(_heap, (t, i))) */
static int frames_due(PyObject *domain, PyObject *el, long long t)
{
    int rc = -1;
    PyObject *idx, *i = NULL, *at = NULL, *ts = NULL;
    if (Py_TYPE(domain) == DomainT && (idx = SLOT(domain, dom_attr[D_IDX].off)) != NULL &&
        (at = SLOT(domain, dom_attr[D_AT].off)) != NULL) { /* (a Domain's slots, held while used) */
        Py_INCREF(idx);
        Py_INCREF(at);
    } else if ((idx = DOM_GET(domain, D_IDX)) == NULL || (at = DOM_GET(domain, D_AT)) == NULL)
        goto done;
    if (idx == NULL || !PyDict_CheckExact(idx))
        goto done;
    Py_ssize_t k;
    i = sk_dom_index(idx, el, &k);
    if (i == NULL)
        goto done;
    Py_INCREF(i);
    long long cur;
    if (at == NULL || !PyList_CheckExact(at) || k < 0 || k >= PyList_GET_SIZE(at) || !get_ll3(PyList_GET_ITEM(at, k), &cur))
        goto done;
    if (t < cur) {
        PyObject *entry = hp_dom_entry(t, i, &ts); /* (t, i), its int ts shared with _at[i], as Python's */
        if (entry == NULL)
            goto done;
        Py_SETREF(PyList_GET_ITEM(at, k), Py_NewRef(ts)); /* (_at[i] = t: k checked above, the list held) */
        PyObject *dheap = DOM_GET(domain, D_HEAP);
        if (dheap == NULL) {
            Py_DECREF(entry);
            goto done;
        }
        int pushed = !PyList_CheckExact(dheap) ? -1 : heap_push(dheap, entry);
        Py_XDECREF(entry);
        Py_DECREF(dheap);
        if (pushed < 0)
            goto done;
    }
    rc = 0;
done:
    if (rc < 0 && !PyErr_Occurred())
        PyErr_SetString(PyExc_TypeError, "emu._core: a domain's counts are not what they were");
    Py_XDECREF(idx);
    Py_XDECREF(i);
    Py_XDECREF(at);
    Py_XDECREF(ts);
    return rc;
}

/* the counts of ``n`` frames accepted in ``window`` (received, _by_window[window]), for the Domain
 * class: 0, or -1 with an error */
static int arrived_counts(PyObject *domain, long long n, PyObject *window)
{
    long long rv;
    int ok = get_ll(SLOT(domain, dom_attr[D_RECEIVED].off), &rv) && DOM_SET_LL(domain, D_RECEIVED, rv + n) == 0 &&
             add_attr_item(domain, D_BY_WINDOW, window, n, 0) == 0;
    if (!ok && !PyErr_Occurred())
        PyErr_SetString(PyExc_TypeError, "emu._core: a domain's counts are not what they were");
    return ok ? 0 : -1;
}

/* Domain.frames_arrived(el, n, first_ts, window) -- its bookkeeping exactly, for the Domain class */
static int frames_arrived(PyObject *domain, PyObject *el, long n, long long first_ts, PyObject *window)
{
    if (DomainT == NULL || Py_TYPE(domain) != DomainT) {
        PyObject *r = PyObject_CallMethod(domain, "frames_arrived", "OlLO", el, n, first_ts, window);
        Py_XDECREF(r);
        return r == NULL ? -1 : 0;
    }
    return arrived_counts(domain, n, window) < 0 ? -1 : frames_due(domain, el, first_ts);
}

/* Domain.frames_local's counts of ``n`` frames handed over in this domain (sent_to[index], then
 * received and _by_window[window]), for the Domain class: a hand-over loop adds them up and tells
 * the domain once, each peer's heap entry (frames_due) told as it goes */
static int local_counts(PyObject *domain, long long n, PyObject *window)
{
    if (n == 0)
        return 0;
    PyObject *index = DOM_GET(domain, D_INDEX);
    int rc = index == NULL ? -1 : add_attr_item(domain, D_SENT_TO, index, n, 1);
    Py_XDECREF(index);
    return rc < 0 ? -1 : arrived_counts(domain, n, window);
}

/* Domain.frames_local(el, n, first_ts, window) of a domain of another class (the Domain class's:
 * local_counts and frames_due, above) */
static int frames_local_call(PyObject *domain, PyObject *el, long n, long long first_ts, PyObject *window)
{
    PyObject *r = PyObject_CallMethod(domain, "frames_local", "OlLO", el, n, first_ts, window);
    Py_XDECREF(r);
    return r == NULL ? -1 : 0;
}

/* Batch.on_datagram's last loop: every element's frames accepted from one datagram (``got``:
 * element -> [frames, earliest stamp, window]) told to its domain; returns how many */
static PyObject *arrived(PyObject *self, PyObject *got)
{
    if (!PyDict_CheckExact(got)) {
        PyErr_SetString(PyExc_TypeError, "arrived(dict)");
        return NULL;
    }
    Py_ssize_t pos = 0;
    PyObject *el, *g;
    long long total = 0;
    while (PyDict_Next(got, &pos, &el, &g)) {
        long long k, ts;
        if (!PyList_CheckExact(g) || PyList_GET_SIZE(g) != 3 || !get_ll(PyList_GET_ITEM(g, 0), &k) ||
            !get_ll(PyList_GET_ITEM(g, 1), &ts)) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "emu._core.arrived: an entry is not [frames, first, window]");
            return NULL;
        }
        if (!k)
            continue;
        total += k;
        Py_INCREF(el);
        Py_INCREF(g);
        PyObject *dom = EL_GET(el, E_DOMAIN);
        int rc = dom == NULL ? -1 : frames_arrived(dom, el, (long)k, ts, PyList_GET_ITEM(g, 2));
        Py_XDECREF(dom);
        Py_DECREF(el);
        Py_DECREF(g);
        if (rc < 0)
            return NULL;
    }
    return PyLong_FromLongLong(total);
}

static PyObject *domain_setup(PyObject *self, PyObject *cls) { return attrs_setup(cls, dom_attr, D_N, &DomainT); }

/* Domain.frames_sent(peer_domain, n, peer) -- inline for the Domain class, its bookkeeping exactly:
 * sent_to[peer_domain] += n; without a batch, a peer of this domain goes into _local_rx. Any other class:
 * its method. */
static PyObject *s_holding, *s_pending, *s_send, *s_datagrams_sent;

/* frames_sent's second half (a Domain): a peer in this domain noted among those with frames to read */
static int frames_sent_local(PyObject *domain, PyObject *peer_domain, PyObject *peer);

static int frames_sent(PyObject *domain, PyObject *peer_domain, long n, PyObject *peer)
{
    if (DomainT == NULL || Py_TYPE(domain) != DomainT) {
        PyObject *r = PyObject_CallMethod(domain, "frames_sent", "OlO", peer_domain, n, peer);
        Py_XDECREF(r);
        return r == NULL ? -1 : 0;
    }
    if (add_attr_item(domain, D_SENT_TO, peer_domain, n, 1) < 0)
        return -1;
    return frames_sent_local(domain, peer_domain, peer);
}

static int frames_sent_local(PyObject *domain, PyObject *peer_domain, PyObject *peer)
{
    PyObject *batch = DOM_GET(domain, D_BATCH); /* (with a batch, _collect reads its socket: no _local_rx) */
    if (batch == NULL)
        return -1;
    Py_DECREF(batch);
    if (batch != Py_None)
        return 0;
    PyObject *index = DOM_GET(domain, D_INDEX);
    int same = index == NULL ? -1 : PyObject_RichCompareBool(peer_domain, index, Py_EQ);
    Py_XDECREF(index);
    if (same <= 0)
        return same;
    int rc = -1;
    PyObject *rx = DOM_GET(domain, D_LOCAL_RX), *by_name = NULL, *el = NULL;
    if (rx == NULL || (by_name = DOM_GET(domain, D_BY_NAME)) == NULL ||
        (el = PyObject_GetItem(by_name, peer)) == NULL)
        goto done;
    rc = PyObject_SetItem(rx, el, Py_None);
done:
    Py_XDECREF(rx);
    Py_XDECREF(by_name);
    Py_XDECREF(el);
    return rc;
}

#endif /* EMU_CSRC_DOMAIN_H */
