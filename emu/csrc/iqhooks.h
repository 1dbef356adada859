/* emu/csrc/iqhooks.h: the two callbacks the input-queued router's compiled round makes per grant, in
 * C when they are the element's own (part of emu/_core.c, one translation unit; used by csrc/iq.h):
 *
 *   iq_up_c          PortView.up(port, now) (emu.portview): the port's ``up``, for a port without a
 *                    schedule (a timeline: Python's)
 *   iq_credit_out_c  Element._credit_later(port, vc, n, at, pool, frames) (emu.element_flow.Flow): its
 *                    port event pushed (Flow._event: ``_pseq`` counted, the entry on ``pevents``)
 *
 * Each takes only the bound method of exactly those functions on an object of exactly that class
 * (Element: the one element_setup was given, its ``_event`` Flow's, none set on the object) and
 * declines before changing anything otherwise (the caller calls the method). */
#ifndef EMU_CSRC_IQHOOKS_H
#define EMU_CSRC_IQHOOKS_H

static PyObject *iq_inf; /* (INF, 1 << 62: one int, shared: never written in place, held here too; made by iq.h's iq_setup) */

/* the core's kept ints (csrc/common.h's iw_int_drop / iw_int_new), INF the shared one */
static inline void int_drop(PyObject *x) /* (the caller's reference) */
{
    iw_int_drop(x);
}

static inline PyObject *int_new(long long v)
{
    if (v == ((long long)1 << 62) && iq_inf != NULL)
        return Py_NewRef(iq_inf);
    return iw_int_new(v);
}

/* A new reference to one empty list, shared, for the compiled timer's and receive's results to
 * csrc/window.h's element window, which only reads an empty result's size and lets it go: no list made
 * and freed per call that granted nothing (most of a router's timers, every receive). Not tracked by
 * the collector (nobody else finds it); made again should it ever be found not empty. */
static PyObject *iq_empty;
static PyObject *iq_empty_list(void)
{
    if (iq_empty == NULL || PyList_GET_SIZE(iq_empty) != 0) {
        PyObject *l = PyList_New(0);
        if (l == NULL)
            return NULL;
        PyObject_GC_UnTrack(l);
        Py_XSETREF(iq_empty, l);
    }
    return Py_NewRef(iq_empty);
}

/* put_ll / set_ll (csrc/common.h) inlined for the router's slots and lists, and nothing written when the
 * slot holds an int of that value already (a reused copy's VC, a pointer that stays: most of its writes) */
static inline __attribute__((always_inline)) int iqr_put_ll(PyObject **slot, long long v)
{
    PyObject *o = *slot;
#if PY_VERSION_HEX < 0x030C0000
    if (o != NULL && PyLong_CheckExact(o) && v >= 0 && !(v >> PyLong_SHIFT)) {
        Py_ssize_t sz = Py_SIZE(o);
        if (sz == 0 ? v == 0 : (sz == 1 && ((PyLongObject *)o)->ob_digit[0] == (digit)v))
            return 0; /* (equal: as good as the int put_ll would put there) */
    }
#endif
    /* (else put_ll's work, a new int taken from the kept ones and the slot's old int kept for the next when
     * the slot's was its last reference (iw_put_ll): a packet's or copy's time reset to a shared 0 at its
     * reuse and written again at its grant makes and frees no int) */
    return iw_put_ll(slot, v);
}

static inline __attribute__((always_inline)) int iqr_set_ll(PyObject *obj, Py_ssize_t off, long long v)
{
    return iqr_put_ll(&SLOT(obj, off), v);
}

static PyTypeObject *PortViewT;
static PyObject *pv_up_fn, *fl_credit_later_fn, *fl_event_fn, *s_pseq, *s_event_name, *hk_credit_out;
static Py_ssize_t pv_el = -1;
static unsigned long long n_iq_hooks; /* (counts(): the callbacks taken here) */
static int hk_state = 0; /* 0 not looked up yet, 1 ready, -1 not available (Python's always) */
#if PY_VERSION_HEX < 0x030C0000
/* per element, its instance dict's ``_pseq`` int, kept while that dict's version tag is unchanged (no
 * ``_event`` of its own there either, as it was looked up: csrc/iqrecv.h's RX_KEEP) */
