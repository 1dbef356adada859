/* emu/csrc/attrs.h: the attributes of an Element and a Domain the core reads and writes -- in place,
 * at their __slots__' offsets (read by element_setup / domain_setup), when the object is of exactly
 * that class; by name otherwise (part of emu/_core.c, one translation unit) */
#ifndef EMU_CSRC_ATTRS_H
#define EMU_CSRC_ATTRS_H

typedef struct {
    const char *name;
    PyObject *s;    /* the interned name */
    Py_ssize_t off; /* the slot's offset in an instance of the class given at setup */
} Attr;

enum { E_HEAP, E_INS, E_OUTS, E_BUSY, E_LINK_EVENTS, E_PEVENTS, E_CAPTURE, E_ENGINE, E_NOW, E_ACTIVE_NS, E_SAFE_TIME,
       E_LOOKAHEAD, E_LOST_UNTIL, E_UNSENT, E_BATCH, E_DROP_RATE, E_STATS, E_DOMAIN, E_OUT_PORTS,
       E_MAC, E_IQ, E_N };
static Attr el_attr[E_N] = {{"heap"}, {"ins"}, {"outs"}, {"busy"}, {"link_events"}, {"pevents"}, {"capture"},
                            {"engine"}, {"now"}, {"active_ns"}, {"safe_time"}, {"lookahead"}, {"lost_until"},
                            {"unsent"}, {"batch"}, {"_drop_rate"}, {"stats"}, {"domain"}, {"out_ports"},
                            {"mac"}, {"iq"}};
enum { D_INDEX, D_RECEIVED, D_BY_WINDOW, D_SENT_TO, D_IDX, D_AT, D_HEAP, D_MAX_TIME, D_LOCAL_RX, D_BY_NAME, D_BATCH, D_N };
static Attr dom_attr[D_N] = {{"index"}, {"received"}, {"_by_window"}, {"sent_to"}, {"_idx"}, {"_at"}, {"_heap"},
                             {"max_time"}, {"_local_rx"}, {"by_name"}, {"batch"}};
static PyTypeObject *ElementT, *DomainT; /* NULL until their setup: every access by name */
static PyObject *s_forget;

static int attrs_init(void)
{
    if ((s_forget = PyUnicode_InternFromString("forget")) == NULL)
        return -1;
    for (int k = 0; k < E_N; k++)
        if ((el_attr[k].s = PyUnicode_InternFromString(el_attr[k].name)) == NULL)
            return -1;
    for (int k = 0; k < D_N; k++)
        if ((dom_attr[k].s = PyUnicode_InternFromString(dom_attr[k].name)) == NULL)
            return -1;
    return 0;
}

/* the offsets of ``cls``'s slots named in ``a``; then ``*t = cls`` (left as it was on error) */
static PyObject *attrs_setup(PyObject *cls, Attr *a, int n, PyTypeObject **t)
{
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "setup: a class expected");
        return NULL;
    }
    Py_ssize_t offs[32];
    for (int k = 0; k < n && k < 32; k++)
        if (slot_offset((PyTypeObject *)cls, a[k].name, &offs[k]) < 0)
            return NULL;
    for (int k = 0; k < n && k < 32; k++)
        a[k].off = offs[k];
    Py_XSETREF(*t, (PyTypeObject *)Py_NewRef(cls));
    Py_RETURN_NONE;
}

/* o.<a> (a new reference; NULL with AttributeError when unset) */
static inline PyObject *attr_get(PyObject *o, PyTypeObject *t, const Attr *a)
{
    if (Py_TYPE(o) == t) {
        PyObject *v = SLOT(o, a->off);
        if (v != NULL)
            return Py_NewRef(v);
        PyErr_SetObject(PyExc_AttributeError, a->s);
        return NULL;
    }
    return PyObject_GetAttr(o, a->s);
}

/* o.<a> = v: 0, or -1 with an error */
static inline int attr_set(PyObject *o, PyTypeObject *t, const Attr *a, PyObject *v)
{
    if (Py_TYPE(o) == t) {
        Py_XSETREF(SLOT(o, a->off), Py_NewRef(v));
        return 0;
    }
    return PyObject_SetAttr(o, a->s, v);
}

/* o.<a> = v (an int): 0, or -1 with an error */
static inline int attr_set_ll(PyObject *o, PyTypeObject *t, const Attr *a, long long v)
{
    if (Py_TYPE(o) == t)
        return put_ll(&SLOT(o, a->off), v);
    PyObject *n = PyLong_FromLongLong(v);
    if (n == NULL)
        return -1;
    int rc = attr_set(o, t, a, n);
    Py_DECREF(n);
    return rc;
}

#define EL_GET(o, k) attr_get((o), ElementT, &el_attr[k])
#define EL_SET(o, k, v) attr_set((o), ElementT, &el_attr[k], (v))
#define EL_SET_LL(o, k, v) attr_set_ll((o), ElementT, &el_attr[k], (v))
#define DOM_GET(o, k) attr_get((o), DomainT, &dom_attr[k])
#define DOM_SET(o, k, v) attr_set((o), DomainT, &dom_attr[k], (v))
#define DOM_SET_LL(o, k, v) attr_set_ll((o), DomainT, &dom_attr[k], (v))

static PyObject *element_setup(PyObject *self, PyObject *cls) { return attrs_setup(cls, el_attr, E_N, &ElementT); }

#endif /* EMU_CSRC_ATTRS_H */
