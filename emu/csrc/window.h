/* emu/csrc/window.h: Domain._window's loop over its active elements, a static-table switch's window
 * whole (part of emu/_core.c, one translation unit) */
#ifndef EMU_CSRC_WINDOW_H
#define EMU_CSRC_WINDOW_H

static PyObject *s_timer, *s_stats, *s_plain_table, *s_run_window, *s_transmit_ports, *s_forwarded, *s_schedule,
    *s_min_delay_ns, *s_cut_through, *s_receive, *s_on_timer, *s_emit, *s_port_event, *s_arrive, *s_release;
static unsigned long long n_windows; /* static-table switch windows run whole here (counts()) */
static unsigned long long n_element_windows; /* other elements' windows of frames and timers run here */
static PyObject *w_inf; /* INF (emu.element_const), what ``due`` leaves in ``at`` */

static int window_init(void)
{
    struct { PyObject **s; const char *n; } names[] = {
        {&s_timer, "timer"}, {&s_stats, "stats"}, {&s_plain_table, "plain_table"}, {&s_run_window, "run_window"},
        {&s_transmit_ports, "_transmit_ports"}, {&s_forwarded, "forwarded"}, {&s_schedule, "schedule"},
        {&s_min_delay_ns, "min_delay_ns"}, {&s_cut_through, "cut_through"}, {&s_receive, "receive"},
        {&s_on_timer, "on_timer"}, {&s_emit, "_emit"}, {&s_port_event, "_port_event"}, {&s_arrive, "_arrive"},
        {&s_release, "_release"}};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
        if ((*names[k].s = PyUnicode_InternFromString(names[k].n)) == NULL)
            return -1;
    return (w_inf = PyLong_FromLongLong((long long)1 << 62)) == NULL ? -1 : 0;
}

/* Domain._run's first loop -- every entry of the domain's heap before t1 popped, its element's
 * ``at`` INF, the elements in the order of their first entry, each once:
 *     while heap and heap[0][0] < t1: i = heappop(heap)[1]; at[i] = INF; active[elements[i]] = None
 * due(heap, t1, at, elements) -> list(active). An entry's time that is not a plain int is compared
 * as Python compares it; anything else not laid out so (an entry not a (time, index) tuple, an index
 * out of range): TypeError, the heap as far as popped. */
static PyObject *due(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4 || !PyList_CheckExact(args[0]) || !PyList_CheckExact(args[2]) || !PyList_CheckExact(args[3])) {
        PyErr_SetString(PyExc_TypeError, "due(heap: list, t1, at: list, elements: list)");
        return NULL;
    }
    PyObject *heap = args[0], *t1o = args[1], *at = args[2], *els = args[3];
    long long t1 = 0, t; /* (t1 read only when t1_plain) */
    int t1_plain = get_ll(t1o, &t1);
    PyErr_Clear();
    Py_ssize_t n = PyList_GET_SIZE(els);
    if (PyList_GET_SIZE(at) != n) {
        PyErr_SetString(PyExc_TypeError, "emu._core.due: at and elements differ in length");
        return NULL;
    }
    PyObject *out = PyList_New(0);
    unsigned char small[256], *seen = n <= 256 ? small : PyMem_Calloc((size_t)n, 1);
    if (seen == NULL)
        PyErr_NoMemory();
    if (out == NULL || seen == NULL)
        goto fail;
    if (seen == small)
        memset(small, 0, (size_t)n);
    while (PyList_GET_SIZE(heap)) {
        PyObject *head = PyList_GET_ITEM(heap, 0);
        if (!PyTuple_CheckExact(head) || PyTuple_GET_SIZE(head) != 2) {
            PyErr_SetString(PyExc_TypeError, "emu._core.due: a heap entry is not (time, index)");
            goto fail;
        }
        int before;
        if (t1_plain && get_ll(PyTuple_GET_ITEM(head, 0), &t))
            before = t < t1;
        else {
            PyErr_Clear();
            PyObject *ht = Py_NewRef(PyTuple_GET_ITEM(head, 0));
            before = PyObject_RichCompareBool(ht, t1o, Py_LT);
            Py_DECREF(ht);
        }
        if (before < 0)
            goto fail;
        if (!before)
            break;
        PyObject *item = heap_pop(heap);
        if (item == NULL)
            goto fail;
        Py_ssize_t i = PyLong_CheckExact(PyTuple_GET_ITEM(item, 1)) ? PyLong_AsSsize_t(PyTuple_GET_ITEM(item, 1)) : -1;
        if (i < 0 || i >= n || PyList_GET_SIZE(at) != n || PyList_GET_SIZE(els) != n) {
            Py_DECREF(item);
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "emu._core.due: a heap entry's index is not an element's");
            goto fail;
        }
        if (PyList_SetItem(at, i, Py_NewRef(w_inf)) < 0) {
            Py_DECREF(item);
            goto fail;
        }
        hp_dom_keep(item); /* (after _at[i] let its time go: the int the entry's only, written in place next) */
        if (!seen[i]) {
            seen[i] = 1;
            if (PyList_Append(out, PyList_GET_ITEM(els, i)) < 0)
                goto fail;
        }
    }
    if (seen != small)
        PyMem_Free(seen);
    return out;