static struct { PyObject *el, *d, *seq; uint64_t ver; } hk_pc[1024];
#endif

static int hooks_init(void)
{
    if (hk_state)
        return hk_state > 0;
    hk_state = -1;
    PyObject *pv = PyImport_ImportModule("emu.portview"), *fl = PyImport_ImportModule("emu.element_flow");
    PyObject *pvc = pv ? PyObject_GetAttrString(pv, "PortView") : NULL, *flc = fl ? PyObject_GetAttrString(fl, "Flow") : NULL,
             *s_up = PyUnicode_InternFromString("up");
    int ok = pvc != NULL && flc != NULL && PyType_Check(pvc) && PyType_Check(flc) && credit_init() > 0 &&
             slot_offset((PyTypeObject *)pvc, "_el", &pv_el) == 0 &&
             s_up != NULL && (pv_up_fn = _PyType_Lookup((PyTypeObject *)pvc, s_up)) != NULL &&
             (fl_credit_later_fn = PyDict_GetItemString(((PyTypeObject *)flc)->tp_dict, "_credit_later")) != NULL &&
             (fl_event_fn = PyDict_GetItemString(((PyTypeObject *)flc)->tp_dict, "_event")) != NULL &&
             (hk_credit_out = PyLong_FromLongLong(CR_CREDIT_OUT)) != NULL &&
             (s_event_name = PyUnicode_InternFromString("_event")) != NULL &&
             (s_pseq = PyUnicode_InternFromString("_pseq")) != NULL;
    if (ok) {
        Py_INCREF(pv_up_fn);
        Py_INCREF(fl_credit_later_fn);
        Py_INCREF(fl_event_fn);
        PortViewT = (PyTypeObject *)Py_NewRef(pvc);
        hk_state = 1;
    }
    Py_XDECREF(pv);
    Py_XDECREF(fl);
    Py_XDECREF(pvc);
    Py_XDECREF(flc);
    Py_XDECREF(s_up);
    PyErr_Clear();
    return hk_state > 0;
}

/* ``up(o, at)`` for PortView.up's plain case: 1 up, 0 not, 2 not this case (call it), -1 error */
static int iq_up_c(PyObject *up, long long o, long long at)
{
    (void)at; /* (read by a port's timeline only: Python's) */
    if (Py_TYPE(up) != &PyMethod_Type || hooks_init() <= 0 || PyMethod_GET_FUNCTION(up) != pv_up_fn)
        return 2;
    PyObject *view = PyMethod_GET_SELF(up), *el, *outs, *p, *u;
    if (Py_TYPE(view) != PortViewT || (el = SLOT(view, pv_el)) == NULL || ElementT == NULL || Py_TYPE(el) != ElementT ||
        (outs = SLOT(el, el_attr[E_OUTS].off)) == NULL || !PyList_CheckExact(outs) || o < 0 || o >= PyList_GET_SIZE(outs))
        return 2;
    p = PyList_GET_ITEM(outs, o);
    if (p == Py_None)
        return n_iq_hooks++, 0;
    if (Py_TYPE(p) != OutPortT || ((u = SLOT(p, o_up)) != Py_True && u != Py_False))
        return 2;
    if (u == Py_True && SLOT(p, o_timeline) != Py_None)
        return 2;
    n_iq_hooks++;
    return u == Py_True;
}

/* the credit's (port, vc, n, pool, frames), a new reference: when every int is one of CPython's small
 * ints (-5..256, shared and never written), one tuple per such value kept and given again -- equal to
 * the one Python's ``_credit_later`` makes, which its readers only unpack -- instead of a tuple made and
 * freed per credit (per flit with ``credit_release=per_flit``) */