fail:
    if (seen != small)
        PyMem_Free(seen);
    Py_XDECREF(out);
    return NULL;
}

static int lookup_attr(PyObject *o, PyObject *name, PyObject **out)
{
#if PY_VERSION_HEX >= 0x030D0000
    return PyObject_GetOptionalAttr(o, name, out);
#else
    return _PyObject_LookupAttr(o, name, out);
#endif
}

/* o.<name> for a name some engines keep in a slot (an input-queued router's ``timer``): read at the
 * slot's offset when ``o``'s class (unchanged since: its version tag) has that slot -- a data
 * descriptor, which no instance attribute overrides -- and the generic getattr; else by name. A new
 * reference, or NULL with an error (AttributeError when unset, as PyObject_GetAttr). */
typedef struct {
    PyTypeObject *t; /* (borrowed: compared only, with its version tag) */
    unsigned int ver;
    Py_ssize_t off;
} SlotCache;

static PyObject *slot_attr(PyObject *o, PyObject *name, SlotCache *c)
{
    PyTypeObject *t = Py_TYPE(o);
    if (c->t != t || c->ver != t->tp_version_tag || !(t->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG)) {
        c->t = NULL;
        PyObject *d = _PyType_Lookup(t, name); /* (assigns the class its version tag) */
        if (d != NULL && t->tp_getattro == PyObject_GenericGetAttr && (t->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG) &&
            Py_IS_TYPE(d, &PyMemberDescr_Type) && ((PyMemberDescrObject *)d)->d_member->type == T_OBJECT_EX &&
            ((PyMemberDescrObject *)d)->d_common.d_type == t)
            c->t = t, c->ver = t->tp_version_tag, c->off = ((PyMemberDescrObject *)d)->d_member->offset;
    }
    if (c->t == t) {
        PyObject *v = SLOT(o, c->off);
        if (v != NULL)
            return Py_NewRef(v);
    }
    return PyObject_GetAttr(o, name);
}

static SlotCache sc_timer;

/* lookup_attr(o, name, out) for a name o's class (version tag unchanged since) does not have at all,
 * or has as a plain value (no descriptor: SwitchEngine's ``plain_table = None``), with the generic
 * getattr: the instance dict's entry, else that class value -- the generic getattr's answer without
 * its class lookup and the AttributeError of a miss (an input-queued router's or a NIC's cut_through,
 * plain_table); anything else by lookup_attr. 1 found (*out a new reference), 0 not there, -1 error. */
#define MC_SEEN 1024 /* (a power of two, two ways: well above the engines of a run -- 256 of one way had two of an 8x8
                      * mesh's 128 share an entry, each looked up again at every window) */
typedef struct {
    PyTypeObject *t; /* (borrowed: compared only, with its version tag) */
    unsigned int ver;
    PyObject *cv; /* the class's value, NULL: none (borrowed: its class dict holds it while the tag stands) */
    /* an instance dict's entry by the dict's address and version (CPython 3.11: a new version with every
     * change of a dict, and for every new dict): while both stand, the entry (v, borrowed; NULL: none)
     * is what a lookup finds -- one lookup of an engine's dict per window no more */
    struct { PyObject *d, *v; uint64_t ver; } seen[MC_SEEN];
    /* an instance dict as its class's __init__ made it (the class's shared keys), changed since (its
     * version changes with every write of any of its fields): the entry at the name's index in those
     * keys, found once (common.h's h2_split_values), not looked up again */
    h2_split_t split;
} MissCache;

static int lookup_missing(PyObject *o, PyObject *name, MissCache *c, PyObject **out)
{
    PyTypeObject *t = Py_TYPE(o);
    *out = NULL;
    if (c->t != t || c->ver != t->tp_version_tag || !(t->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG)) {
        c->t = NULL;
        PyObject *d = _PyType_Lookup(t, name); /* (assigns the class its version tag) */
        if (!PyErr_Occurred() && (d == NULL || Py_TYPE(d)->tp_descr_get == NULL) &&
            t->tp_getattro == PyObject_GenericGetAttr && (t->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG))
            c->t = t, c->ver = t->tp_version_tag, c->cv = d;
        PyErr_Clear();
    }
    if (c->t != t)
        return lookup_attr(o, name, out);
    PyObject **dp = _PyObject_GetDictPtr(o), *v;
    if (dp == NULL) { /* (no dict to read, or it could not be made: by name) */
        PyErr_Clear();
        return lookup_attr(o, name, out);
    }
#if PY_VERSION_HEX < 0x030C0000
    if (*dp != NULL && PyDict_CheckExact(*dp)) {
        PyObject *d = *dp;
        uint64_t ver = ((PyDictObject *)d)->ma_version_tag;
        size_t h = (size_t)((uint64_t)(uintptr_t)d * 0x9E3779B97F4A7C15ULL >> 54); /* (of MC_SEEN: 1024) */
        h = way2(h, c->seen[h].d, c->seen[h ^ 1].d, d);
        if (c->seen[h].d != d || c->seen[h].ver != ver || !ver) {
            if (!h2_split_values(&c->split, t, d, &name, 1, &v) && /* (else looked up: no Python code, */
                (v = PyDict_GetItemWithError(d, name)) == NULL && PyErr_Occurred()) /* name an exact str) */
                return -1;
            c->seen[h].d = d, c->seen[h].v = v, c->seen[h].ver = ver; /* (as read before: changed since, looked up again) */
        }
        if ((v = c->seen[h].v) != NULL) {
            *out = Py_NewRef(v);
            return 1;
        }
    } else
#endif
    if (*dp != NULL && (v = PyDict_GetItemWithError(*dp, name)) != NULL) {
        *out = Py_NewRef(v);
        return 1;
    }
    if (PyErr_Occurred())
        return -1;
    if (c->cv == NULL)
        return 0; /* (no instance attribute, no class value) */
    *out = Py_NewRef(c->cv);
    return 1;
}

static MissCache mc_plain_table, mc_cut_through, mc_min_delay_ns, mc_timer, mc_stats;

/* o.<name>, found by lookup_missing when the class lets it (else by name): a new reference, or NULL
 * with an error (the AttributeError of a miss, as PyObject_GetAttr) */
static PyObject *missing_attr(PyObject *o, PyObject *name, MissCache *c)
{
    PyObject *out;
    int got = lookup_missing(o, name, c, &out);
    return got > 0 ? out : got < 0 ? NULL : PyObject_GetAttr(o, name);
}

/* eng.timer: in its slot (slot_attr), or -- an engine whose class has no slot for it (a switch's
 * dataclass field, in its instance dict) -- missing_attr's, the class known not to have one while
 * its version tag stands (sc_timer_not) */
static struct { PyTypeObject *t; unsigned int ver; } sc_timer_not;

static PyObject *engine_timer(PyObject *eng)
{
    PyTypeObject *t = Py_TYPE(eng);
    if (sc_timer_not.t == t && sc_timer_not.ver == t->tp_version_tag && (t->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG))
        return missing_attr(eng, s_timer, &mc_timer);
    PyObject *v = slot_attr(eng, s_timer, &sc_timer);
    if (v != NULL && sc_timer.t != t && (t->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG)) /* (not a slot) */
        sc_timer_not.t = t, sc_timer_not.ver = t->tp_version_tag;
    return v;
}

/* *t lowered to the time of ``seq``'s first entry less ``sub``, if it has one: 0, 1 (an entry this
 * code does not read: Python's), -1 (error) */
static inline int lower_to_head(PyObject *seq, int field, long long sub, long long *t)
{
    if (seq != NULL && (PyList_CheckExact(seq) || Py_TYPE(seq) == DequeT) && Py_SIZE(seq) == 0)
        return 0; /* (empty, read here: most of an element's lists and a port's credits, most times) */
    long long v;
    int h = head_time(seq, field, &v);
    if (h == 1 && v - sub < *t)
        *t = v - sub;
    return h < 0 ? -1 : h == 2;
}

/* Element.next_time, read in place: 0 (*t), 1 (something else than it reads: Python's), -1 (error) */
static int next_time_in(PyObject *el, long long *t_out)
{
    PyObject *heap = EL_GET(el, E_HEAP), *le = NULL, *eng = NULL, *tt = NULL, *pev = NULL, *la = NULL,
             *busy = NULL;
    int rc = -1;
    long long t = (long long)1 << 62, v, look;
    if (heap == NULL || (le = EL_GET(el, E_LINK_EVENTS)) == NULL || (eng = EL_GET(el, E_ENGINE)) == NULL ||
        (tt = engine_timer(eng)) == NULL || (pev = EL_GET(el, E_PEVENTS)) == NULL ||
        (la = EL_GET(el, E_LOOKAHEAD)) == NULL || (busy = EL_GET(el, E_BUSY)) == NULL)
        goto done;
    rc = 1;
    if (!PyList_CheckExact(heap) || !PyList_CheckExact(le) || !PyList_CheckExact(pev) || !PyDict_CheckExact(busy) ||
        !get_ll(la, &look))
        goto done;
    PyObject *lists[] = {heap, le, pev};
    for (int k = 0; k < 3; k++)
        if ((rc = lower_to_head(lists[k], 0, 0, &t)) != 0)
            goto done;
    rc = 1;
    if (tt != Py_None) {
        if (!get_ll(tt, &v))
            goto done;
        if (v < t)
            t = v;
    }
    Py_ssize_t pos = 0;
    PyObject *p, *unused;
    while (iw_dict_next(busy, &pos, &p, &unused)) {
        if (Py_TYPE(p) != OutPortT) {
            rc = 1;
            goto done;
        }
        if ((rc = lower_to_head(SLOT(p, o_pending), 1, look, &t)) != 0 ||
            (rc = lower_to_head(SLOT(p, o_ctl), 1, look, &t)) != 0)
            goto done;
    }
    *t_out = t;
    rc = 0;
done:
    if (rc == 1)
        PyErr_Clear();
    Py_XDECREF(heap);
    Py_XDECREF(le);
    Py_XDECREF(eng);
    Py_XDECREF(tt);
    Py_XDECREF(pev);
    Py_XDECREF(la);
    Py_XDECREF(busy);
    return rc;
}