#define HK_OC 256
static struct { PyObject *t; long long port, vc, n, frames; int pool; } hk_oc[HK_OC];
static PyObject *hk_credit_obj(long long port, long long vc, long long n, int pool, long long frames)
{
    int small = port >= -5 && port <= 256 && vc >= -5 && vc <= 256 && n >= -5 && n <= 256 && frames >= -5 && frames <= 256;
    size_t h = (size_t)(((uint64_t)port * 0x9E3779B97F4A7C15ULL ^ (uint64_t)vc * 0xBF58476D1CE4E5B9ULL ^
                         (uint64_t)n * 0x94D049BB133111EBULL ^ (uint64_t)(frames * 2 + (pool != 0))) >> 56); /* (of HK_OC: 256) */
    if (small && hk_oc[h].t != NULL && hk_oc[h].port == port && hk_oc[h].vc == vc && hk_oc[h].n == n &&
        hk_oc[h].frames == frames && hk_oc[h].pool == (pool != 0))
        return Py_NewRef(hk_oc[h].t);
    PyObject *t = tuple_steal(5, (PyObject *[]){PyLong_FromLongLong(port), PyLong_FromLongLong(vc), PyLong_FromLongLong(n),
                                                Py_NewRef(pool ? Py_True : Py_False), PyLong_FromLongLong(frames)});
    if (t != NULL && small) {
        Py_XSETREF(hk_oc[h].t, Py_NewRef(t));
        hk_oc[h].port = port, hk_oc[h].vc = vc, hk_oc[h].n = n, hk_oc[h].frames = frames, hk_oc[h].pool = pool != 0;
    }
    return t;
}

/* ``credit_out(port, vc, n, at, pool, frames)`` for Element._credit_later's plain case: 0 done, 1 not
 * this case (call it), -1 error */
static int iq_credit_out_c(PyObject *co, long long port, long long vc, long long n, long long at, int pool,
                           long long frames)
{
    if (Py_TYPE(co) != &PyMethod_Type || hooks_init() <= 0 || PyMethod_GET_FUNCTION(co) != fl_credit_later_fn)
        return 1;
    PyObject *el = PyMethod_GET_SELF(co), **dp, *pev, *seq;
    long long sv;
    if (ElementT == NULL || Py_TYPE(el) != ElementT || _PyType_Lookup(ElementT, s_event_name) != fl_event_fn ||
        (dp = _PyObject_GetDictPtr(el)) == NULL || *dp == NULL || (pev = SLOT(el, el_attr[E_PEVENTS].off)) == NULL ||
        !PyList_CheckExact(pev))
        return 1;
#if PY_VERSION_HEX < 0x030C0000
    __typeof__(hk_pc[0]) *pc = &hk_pc[((uint64_t)(uintptr_t)el * 0x9E3779B97F4A7C15ULL) >> 54];
    PyObject *d = *dp;
    if (pc->el == el && pc->d == d && pc->ver == ((PyDictObject *)d)->ma_version_tag)
        seq = pc->seq; /* (the dict unchanged: no ``_event`` of its own, ``_pseq`` that object) */
    else
#endif
    if (PyDict_GetItemWithError(*dp, s_event_name) != NULL || (seq = PyDict_GetItemWithError(*dp, s_pseq)) == NULL) {
        PyErr_Clear();
        return 1;
    }
    if (!get_ll(seq, &sv)) {
        PyErr_Clear();
        return 1;
    }
    PyObject *ns = iw_int_new(sv + 1);
    if (ns == NULL)
        return -1;
    /* (self._pseq += 1: the dict's int written in place when it is the only reference to it, else an
     * int of its own stored there -- not the event's, nor the small-int cache's, so that the next one
     * can be written in place -- and an equal one in the event) */
    if (!count_in_place(seq, sv + 1)) {
        PyObject *own = own_int(sv + 1);
        int rc = own == NULL ? -1 : PyDict_SetItem(*dp, s_pseq, own);
        Py_XDECREF(own);
        if (rc < 0) {
            Py_DECREF(ns);
            return -1;
        }
        seq = own; /* (held by the dict) */
    }
#if PY_VERSION_HEX < 0x030C0000
    pc->el = el, pc->d = d, pc->seq = seq, pc->ver = ((PyDictObject *)d)->ma_version_tag;
#endif
    PyObject *obj = hk_credit_obj(port, vc, n, pool, frames);
    PyObject *e = iw_t4_new(iw_int_new(at), ns, Py_NewRef(hk_credit_out), obj); /* (kept by credit_out_c) */
    if (e == NULL)
        return -1;
    int rc = heap_push(pev, e);
    Py_DECREF(e);
    if (rc < 0)
        return -1;
    n_iq_hooks++;
    return 0;
}

#endif /* EMU_CSRC_IQHOOKS_H */