static int call_ll(PyObject *r, long long *v, const char *what)
{
    if (r == NULL)
        return -1;
    int ok = get_ll(r, v);
    Py_DECREF(r);
    if (!ok && !PyErr_Occurred())
        PyErr_Format(PyExc_TypeError, "emu._core.window: %s is not an integer time", what);
    return ok ? 0 : -1;
}

/* Element._transmit after a window (its capture None): the busy ports' frames due before
 * t1 + lookahead into this process's heaps or its batch (transmit_into), the rest by
 * Element._transmit_ports; the earliest arrival in *fa. 0, or -1 with an error. */
static int el_transmit(PyObject *el, PyObject *busy, long long t1, PyObject *w, PyObject *domain, long long *fa)
{
    PyObject *la = NULL, *drop = NULL, *stats = NULL, *batch = NULL, *others = NULL;
    int rc = -1;
    long long look, first;
    if ((la = EL_GET(el, E_LOOKAHEAD)) == NULL || !get_ll(la, &look) ||
        (drop = EL_GET(el, E_DROP_RATE)) == NULL || (stats = EL_GET(el, E_STATS)) == NULL)
        goto done;
    int dropping = PyFloat_CheckExact(drop) ? PyFloat_AS_DOUBLE(drop) != 0.0 : PyObject_IsTrue(drop);
    if (dropping < 0)
        goto done;
    if (dropping)
        batch = Py_NewRef(Py_None);
    else if ((batch = EL_GET(el, E_BATCH)) == NULL)
        goto done;
    if (transmit_into(busy, t1 + look, w, domain, batch, stats, &first, &others) < 0)
        goto done;
    if (others != NULL && PyList_GET_SIZE(others)) { /* what the core left: Element._transmit_ports */
        PyObject *rel = PyLong_FromLongLong(t1 + look), *f = PyLong_FromLongLong(first);
        PyObject *r = rel == NULL || f == NULL ? NULL
                                               : PyObject_CallMethodObjArgs(el, s_transmit_ports, others, f, rel, w, NULL);
        Py_XDECREF(rel);
        Py_XDECREF(f);
        if (call_ll(r, &first, "_transmit_ports") < 0)
            goto done;
    }
    *fa = first;
    rc = 0;
done:
    if (rc < 0 && !PyErr_Occurred())
        PyErr_SetString(PyExc_TypeError, "emu._core.window: an element is not what it was");
    Py_XDECREF(la);
    Py_XDECREF(drop);
    Py_XDECREF(stats);
    Py_XDECREF(batch);
    Py_XDECREF(others);
    return rc;
}

/* Element.run_window's last lines: ``self.safe_time = t_end``, then Element._transmit if a port is
 * busy (el_transmit), else no arrival (INF in *fa). 0, or -1 with an error. */
static int window_end(PyObject *el, PyObject *busy, long long t1, PyObject *w, PyObject *domain, long long *fa)
{
    int bad;
    if (Py_TYPE(el) == ElementT) /* (its slot's int written in place when nobody else holds it, else a kept one) */
        bad = iw_put_ll(&SLOT(el, el_attr[E_SAFE_TIME].off), t1) < 0;
    else {
        PyObject *st = PyLong_FromLongLong(t1);
        bad = st == NULL || EL_SET(el, E_SAFE_TIME, st) < 0;
        Py_XDECREF(st);
    }
    int anybusy = bad ? -1 : PyDict_CheckExact(busy) ? PyDict_GET_SIZE(busy) > 0 : PyObject_IsTrue(busy);
    if (anybusy < 0)
        return -1;
    *fa = (long long)1 << 62;
    return anybusy ? el_transmit(el, busy, t1, w, domain, fa) : 0;
}

/* A static-table switch's whole window (Element.run_window when only frames can be due, then
 * Element._transmit): 0 done (its first arrival in *fa), 1 not this case or frames left that Python
 * must take (nothing else changed: Python's run_window goes on from here), 2 not a static-table
 * switch now (nothing done), -1 error */
static int switch_window(PyObject *el, PyObject *eng, long long t1, PyObject *w, PyObject *domain, long long *fa)
{
    PyObject *plain = NULL, *le = NULL, *pev = NULL, *tt = NULL, *cap = NULL, *fwd = NULL, *heap = NULL, *ins = NULL,
             *outs = NULL, *busy = NULL, *estats = NULL;
    int rc = -1;
    if (lookup_missing(eng, s_plain_table, &mc_plain_table, &plain) < 0)
        return -1;
    if (plain == NULL || plain == Py_None) { /* (not a static table now: the engine's window, element_window) */
        Py_XDECREF(plain);
        return 2;
    }
    if ((le = EL_GET(el, E_LINK_EVENTS)) == NULL || (pev = EL_GET(el, E_PEVENTS)) == NULL ||
        (tt = engine_timer(eng)) == NULL || (cap = EL_GET(el, E_CAPTURE)) == NULL)
        goto done;
    rc = 1;
    if (!PyList_CheckExact(le) || PyList_GET_SIZE(le) || !PyList_CheckExact(pev) || PyList_GET_SIZE(pev) ||
        tt != Py_None || cap != Py_None)
        goto done;
    fwd = Py_NewRef(plain); /* eng.plain_table: (routes, delay, held) or None, kept by the engine (switch/forward.py) */
    rc = 2; /* (not a static table now: nothing done) */
    if (!PyTuple_CheckExact(fwd) || PyTuple_GET_SIZE(fwd) != 3)
        goto done;
    int held = PyObject_IsTrue(PyTuple_GET_ITEM(fwd, 2)); /* (ports out of service: receive decides) */
    if (held) {
        rc = held < 0 ? -1 : 2;
        goto done;
    }
    rc = 1;
    long long delay;
    if (!get_ll(PyTuple_GET_ITEM(fwd, 1), &delay))
        goto done;
    rc = -1;
    if ((heap = EL_GET(el, E_HEAP)) == NULL || (ins = EL_GET(el, E_INS)) == NULL ||
        (outs = EL_GET(el, E_OUTS)) == NULL || (busy = EL_GET(el, E_BUSY)) == NULL)
        goto done;
    long n;
    long long now;
    if (forward_into(heap, t1, ins, outs, busy, PyTuple_GET_ITEM(fwd, 0), delay, &n, &now) < 0)
        goto done;
    if (n) { /* self.now = self.active_ns = last; eng.stats["forwarded"] += n */
        PyObject *nv = PyLong_FromLongLong(now);
        int bad = nv == NULL || EL_SET(el, E_NOW, nv) < 0 || EL_SET(el, E_ACTIVE_NS, nv) < 0;
        Py_XDECREF(nv);
        if (bad || (estats = missing_attr(eng, s_stats, &mc_stats)) == NULL ||
            dict_add(estats, s_forwarded, n, 0, "a switch's stats['forwarded']") < 0)
            goto done;
    }
    long long head;
    int h = head_time(heap, 0, &head);
    if (h < 0)
        goto done;
    rc = 1;
    if (h == 2 || (h == 1 && head < t1))
        goto done; /* a frame the core left: Python's run_window takes it (and whatever follows) */
    rc = -1;
    if (window_end(el, busy, t1, w, domain, fa) < 0)
        goto done;
    n_windows++;
    rc = 0;
done:
    if (rc == -1 && !PyErr_Occurred())
        PyErr_SetString(PyExc_TypeError, "emu._core.window: an element is not what it was");
    Py_XDECREF(plain);
    Py_XDECREF(le);
    Py_XDECREF(pev);
    Py_XDECREF(tt);
    Py_XDECREF(cap);
    Py_XDECREF(fwd);
    Py_XDECREF(heap);
    Py_XDECREF(ins);
    Py_XDECREF(outs);
    Py_XDECREF(busy);
    Py_XDECREF(estats);
    return rc;
}

/* Element.run_window for an element whose window holds only frames and engine timers (no link
 * change, no port event, no capture) -- any engine: its receive and on_timer called in the order
 * run_window calls them (a timer before a frame at the same time), what they return given to
 * Element._emit, then Element._transmit. As soon as anything else is due (a port event, a link
 * change, a frame that is not plainly good: damaged, link control, a port with a timeline or a
 * buffer), Python's run_window goes on from there (it takes the events of a window in order from
 * any state). 0 done (the first arrival in *fa), 1 Python's, -1 error. */
static int element_window(PyObject *el, PyObject *eng, long long t1, PyObject *w, PyObject *domain, long long *fa)
{
    if (Py_TYPE(el) != ElementT)
        return 1;
    PyObject *heap = SLOT(el, el_attr[E_HEAP].off), *ins = SLOT(el, el_attr[E_INS].off),
             *le = SLOT(el, el_attr[E_LINK_EVENTS].off), *pev = SLOT(el, el_attr[E_PEVENTS].off),
             *cap = SLOT(el, el_attr[E_CAPTURE].off);
    if (heap == NULL || ins == NULL || le == NULL || pev == NULL || cap != Py_None || !PyList_CheckExact(heap) ||
        !PyList_CheckExact(ins) || !PyList_CheckExact(le) || !PyList_CheckExact(pev))
        return 1;
    Py_INCREF(heap); /* (held: the callbacks below run Python code) */
    Py_INCREF(ins);
    Py_INCREF(le);
    Py_INCREF(pev);
    PyObject *md = NULL, *cut = NULL, *tt = NULL, *busy = NULL;
    int rc = -1;
    long long now;
    if (Py_TYPE(eng) == NicT)
        md = NIC_GET(eng, N_MIN_DELAY_NS);
    else { /* (an instance attribute of a switch's engine: its dict's entry, lookup_missing) */
        int got = lookup_missing(eng, s_min_delay_ns, &mc_min_delay_ns, &md);
        if (got == 0)
            PyErr_SetObject(PyExc_AttributeError, s_min_delay_ns);
    }
    if (md == NULL || lookup_missing(eng, s_cut_through, &mc_cut_through, &cut) < 0)
        goto done;
    if (cut == NULL)
        cut = Py_NewRef(Py_False);
    long long mdv; /* (-1: emitted frames all to Python's _emit) */
    if (!get_ll(md, &mdv))
        mdv = -1;
    for (;;) {
        rc = 1;
        if (PyList_GET_SIZE(le) || SLOT(el, el_attr[E_CAPTURE].off) != Py_None ||
            SLOT(el, el_attr[E_HEAP].off) != heap || SLOT(el, el_attr[E_INS].off) != ins ||
            SLOT(el, el_attr[E_LINK_EVENTS].off) != le || SLOT(el, el_attr[E_PEVENTS].off) != pev ||
            !get_ll(SLOT(el, el_attr[E_NOW].off), &now))
            goto done; /* (something else is due now: Python's run_window) */
        Py_XSETREF(tt, Py_TYPE(eng) == NicT ? NIC_GET(eng, N_TIMER) : engine_timer(eng));
        rc = -1;
        if (tt == NULL)
            goto done;
        long long th = (long long)1 << 62, ttv = 0;
        PyObject *head = PyList_GET_SIZE(heap) ? PyList_GET_ITEM(heap, 0) : NULL;
        rc = 1;
        if ((tt != Py_None && !get_ll(tt, &ttv)) ||
            (head != NULL && (!PyTuple_CheckExact(head) || PyTuple_GET_SIZE(head) != 5 ||
                              !get_ll(PyTuple_GET_ITEM(head, 0), &th))))
            goto done;
        PyObject *result, *token = NULL;
        if (PyList_GET_SIZE(pev)) { /* a port event first, at its time or before the timer's and the frame's */
            PyObject *ph = PyList_GET_ITEM(pev, 0);
            long long tp;
            if (!PyTuple_CheckExact(ph) || PyTuple_GET_SIZE(ph) < 1 || !get_ll(PyTuple_GET_ITEM(ph, 0), &tp))
                goto done; /* (a time it does not read: Python's) */
            if (tp <= th && (tt == Py_None || tp <= ttv)) {
                if (tp >= t1)
                    break;
                rc = -1;
                int c = credit_out_c(el, pev, ph); /* a credit built before, here; any other: Element._port_event */
                if (c == 0)
                    c = wake_event_c(el, pev, ph); /* (a port's WAKE: csrc/hostflow.h) */
                if (c < 0)
                    goto done;
                if (c == 0) {
                    PyObject *r = PyObject_CallMethodNoArgs(el, s_port_event);
                    if (r == NULL)
                        goto done;
                    Py_DECREF(r);
                }
                continue;
            }
        }
        if (tt != Py_None && ttv <= th) { /* Element._fire_timer */
            if (ttv >= t1)
                break;
            if (ttv < now)
                goto done; /* (Python's: it refuses it) */
            rc = -1;
            if (EL_SET(el, E_NOW, tt) < 0 || EL_SET(el, E_ACTIVE_NS, tt) < 0)
                goto done;
            int nt = nic_on_timer(eng, tt, &result); /* a host NIC's here, any other engine's method */
            if (nt == 1)
                nt = iq_on_timer(eng, tt, &result); /* (an input-queued router's plain case: csrc/iqtimer.h) */
            if (nt == 1)
                result = PyObject_CallMethodOneArg(eng, s_on_timer, tt); /* (asked as it fires, as _fire_timer does) */
            else if (nt < 0)
                result = NULL;
        } else { /* a frame: Element._arrive's plain case */
            if (head == NULL || th >= t1)
                break;
            long long port, kind;
            PyObject *wire;
            if (!plain_arrival(head, ins, &port, &kind, &wire) || (!(kind & C_NOFCS) && PyBytes_GET_SIZE(wire) < 4)) {
                /* damaged, link control, a port's buffer or timeline: the port's (Element._arrive), then the
                 * engine's receive of what it hands on, as run_window's general loop does */
                PyErr_Clear();
                rc = -1;
                int c = credit_in_c(el, eng, head, ins); /* a credit: Flow._credit_arrived's plain case here */
                if (c < 0)
                    goto done;
                if (c == 1)
                    continue;
                PyObject *arrived = PyObject_CallMethodNoArgs(el, s_arrive);
                if (arrived == NULL)
                    goto done;
                if (arrived == Py_None) {
                    Py_DECREF(arrived);
                    continue;
                }
                PyObject *nw = EL_GET(el, E_NOW);
                if (nw == NULL || !PyTuple_CheckExact(arrived) || PyTuple_GET_SIZE(arrived) != 3) {
                    Py_XDECREF(nw);
                    Py_DECREF(arrived);
                    goto done;
                }
                token = Py_NewRef(PyTuple_GET_ITEM(arrived, 2));
                result = PyObject_CallMethodObjArgs(eng, s_receive, PyTuple_GET_ITEM(arrived, 0),
                                                    PyTuple_GET_ITEM(arrived, 1), nw, NULL);
                Py_DECREF(nw);
                Py_DECREF(arrived);
                if (result == NULL) {
                    Py_DECREF(token);
                    goto done;
                }
                if (token == Py_None)
                    Py_CLEAR(token);
                goto emit;
            }
            Py_ssize_t wlen = PyBytes_GET_SIZE(wire);
            const unsigned char *b = (const unsigned char *)PyBytes_AS_STRING(wire);
            rc = -1;
            PyObject *item = heap_pop(heap);
            if (item == NULL)
                goto done;
            PyObject *t = PyTuple_GET_ITEM(item, 0), *pt = PyTuple_GET_ITEM(item, 1);
            PyObject *frame;
            if (kind & C_NOFCS)
                frame = Py_NewRef(wire);
            else if (item == head && Py_REFCNT(item) == 1 && Py_REFCNT(wire) == 1 && PyBytes_CheckExact(wire) &&
                     wlen >= 6) { /* the received frame nobody else's (not captured, not retained): its FCS
                                   * cut off in its own bytes (a copy otherwise) */
                frame = Py_NewRef(wire);
                Py_SET_SIZE(frame, wlen - 4);
                ((PyBytesObject *)frame)->ob_sval[wlen - 4] = '\0';
                bytes_hash_stale(frame);
            } else
                frame = PyBytes_FromStringAndSize((const char *)b, wlen - 4);
            int bad = frame == NULL || EL_SET(el, E_NOW, t) < 0 || EL_SET(el, E_ACTIVE_NS, t) < 0;
            result = NULL;
            if (!bad) { /* a host NIC's one-frame message here, anything else by the engine's receive */
                int nr = nic_receive(eng, frame, t, &result);
                if (nr == 1) { /* (an input-queued router's compiled receive: csrc/iqtimer.h; the references to the frame
                                * that are this loop's own -- its variable, and the popped record's when it is that
                                * record's frame -- told, so that a frame nobody else holds may be the next hop's) */
                    int own = Py_REFCNT(item) != 1 ? 0 : frame == PyTuple_GET_ITEM(item, 3) ? 2 : 1;
                    nr = iq_on_receive(eng, frame, pt, t, &result, own);
                }
                if (nr == 1)
                    result = PyObject_CallMethodObjArgs(eng, s_receive, frame, pt, t, NULL);
            }
            Py_XDECREF(frame);
            hp_rec_keep(item); /* (its frame let go: the engine's, if it kept it) */
        }
        rc = -1;
        if (result == NULL)
            goto done;
    emit:;
        int any = PyList_CheckExact(result) ? PyList_GET_SIZE(result) > 0 : PyObject_IsTrue(result);
        if (any > 0 && token != NULL) { /* a frame that holds its input buffer: Python's _emit counts on it */
            PyObject *r = PyObject_CallMethodObjArgs(el, s_emit, result, token, md, cut, NULL);
            Py_DECREF(result);
            if (r == NULL) {
                Py_DECREF(token);
                goto done;
            }
            Py_DECREF(r);
            any = 0;
            result = Py_NewRef(Py_None);
        }
        if (token != NULL) { /* consumed here, or dropped: the buffer is free now (run_window's last lines) */
            PyObject *cnt = PyList_CheckExact(token) && PyList_GET_SIZE(token) == 5 ? PyList_GET_ITEM(token, 4) : NULL;
            long long cv;
            int bad = cnt == NULL || !get_ll(cnt, &cv);
            if (!bad && cv == 0) {
                PyObject *r = PyList_SetItem(token, 4, PyLong_FromLong(1)) < 0 ? NULL
                              : PyObject_CallMethodOneArg(el, s_release, token);
                bad = r == NULL;
                Py_XDECREF(r);
            }
            Py_DECREF(token);
            if (bad) {
                Py_DECREF(result);
                goto done;
            }
        }
        if (any > 0 && PyList_CheckExact(result) && mdv >= 0) { /* Element._emit: the plain frames here */
            PyObject *outs = SLOT(el, el_attr[E_OUTS].off), *busy_ = SLOT(el, el_attr[E_BUSY].off);
            long long nowv;
            Py_ssize_t k = outs == NULL || busy_ == NULL || !get_ll(SLOT(el, el_attr[E_NOW].off), &nowv)
                               ? 0 : emit_into(outs, busy_, result, nowv, mdv);
            if (k >= 0 && k < PyList_GET_SIZE(result)) /* (a port with credit flow: csrc/hostflow.h) */
                k = emit_rest(el, outs, busy_, result, k, nowv, mdv);
            if (k < 0) {
                Py_DECREF(result);
                goto done;
            }
            if (k == PyList_GET_SIZE(result))
                any = 0;
            else if (k > 0) { /* (the rest to Python's) */
                PyObject *rest = PyList_GetSlice(result, k, PyList_GET_SIZE(result));
                Py_SETREF(result, rest);
                if (result == NULL)
                    goto done;
            }
        }
        PyObject *r = any > 0 ? PyObject_CallMethodObjArgs(el, s_emit, result, Py_None, md, cut, NULL) : NULL;
        iw_list_keep(result); /* (kept for the next round's frames when this was its last holder) */
        if (any < 0 || (any > 0 && r == NULL))
            goto done;
        Py_XDECREF(r);
    }
    rc = -1;
    if ((busy = EL_GET(el, E_BUSY)) == NULL || window_end(el, busy, t1, w, domain, fa) < 0)
        goto done;
    n_element_windows++;
    rc = 0;
done:
    if (rc == -1 && !PyErr_Occurred())
        PyErr_SetString(PyExc_TypeError, "emu._core.window: an element is not what it was");
    if (rc == 1)
        PyErr_Clear();
    Py_XDECREF(md);
    Py_XDECREF(cut);
    Py_XDECREF(tt);
    Py_XDECREF(busy);
    Py_DECREF(heap);
    Py_DECREF(ins);
    Py_DECREF(le);
    Py_DECREF(pev);
    return rc;
}

/* One element's part of Domain._window after its run: the earliest arrival, ``sent``, the domain's
 * max_time; then -- unless it has datagrams waiting for room (1: the caller flushes and schedules
 * it) -- its next event into the domain's heap (Domain.schedule). 0 done, -1 error. */
static int after_run(PyObject *domain, PyObject *el, long long fa, PyObject *sent)
{
    if (fa < ((long long)1 << 62) && PyList_Append(sent, el) < 0)
        return -1;
    PyObject *a = EL_GET(el, E_ACTIVE_NS), *l = NULL, *m = NULL, *unsent = NULL;
    int rc = -1;
    long long an, lu, mt;
    if (a == NULL || (l = EL_GET(el, E_LOST_UNTIL)) == NULL || (m = DOM_GET(domain, D_MAX_TIME)) == NULL ||
        !get_ll(a, &an) || !get_ll(l, &lu) || !get_ll(m, &mt))
        goto done;
    if ((an > lu ? an : lu) > mt && DOM_SET(domain, D_MAX_TIME, an > lu ? a : l) < 0)
        goto done;
    if ((unsent = EL_GET(el, E_UNSENT)) == NULL)
        goto done;
    int waiting = PyObject_IsTrue(unsent);
    if (waiting) {
        rc = waiting < 0 ? -1 : 1;
        goto done;
    }
    long long t;
    int h = next_time_in(el, &t);
    if (h < 0)
        goto done;
    if (h == 1) { /* a time it does not read in place: Domain.schedule itself (Element.next_time) */
        PyObject *r = PyObject_CallMethodOneArg(domain, s_schedule, el);
        Py_XDECREF(r);
        rc = r == NULL ? -1 : 0;
        goto done;
    }
    rc = frames_due(domain, el, t) < 0 ? -1 : 0; /* (Domain.schedule: frames_arrived's heap entry) */
done:
    if (rc == -1 && !PyErr_Occurred())
        PyErr_SetString(PyExc_TypeError, "emu._core.window: an element's times are not integers");
    Py_XDECREF(a);
    Py_XDECREF(l);
    Py_XDECREF(m);
    Py_XDECREF(unsent);
    return rc;
}

/* Domain._window's loop from active[k] on: each element's run_window (a static-table switch's whole
 * window here), then after_run. Returns (the index it stopped at -- len(active), or an element
 * whose datagrams wait for room: the caller flushes it, schedules it and goes on after it --, the
 * earliest arrival sent). */
static PyObject *window(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "window(domain, active, k, t1, w, link_end, sent)");
        return NULL;
    }
    PyObject *domain = args[0], *active = args[1], *w = args[4], *link_end = args[5], *sent = args[6];
    long long k, t1, first = (long long)1 << 62;
    if (!ready || DomainT == NULL || Py_TYPE(domain) != DomainT || !PyList_CheckExact(active) ||
        !PyList_CheckExact(sent) || !get_ll(args[2], &k) || !get_ll(args[3], &t1) || k < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "emu._core.window: bad arguments");
        return NULL;
    }
    for (; k < PyList_GET_SIZE(active); k++) {
        PyObject *el = Py_NewRef(PyList_GET_ITEM(active, k)), *eng = EL_GET(el, E_ENGINE);
        long long fa;
        int rc = eng == NULL ? -1 : (switch_ready ? switch_window(el, eng, t1, w, domain, &fa) : 2);
        if (rc == 2)
            rc = element_window(el, eng, t1, w, domain, &fa);
        Py_XDECREF(eng);
        if (rc == 1) {
            PyObject *t = PyLong_FromLongLong(t1);
            PyObject *r = t == NULL ? NULL : PyObject_CallMethodObjArgs(el, s_run_window, t, w, link_end, NULL);
            Py_XDECREF(t);
            rc = call_ll(r, &fa, "run_window");
        }
        if (rc == 0) {
            if (fa < first)
                first = fa;
            rc = after_run(domain, el, fa, sent);
        }
        Py_DECREF(el);
        if (rc < 0)
            return NULL;
        if (rc == 1)
            break;
    }
    return Py_BuildValue("(LL)", k, first);
}

#endif /* EMU_CSRC_WINDOW_H */
