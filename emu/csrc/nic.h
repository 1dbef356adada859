/* emu/csrc/nic.h: a host NIC's messages -- NicEngine.receive's plain case (a one-frame message, a
 * long one's later frames), send_message's one-frame case, Timers.at -- and the table of what the
 * core stands in for (part of emu/_core.c, one translation unit; the engine's classes are given by
 * emu.nodes.nic.engine at its import -- the substrate does not know them) */
#ifndef EMU_CSRC_NIC_H
#define EMU_CSRC_NIC_H

static PyTypeObject *NicT, *TimersT, *MessageT;
static Py_ssize_t tm_heap, tm_seq, tm_cancelled, tm_next = -1; /* Timers' slots (next: -1, a property) */
static long C_MSG_PTYPE, C_MSG_LEN;
static PyObject *s_nic_delay_ns, *s_frames_received, *s_messages_received, *msg_ptype_obj;
enum { N_NODE_ID, N_ANYWHERE, N_TRANSPORT, N_NAMES, N_STATS, N_SPEC, N_TIMERS, N_DELIVER, N_NOW, N_OUT, N_TIMER,
       N_MSG_ID, N_LAZY, N_HEADS, N_ROUTES, N_MIN_DELAY_NS, N_HOST, N_PARTIAL, N_N };
static Attr nic_attr[N_N] = {{"node_id"}, {"_anywhere"}, {"transport"}, {"names"}, {"stats"}, {"spec"}, {"timers"},
                             {"_deliver"}, {"now"}, {"_out"}, {"timer"}, {"_msg_id"}, {"_lazy"}, {"_heads"},
                             {"routes"}, {"min_delay_ns"}, {"host"}, {"_partial"}};
/* a NicEngine's attribute: at its slot's offset (the class given at nic_setup), by name otherwise */
#define NIC_GET(o, k) attr_get((o), NicT, &nic_attr[k])
#define NIC_SET(o, k, v) attr_set((o), NicT, &nic_attr[k], (v))
#define NIC_SET_LL(o, k, v) attr_set_ll((o), NicT, &nic_attr[k], (v))
static unsigned long long n_nic_messages; /* one-frame messages received here (counts()) */
static unsigned long long n_nic_segments; /* later frames of longer messages reassembled here (counts()) */
static PyTypeObject *PartialT;              /* a message being reassembled (its slots: tag, buf, got) */
static Py_ssize_t pa_tag, pa_buf, pa_got;
static long long C_BIG_MESSAGE;             /* a message longer than this is handed over as its buffer */
static PyObject *s_at, *s_mtu_bytes, *s_frames_sent, *s_messages_sent;

static PyTypeObject *HostT, *ProcT, *SendT, *RecvT; /* (host_setup's, emu/csrc/host.h) */

/* spec.<name> of a host's spec: for an emu.config.HostSpec (a frozen dataclass: its fields do not
 * change) read once per spec object and name -- the last spec read, held, per name (a run's hosts
 * share theirs: the next run's replaces it); any other spec read each time */
static PyTypeObject *HostSpecT;
static int hs_state; /* 0 not looked up yet, 1 HostSpecT known, -1 not available */
enum { SP_NIC_DELAY, SP_MTU, SP_SEND_OVERHEAD, SP_RECV_OVERHEAD, SP_N }; /* (the names read: an entry each) */
static struct { PyObject *spec, *name, *v; } spec_cache[SP_N];

static PyTypeObject *hostspec_type(void)
{
    if (hs_state == 0) {
        hs_state = -1;
        PyObject *m = PyImport_ImportModule("emu.config"), *c = m ? PyObject_GetAttrString(m, "HostSpec") : NULL,
                 *params = c ? PyObject_GetAttrString(c, "__dataclass_params__") : NULL,
                 *frozen = params ? PyObject_GetAttrString(params, "frozen") : NULL;
        if (c != NULL && PyType_Check(c) && frozen == Py_True) {
            HostSpecT = (PyTypeObject *)Py_NewRef(c);
            hs_state = 1;
        }
        Py_XDECREF(m);
        Py_XDECREF(c);
        Py_XDECREF(params);
        Py_XDECREF(frozen);
        PyErr_Clear();
    }
    return HostSpecT;
}

static PyObject *spec_get(PyObject *spec, PyObject *name, int h) /* (h: the name's SP_; a new reference, NULL error) */
{
    if (Py_TYPE(spec) != hostspec_type() || HostSpecT == NULL)
        return PyObject_GetAttr(spec, name);
    if (spec_cache[h].spec == spec && spec_cache[h].name == name)
        return Py_NewRef(spec_cache[h].v);
    PyObject *v = PyObject_GetAttr(spec, name);
    if (v != NULL && PyLong_CheckExact(v)) {
        Py_XSETREF(spec_cache[h].spec, Py_NewRef(spec));
        Py_XSETREF(spec_cache[h].name, Py_NewRef(name));
        Py_XSETREF(spec_cache[h].v, Py_NewRef(v));
    }
    return v;
}

/* -- what the core stands in for, as the classes had it at host_setup: each attribute's object
 * (its function, a property), checked again whenever a class's version tag moved (a class changed:
 * a method replaced, as a test or a plug-in may, and Python's is called from then on) */
enum { W_HOST, W_NIC, W_TIMERS, W_RECV, W_N };
typedef struct {
    int cls;
    const char *name;
    PyObject *s; /* the interned name */
    PyObject *v; /* the class's attribute at setup */
} Watch;
enum { WI_RESUME, WI_DELIVER, WI_OP_SEND, WI_OP_RECV }; /* (the first entries: the host's methods it calls) */
static Watch watch[] = {{W_HOST, "resume"}, {W_HOST, "deliver"}, {W_HOST, "_op_send"}, {W_HOST, "_op_recv"},
                        {W_HOST, "_busy"}, {W_HOST, "_received"}, {W_HOST, "cpu_done"}, {W_HOST, "now"},
                        {W_NIC, "on_timer"}, {W_NIC, "at"}, {W_NIC, "receive"}, {W_NIC, "_on_segment"},
                        {W_NIC, "send_message"}, {W_NIC, "_put_message"}, {W_NIC, "_route"}, {W_TIMERS, "at"},
                        {W_TIMERS, "run_due"}, {W_TIMERS, "_next_live"}, {W_RECV, "matches"}};
#define N_WATCH ((int)(sizeof watch / sizeof watch[0]))
static unsigned int watch_tags[W_N];
static PyTypeObject *watch_t[W_N]; /* (the classes, at host_setup) */
static int watching; /* host_setup filled the table */

static inline PyTypeObject *watch_type(int c)
{
    return c == W_HOST ? HostT : c == W_NIC ? NicT : c == W_TIMERS ? TimersT : RecvT;
}

/* a class's version tag still the one it had when checked (no attribute of it set since) */
static inline int tag_same(int c)
{
#ifdef Py_TPFLAGS_VALID_VERSION_TAG
    return (watch_t[c]->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG) && watch_t[c]->tp_version_tag == watch_tags[c] &&
           watch_tags[c];
#else
    return 0;
#endif
}

/* a class changed: is what the core stands in for still there? (then its new tag is the one to see) */
static int classes_recheck(void)
{
    if (!watching)
        return 0;
    for (int c = 0; c < W_N; c++) {
        if (tag_same(c))
            continue;
        PyTypeObject *t = watch_t[c];
        for (int k = 0; k < N_WATCH; k++)
            if (watch[k].cls == c && _PyType_Lookup(t, watch[k].s) != watch[k].v)
                return 0;
#ifdef Py_TPFLAGS_VALID_VERSION_TAG
        watch_tags[c] = (t->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG) ? t->tp_version_tag : 0;
#endif
    }
    return 1;
}

/* every class still has what the core stands in for: four compares until a class changes */
static inline int classes_plain(void)
{
    return (watching && tag_same(W_HOST) && tag_same(W_NIC) && tag_same(W_TIMERS) && tag_same(W_RECV)) ||
           classes_recheck();
}

/* a NIC has none of the watched methods in its own __dict__ (set on the object, they win over its
 * class's in Python): 1, 0 (some: Python's), -1 error. A dict seen without them at a version (it
 * changes with every change of the dict, CPython 3.11) is not read again. */
#if PY_VERSION_HEX < 0x030C0000
#define SEEN_N 1024
static struct { PyObject *d; uint64_t v; } seen[SEEN_N];
#endif
static int inst_plain(PyObject *o)
{
    PyObject **dp = _PyObject_GetDictPtr(o);
    if (dp == NULL || *dp == NULL)
        return 1;
    PyObject *d = *dp;
    if (PyDict_GET_SIZE(d) == 0)
        return 1;
#if PY_VERSION_HEX < 0x030C0000
    size_t h = (size_t)(((uint64_t)(uintptr_t)d * 0x9E3779B97F4A7C15ULL) >> 54); /* (of SEEN_N: 1024) */
    uint64_t ver = ((PyDictObject *)d)->ma_version_tag;
    if (seen[h].d == d && seen[h].v == ver)
        return 1;
#endif
    for (int k = 0; k < N_WATCH; k++) {
        if (watch[k].cls != W_NIC)
            continue;
        PyObject *v = PyDict_GetItemWithError(d, watch[k].s);
        if (v != NULL)
            return 0;
        if (PyErr_Occurred())
            return -1;
    }
#if PY_VERSION_HEX < 0x030C0000
    seen[h].d = d, seen[h].v = ver;
#endif
    return 1;
}


static int heads_here; /* the core makes a missing Ethernet header (nic_setup checked its layout) */

/* the Ethernet header of a frame from node ``src`` to node ``dst`` (emu.wire.fabric: node_mac, 02:00
 * and the 32-bit node id; the fabric's EtherType) */
static inline void eth_head(unsigned char *b, uint64_t src, uint64_t dst)
{
    b[0] = 2, b[1] = 0, b[6] = 2, b[7] = 0;
    put_be(b + 2, dst, 4);
    put_be(b + 8, src, 4);
    b[12] = (unsigned char)C_ET_HI, b[13] = (unsigned char)C_ET_LO;
}

static PyObject *nic_setup(PyObject *self, PyObject *args)
{
    PyObject *nic, *timers, *message, *sample, *partial;
    long ptype, msg_len;
    long long big;
    if (!PyArg_ParseTuple(args, "O!O!O!llSO!L", &PyType_Type, &nic, &PyType_Type, &timers, &PyType_Type, &message,
                          &ptype, &msg_len, &sample, &PyType_Type, &partial, &big))
        return NULL;
    Py_ssize_t pt, pb, pg;
    if (slot_offset((PyTypeObject *)partial, "tag", &pt) < 0 || slot_offset((PyTypeObject *)partial, "buf", &pb) < 0 ||
        slot_offset((PyTypeObject *)partial, "got", &pg) < 0)
        return NULL;
    /* the Ethernet header of a frame from node 0x01020304 to 0x05060708, as emu.wire makes it: the
     * core makes a missing one only if it makes this one the same (else _route's, in Python) */
    unsigned char mine[14];
    eth_head(mine, 0x01020304, 0x05060708);
    heads_here = PyBytes_GET_SIZE(sample) == 14 && !memcmp(PyBytes_AS_STRING(sample), mine, 14);
    if (!PyType_IsSubtype((PyTypeObject *)message, &PyTuple_Type) || ptype < 0 || ptype > 255 || msg_len != 16) {
        PyErr_SetString(PyExc_ValueError, "nic_setup: a message or layout this core was not written for");
        return NULL;
    }
    Py_ssize_t h, s, c, n = -1;
    if (slot_offset((PyTypeObject *)timers, "_heap", &h) < 0 || slot_offset((PyTypeObject *)timers, "_seq", &s) < 0 ||
        slot_offset((PyTypeObject *)timers, "_cancelled", &c) < 0)
        return NULL;
    PyObject *d = PyObject_GetAttrString(timers, "next");
    if (d == NULL)
        return NULL;
    int slot = Py_IS_TYPE(d, &PyMemberDescr_Type);
    Py_DECREF(d);
    if (slot && slot_offset((PyTypeObject *)timers, "next", &n) < 0)
        return NULL;
    struct { PyObject **s; const char *n; } names[] = {
        {&s_nic_delay_ns, "nic_delay_ns"}, {&s_frames_received, "frames_received"},
        {&s_messages_received, "messages_received"}, {&s_mtu_bytes, "mtu_bytes"}, {&s_frames_sent, "frames_sent"},
        {&s_messages_sent, "messages_sent"}, {&s_at, "at"}};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
        if (*names[k].s == NULL && (*names[k].s = PyUnicode_InternFromString(names[k].n)) == NULL)
            return NULL;
    for (int k = 0; k < N_N; k++)
        if (nic_attr[k].s == NULL && (nic_attr[k].s = PyUnicode_InternFromString(nic_attr[k].name)) == NULL)
            return NULL;
    PyTypeObject *prev = NicT; /* (attrs_setup sets NicT: put back until the end) */
    PyObject *ok = attrs_setup(nic, nic_attr, N_N, &NicT);
    if (ok == NULL)
        return NULL;
    Py_DECREF(ok);
    Py_XSETREF(NicT, prev);
    Py_XSETREF(msg_ptype_obj, PyLong_FromLong(ptype));
    if (msg_ptype_obj == NULL)
        return NULL;
    tm_heap = h, tm_seq = s, tm_cancelled = c, tm_next = n;
    C_MSG_PTYPE = ptype, C_MSG_LEN = msg_len;
    Py_XSETREF(TimersT, (PyTypeObject *)Py_NewRef(timers));
    Py_XSETREF(MessageT, (PyTypeObject *)Py_NewRef(message));
    Py_XSETREF(NicT, (PyTypeObject *)Py_NewRef(nic));
    Py_XSETREF(PartialT, (PyTypeObject *)Py_NewRef(partial));
    pa_tag = pt, pa_buf = pb, pa_got = pg, C_BIG_MESSAGE = big;
    Py_RETURN_NONE;
}

/* Timer entries (t, seq, fn, arg) made again: one that left a Timers heap and ran (timers_run_due)
 * is kept when nobody else holds it -- exactly a tuple of four, one reference (the runner's) --, for
 * the next timers_at. Kept ones are untracked by the GC and hold only their seq int (their t, fn and
 * arg let go: NULL), which the next timers_at writes in place when nobody else holds it (Timers._seq
 * moved on to a later one; put_ll). A tuple is immutable to everyone who can see it; a kept one
 * nobody else can. tm_kept counts the entries made again (counts()'s timers_reused). */
#define TM_SPARES 64
static PyObject *tm_spare[TM_SPARES];
static int tm_spares;
static unsigned long long tm_kept;

/* a timer entry that left its heap and ran (the caller's reference, given up): kept or released. Its
 * items are taken out before it is kept and let go only after (a release may run code that sets a
 * timer: it finds the kept one whole). */
static void tm_keep(PyObject *e)
{
    if (Py_REFCNT(e) != 1 || !PyTuple_CheckExact(e) || PyTuple_GET_SIZE(e) != 4 || tm_spares >= TM_SPARES) {
        Py_DECREF(e);
        return;
    }
    PyObject *t = PyTuple_GET_ITEM(e, 0), *seq = PyTuple_GET_ITEM(e, 1), *fn = PyTuple_GET_ITEM(e, 2),
             *arg = PyTuple_GET_ITEM(e, 3);
    PyTuple_SET_ITEM(e, 0, NULL);
    PyTuple_SET_ITEM(e, 2, NULL);
    PyTuple_SET_ITEM(e, 3, NULL);
    if (seq != NULL && !PyLong_CheckExact(seq))
        PyTuple_SET_ITEM(e, 1, NULL);
    else
        seq = NULL;
    PyObject_GC_UnTrack(e);
    tm_spare[tm_spares++] = e;
    Py_XDECREF(t);
    Py_XDECREF(seq);
    Py_XDECREF(fn);
    Py_XDECREF(arg);
}

/* Timers.at(t, fn, arg) on the registered Timers: the next sequence number, (t, seq, fn, arg) pushed
 * on its heap, its next lowered to t if earlier; a Timers of another class (or state) by its method.
 * 0, -1 error. */
static int timers_at(PyObject *timers, PyObject *t, PyObject *fn, PyObject *arg)
{
    PyObject *heap, *seq, *nxt;
    long long seqv, tv, nv = 0;
    if (Py_TYPE(timers) != TimersT || tm_next < 0 || !classes_plain() || (heap = SLOT(timers, tm_heap)) == NULL ||
        !PyList_CheckExact(heap) || (seq = SLOT(timers, tm_seq)) == NULL || !get_ll(seq, &seqv) || !get_ll(t, &tv) ||
        (nxt = SLOT(timers, tm_next)) == NULL || (nxt != Py_None && !get_ll(nxt, &nv))) {
        if (PyErr_Occurred())
            return -1;
        PyObject *r = PyObject_CallMethodObjArgs(timers, s_at, t, fn, arg, NULL);
        Py_XDECREF(r);
        return r == NULL ? -1 : 0;
    }
    PyObject *entry, *sobj;
    if (tm_spares > 0) { /* (one that ran: its seq int written in place when nobody else holds it) */
        entry = tm_spare[--tm_spares];
        if (put_ll(&PyTuple_GET_ITEM(entry, 1), seqv + 1) < 0) {
            Py_DECREF(entry); /* (its items released: tupledealloc's Py_XDECREF) */
            return -1;
        }
        sobj = Py_NewRef(PyTuple_GET_ITEM(entry, 1));
        PyTuple_SET_ITEM(entry, 0, Py_NewRef(t));
        PyTuple_SET_ITEM(entry, 2, Py_NewRef(fn));
        PyTuple_SET_ITEM(entry, 3, Py_NewRef(arg));
        PyObject_GC_Track(entry); /* (as a new tuple is: fn and arg in it) */
        tm_kept++;
    } else {
        if ((sobj = PyLong_FromLongLong(seqv + 1)) == NULL)
            return -1;
        entry = PyTuple_Pack(4, t, sobj, fn, arg);
    }
    Py_XSETREF(SLOT(timers, tm_seq), sobj);
    Py_INCREF(heap); /* (held: a comparison may run Python code) */
    int bad = entry == NULL || heap_push(heap, entry) < 0;
    Py_XDECREF(entry);
    Py_DECREF(heap);
    if (bad)
        return -1;
    if (nxt == Py_None || tv < nv) /* (nxt: read before the push, compared as Timers.at compares them) */
        Py_XSETREF(SLOT(timers, tm_next), Py_NewRef(t));
    return 0;
}

/* Message(name, tag, data, t_ns, hops) as tuple.__new__ makes it (not the named tuple's Python
 * __new__): for a subclass of tuple its tp_alloc and the items set, as tuple_subtype_new does, without
 * the plain tuples it makes first; ``data`` stolen: a new reference, or NULL */
static PyObject *new_message(PyObject *name, long long tag, PyObject *data, long long t, long hops)
{
    if (PyType_FastSubclass(MessageT, Py_TPFLAGS_TUPLE_SUBCLASS) && MessageT->tp_alloc != NULL) {
        PyObject *it[5] = {Py_NewRef(name), PyLong_FromLongLong(tag), data, PyLong_FromLongLong(t), PyLong_FromLong(hops)};
        PyObject *msg = it[1] && it[2] && it[3] && it[4] ? MessageT->tp_alloc(MessageT, 5) : NULL;
        for (int k = 0; k < 5; k++)
            if (msg == NULL)
                Py_XDECREF(it[k]);
            else
                PyTuple_SET_ITEM(msg, k, it[k]);
        return msg;
    }
    PyObject *fields = tuple_steal(5, (PyObject *[]){Py_NewRef(name), PyLong_FromLongLong(tag), data,
                                                     PyLong_FromLongLong(t), PyLong_FromLong(hops)});
    PyObject *targs = fields == NULL ? NULL : PyTuple_Pack(1, fields);
    PyObject *msg = targs == NULL ? NULL : PyTuple_Type.tp_new(MessageT, targs, NULL);
    Py_XDECREF(fields);
    Py_XDECREF(targs);
    return msg;
}

/* self.timer = self.timers.next, for the registered Timers: 0, -1 */
static int timer_next(PyObject *eng, PyObject *timers)
{
    PyObject *nxt = SLOT(timers, tm_next);
    if (nxt == NULL) {
        PyErr_SetString(PyExc_AttributeError, "next");
        return -1;
    }
    return NIC_SET(eng, N_TIMER, nxt);
}

/* d[key] += 1 for a count read before as ``seen`` (borrowed), the dict then at version *ver (3.11's
 * ma_version_tag; 0: not known): when the dict has not changed since, ``seen`` is still its value --
 * written in place when it can be (int_in_place, count_in_place: the version stays) or replaced by an
 * int of its own (own_int: written in place the next time), without dict_add's
 * lookup; else dict_add. *ver follows the dict (0 when not known). 0, or -1 with an error. */
static int count_add(PyObject *d, PyObject *key, PyObject *seen, uint64_t *ver, const char *what)
{
#if PY_VERSION_HEX < 0x030C0000
    long long v;
    if (*ver != 0 && ((PyDictObject *)d)->ma_version_tag == *ver && get_ll(seen, &v)) {
        if (int_in_place(seen, v + 1) || count_in_place(seen, v + 1))
            return 0;
        /* (an int of its own -- not the small-int cache's -- which the next adds write in place) */
        PyObject *nv = own_int(v + 1);
        int rc = nv == NULL ? -1 : PyDict_SetItem(d, key, nv);
        Py_XDECREF(nv);
        *ver = rc < 0 ? 0 : ((PyDictObject *)d)->ma_version_tag;
        return rc;
    }
#endif
    *ver = 0;
    return dict_add(d, key, 1, 0, what);
}

/* the version of dict ``d`` as read now (0: not known) */
static inline uint64_t dict_ver(PyObject *d)
{
#if PY_VERSION_HEX < 0x030C0000
    return ((PyDictObject *)d)->ma_version_tag;
#else
    return 0;
#endif
}

/* d[ka] and d[kb] (borrowed; NULL with an error, or NULL and no error when missing) of a dict of
 * counts read per message (a NIC's stats): a dict seen at a version (3.11's ma_version_tag, new for
 * every change of any dict, so the same dict unchanged since) is not looked up again -- its values are
 * the objects it then held (written in place since by count_add, which leaves the version) */
#define PAIR_N 1024
typedef struct { PyObject *d; uint64_t v; PyObject *a, *b; } PairSeen;
static PairSeen rx_pairs[PAIR_N], tx_pairs[PAIR_N];
static inline int dict_pair(PairSeen *tab, PyObject *d, PyObject *ka, PyObject *kb, PyObject **a, PyObject **b)
{
#if PY_VERSION_HEX < 0x030C0000
    PairSeen *e = &tab[(size_t)(((uint64_t)(uintptr_t)d * 0x9E3779B97F4A7C15ULL) >> 54)]; /* (of PAIR_N: 1024) */
    uint64_t ver = ((PyDictObject *)d)->ma_version_tag;
    if (e->d == d && e->v == ver) {
        *a = e->a, *b = e->b;
        return 0;
    }
#endif
    if ((*a = PyDict_GetItemWithError(d, ka)) == NULL || (*b = PyDict_GetItemWithError(d, kb)) == NULL)
        return -1;
#if PY_VERSION_HEX < 0x030C0000
    e->d = d, e->v = ver, e->a = *a, e->b = *b;
#endif
    return 0;
}

/* ``d`` lacks ``key`` (a dict taking packet types to a mechanism: none for this one): 1 lacks it,
 * 0 has it, -1 error; a dict seen without it at a version not looked up again */
#define ABSENT_N 256
static struct { PyObject *d; uint64_t v; } absent_seen[ABSENT_N];
static inline int dict_lacks(PyObject *d, PyObject *key)
{
#if PY_VERSION_HEX < 0x030C0000
    size_t h = (size_t)(((uint64_t)(uintptr_t)d * 0x9E3779B97F4A7C15ULL) >> 56); /* (of ABSENT_N: 256) */
    uint64_t ver = ((PyDictObject *)d)->ma_version_tag;
    if (absent_seen[h].d == d && absent_seen[h].v == ver)
        return 1;
#endif
    PyObject *v = PyDict_GetItemWithError(d, key);
    if (v != NULL)
        return 0;
    if (PyErr_Occurred())
        return -1;
#if PY_VERSION_HEX < 0x030C0000
    absent_seen[h].d = d, absent_seen[h].v = ver;
#endif
    return 1;
}

/* self._out = [] (receive's first step) for the registered NicEngine class: its list kept when it is
 * empty and nobody else holds it (then nobody can tell it from a new one), else a new list set; a new
 * reference to it, or NULL with an error */
static PyObject *nic_fresh_out(PyObject *eng)
{
    if (Py_TYPE(eng) == NicT) {
        PyObject *old = SLOT(eng, nic_attr[N_OUT].off);
        if (old != NULL && PyList_CheckExact(old) && Py_REFCNT(old) == 1 && PyList_GET_SIZE(old) == 0)
            return Py_NewRef(old);
    }
    PyObject *out = PyList_New(0);
    if (out != NULL && NIC_SET(eng, N_OUT, out) < 0)
        Py_CLEAR(out);
    return out;
}

/* NicEngine.receive(frame, port, now) for a message frame to this host (no mechanism takes its
 * packet type anywhere, no end-to-end transport): a one-frame message, or a later frame of a long
 * one into the buffer its first frame made (_on_segment's): the engine's now and output list, its
 * counters, a whole Message delivered to the host after the NIC delay (Timers.at), its timer --
 * *out the (empty) list receive returns. 0 done, 1 not this case (nothing changed: receive's), -1
 * error. */
static int nic_receive(PyObject *eng, PyObject *frame, PyObject *now, PyObject **out_p)
{
    if (NicT == NULL || Py_TYPE(eng) != NicT || !PyBytes_CheckExact(frame) || !classes_plain())
        return 1;
    int ip = inst_plain(eng);
    if (ip != 1)
        return ip < 0 ? -1 : 1;
    Py_ssize_t n = PyBytes_GET_SIZE(frame), data = C_HDR_LEN + C_MSG_LEN;
    const unsigned char *b = (const unsigned char *)PyBytes_AS_STRING(frame);
    if (n < data || b[12] != C_ET_HI || b[13] != C_ET_LO || b[C_PTYPE_OFF] != C_MSG_PTYPE ||
        (Py_ssize_t)be(b + C_HDR_LEN - 2, 2) != n - C_HDR_LEN)
        return 1;
    long long src = (long long)be(b + C_DST_OFF - 4, 4), dst = (long long)be(b + C_DST_OFF, 4), nowv, node, delay;
    long long tag = (long long)be(b + C_HDR_LEN + 4, 4), total = (long long)be(b + C_HDR_LEN + 8, 4),
              offset = (long long)be(b + C_HDR_LEN + 12, 4);
    long long chunk = n - data, msg_id = (long long)be(b + C_HDR_LEN, 4);
    int whole = offset == 0 && total == chunk; /* (else a segment of a longer message) */
    if (offset + chunk > total || !get_ll(now, &nowv))
        return 1;
    PyObject *node_id = NULL, *anywhere = NULL, *transport = NULL, *names = NULL, *stats = NULL, *spec = NULL,
             *nd = NULL, *timers = NULL, *deliver = NULL, *partial = NULL, *key = NULL, *part = NULL;
    int rc = -1;
    if ((node_id = NIC_GET(eng, N_NODE_ID)) == NULL || (anywhere = NIC_GET(eng, N_ANYWHERE)) == NULL ||
        (transport = NIC_GET(eng, N_TRANSPORT)) == NULL || (names = NIC_GET(eng, N_NAMES)) == NULL ||
        (stats = NIC_GET(eng, N_STATS)) == NULL || (spec = NIC_GET(eng, N_SPEC)) == NULL ||
        (nd = spec_get(spec, s_nic_delay_ns, SP_NIC_DELAY)) == NULL || (timers = NIC_GET(eng, N_TIMERS)) == NULL ||
        (deliver = NIC_GET(eng, N_DELIVER)) == NULL)
        goto done;
    rc = 1;
    PyObject *fr, *mr;
    long long fv, mv;
    if (!get_ll(node_id, &node) || node != dst || !PyDict_CheckExact(anywhere) || transport != Py_None ||
        !PyList_CheckExact(names) || src >= PyList_GET_SIZE(names) || !PyDict_CheckExact(stats) ||
        !get_ll(nd, &delay) || Py_TYPE(timers) != TimersT || tm_next < 0 ||
        dict_pair(rx_pairs, stats, s_frames_received, s_messages_received, &fr, &mr) < 0 || !get_ll(fr, &fv) ||
        !get_ll(mr, &mv))
        goto done;
    uint64_t sver = dict_ver(stats); /* (fr, mr its values at this version: count_add) */
    if (dict_lacks(anywhere, msg_ptype_obj) != 1)
        goto done;
    if (!whole) { /* a later segment of a message being reassembled (the first one: Python's, it makes _Partial) */
        long long ptag, got;
        PyObject *buf;
        rc = -1;
        if ((partial = NIC_GET(eng, N_PARTIAL)) == NULL ||
            (key = tuple_steal(2, (PyObject *[]){PyLong_FromLongLong(src), PyLong_FromLongLong(msg_id)})) == NULL)
            goto done;
        rc = 1;
        PyObject *p0;
        if (!PyDict_CheckExact(partial) || (p0 = PyDict_GetItemWithError(partial, key)) == NULL ||
            Py_TYPE(p0) != PartialT || !get_ll(SLOT(p0, pa_tag), &ptag) || ptag != tag ||
            (buf = SLOT(p0, pa_buf)) == NULL || !PyByteArray_CheckExact(buf) || PyByteArray_GET_SIZE(buf) != total ||
            !get_ll(SLOT(p0, pa_got), &got))
            goto done;
        part = Py_NewRef(p0); /* (held: Python code may run below) */
        Py_INCREF(buf);
        rc = -1; /* taken: receive's and _on_segment's steps */
        PyObject *out = nic_fresh_out(eng);
        if (out == NULL || NIC_SET(eng, N_NOW, now) < 0 ||
            dict_add(stats, s_frames_received, 1, 0, "a NIC's frames_received") < 0) {
            Py_XDECREF(out);
            Py_DECREF(buf);
            goto done;
        }
        memcpy(PyByteArray_AS_STRING(buf) + offset, b + data, (size_t)chunk); /* part.buf[offset:...] = chunk */
        int bad = set_ll(part, pa_got, got + chunk) < 0;
        if (!bad && got + chunk >= total) { /* whole: the Message to the host after the NIC delay */
            long long t = nowv + delay;
            PyObject *host = NULL, *fn = NULL, *mdata, *msg = NULL;
            bad = PyDict_DelItem(partial, key) < 0;
            mdata = bad ? NULL : total > C_BIG_MESSAGE ? Py_NewRef(buf) /* (the buffer itself) */
                                                       : PyBytes_FromStringAndSize(PyByteArray_AS_STRING(buf), total);
            msg = new_message(PyList_GET_ITEM(names, src), tag, mdata, t, b[C_HOPS_OFF]);
            /* stats["messages_received"] += 1; self.at(msg.t_ns, self.host.deliver, msg) */
            bad = msg == NULL || dict_add(stats, s_messages_received, 1, 0, "a NIC's messages_received") < 0 ||
                  (host = NIC_GET(eng, N_HOST)) == NULL || (fn = PyObject_GetAttr(host, watch[WI_DELIVER].s)) == NULL ||
                  timers_at(timers, PyTuple_GET_ITEM(msg, 3), fn, msg) < 0;
            Py_XDECREF(host);
            Py_XDECREF(fn);
            Py_XDECREF(msg);
        }
        Py_DECREF(buf);
        if (bad || timer_next(eng, timers) < 0) {
            Py_DECREF(out);
            goto done;
        }
        n_nic_segments++;
        *out_p = out;
        rc = 0;
        goto done;
    }
    rc = -1; /* taken: NicEngine.receive's and _on_segment's steps */
    PyObject *out = nic_fresh_out(eng);
    if (out == NULL || NIC_SET(eng, N_NOW, now) < 0 ||
        count_add(stats, s_frames_received, fr, &sver, "a NIC's frames_received") < 0 ||
        count_add(stats, s_messages_received, mr, &sver, "a NIC's messages_received") < 0) {
        Py_XDECREF(out);
        goto done;
    }
    PyObject *msg = new_message(PyList_GET_ITEM(names, src), tag,
                                PyBytes_FromStringAndSize((const char *)b + data, total), nowv + delay, b[C_HOPS_OFF]);
    /* self.timers.at(t, self._deliver, msg) (host.deliver, bound once); self.timer = self.timers.next */
    int bad = msg == NULL || timers_at(timers, PyTuple_GET_ITEM(msg, 3), deliver, msg) < 0;
    Py_XDECREF(msg);
    if (bad || timer_next(eng, timers) < 0) {
        Py_DECREF(out);
        goto done;
    }
    n_nic_messages++;
    *out_p = out;
    rc = 0;
done:
    if (rc == 1)
        PyErr_Clear();
    Py_XDECREF(node_id);
    Py_XDECREF(anywhere);
    Py_XDECREF(transport);
    Py_XDECREF(names);
    Py_XDECREF(stats);
    Py_XDECREF(spec);
    Py_XDECREF(nd);
    Py_XDECREF(timers);
    Py_XDECREF(deliver);
    Py_XDECREF(partial);
    Py_XDECREF(key);
    Py_XDECREF(part);
    return rc;
}


static unsigned long long n_nic_sent; /* one-frame messages sent here (counts()) */

/* NicEngine.send_message(dst, tag, data, t, vc) for a message of one frame (no end-to-end
 * transport, a route and an Ethernet header known for dst, bytes of at most the MTU): the next
 * message id, the frame -- Ethernet header, fabric header, message header, data -- onto the
 * engine's output list at t + the NIC delay, its counters. 1 sent (no Outgoing: the data is free),
 * 0 not this case (nothing changed: send_message's), -1 error. */
static int nic_send_one(PyObject *eng, PyObject *dsto, PyObject *tago, PyObject *data, PyObject *to, PyObject *vco)
{
    long long dst, tag, t, vc;
    if (NicT == NULL || Py_TYPE(eng) != NicT || !classes_plain())
        return 0;
    int ip = inst_plain(eng);
    if (ip != 1)
        return ip;
    if (!PyBytes_CheckExact(data) || !get_ll(dsto, &dst) ||
        !get_ll(tago, &tag) || !get_ll(to, &t) || !get_ll(vco, &vc) || dst < 0 || dst > 0xFFFFFFFFLL ||
        tag < 0 || tag > 0xFFFFFFFFLL || vc < 0 || vc > 255) {
        PyErr_Clear();
        return 0;
    }
    PyObject *transport = NULL, *spec = NULL, *mtu = NULL, *nd = NULL, *routes = NULL, *heads = NULL, *msg_id = NULL,
             *stats = NULL, *out = NULL, *node_id = NULL;
    int rc = -1;
    if ((transport = NIC_GET(eng, N_TRANSPORT)) == NULL || (spec = NIC_GET(eng, N_SPEC)) == NULL ||
        (mtu = spec_get(spec, s_mtu_bytes, SP_MTU)) == NULL || (nd = spec_get(spec, s_nic_delay_ns, SP_NIC_DELAY)) == NULL ||
        (routes = NIC_GET(eng, N_ROUTES)) == NULL || (heads = NIC_GET(eng, N_HEADS)) == NULL ||
        (msg_id = NIC_GET(eng, N_MSG_ID)) == NULL || (stats = NIC_GET(eng, N_STATS)) == NULL ||
        (out = NIC_GET(eng, N_OUT)) == NULL || (node_id = NIC_GET(eng, N_NODE_ID)) == NULL)
        goto done;
    Py_ssize_t total = PyBytes_GET_SIZE(data), hlen = C_HDR_LEN - 16;
    long long mtuv, delay, idv, node, fv, mv;
    PyObject *head, *fs, *ms;
    rc = 0;
    if (transport != Py_None || !get_ll(mtu, &mtuv) || total > mtuv || total + C_MSG_LEN > 0xFFFF ||
        !get_ll(nd, &delay) ||
        (routes != Py_None && (!PyList_CheckExact(routes) || dst >= PyList_GET_SIZE(routes) ||
                               !get_ll(PyList_GET_ITEM(routes, dst), &fv) || fv < 0)) || !PyDict_CheckExact(heads) ||
        !get_ll(msg_id, &idv) || !PyDict_CheckExact(stats) || !PyList_CheckExact(out) || !get_ll(node_id, &node) ||
        node < 0 || node > 0xFFFFFFFFLL || dict_pair(tx_pairs, stats, s_frames_sent, s_messages_sent, &fs, &ms) < 0 ||
        !get_ll(fs, &fv) || !get_ll(ms, &mv))
        goto done;
    uint64_t sver = dict_ver(stats); /* (fs, ms its values at this version: count_add) */
    head = PyDict_GetItemWithError(heads, dsto);
    if ((head == NULL && (PyErr_Occurred() || !heads_here)) ||
        (head != NULL && (!PyBytes_CheckExact(head) || PyBytes_GET_SIZE(head) != hlen)))
        goto done;
    rc = -1; /* taken: send_message's and _put_message's steps */
    if (head == NULL) { /* _route's: the first message to dst makes its header, kept in _heads */
        PyObject *h = PyBytes_FromStringAndSize(NULL, hlen);
        if (h == NULL)
            goto done;
        eth_head((unsigned char *)PyBytes_AS_STRING(h), (uint64_t)node, (uint64_t)dst);
        int bad = PyDict_SetItem(heads, dsto, h);
        Py_DECREF(h);
        if (bad < 0 || (head = PyDict_GetItemWithError(heads, dsto)) == NULL)
            goto done;
    }
    long long id = (idv + 1) & 0xFFFFFFFFLL;
    PyObject *frame = PyBytes_FromStringAndSize(NULL, C_HDR_LEN + C_MSG_LEN + total);
    if (frame == NULL)
        goto done;
    unsigned char *b = (unsigned char *)PyBytes_AS_STRING(frame);
    memcpy(b, PyBytes_AS_STRING(head), hlen);
    unsigned char *f = b + hlen; /* the fabric header: src, dst, vc, prio, ptype, flags, hops, rsvd, length */
    put_be(f, (uint64_t)node, 4);
    put_be(f + 4, (uint64_t)dst, 4);
    f[8] = (unsigned char)vc, f[9] = 0, f[10] = (unsigned char)C_MSG_PTYPE, f[11] = 0, f[12] = 0, f[13] = 0;
    put_be(f + 14, (uint64_t)(C_MSG_LEN + total), 2);
    unsigned char *m = b + C_HDR_LEN; /* the message header: id, tag, total, offset */
    put_be(m, (uint64_t)id, 4);
    put_be(m + 4, (uint64_t)tag, 4);
    put_be(m + 8, (uint64_t)total, 4);
    put_be(m + 12, 0, 4);
    memcpy(m + C_MSG_LEN, PyBytes_AS_STRING(data), total);
    PyObject *port = routes == Py_None ? PyLong_FromLong(0) : Py_NewRef(PyList_GET_ITEM(routes, dst)); /* (None: port 0) */
    PyObject *entry = hp_out_entry(port, frame, t + delay); /* (one an emit queued, or a new one) */
    int bad = entry == NULL || NIC_SET_LL(eng, N_MSG_ID, id) < 0 ||
              NIC_SET(eng, N_LAZY, Py_None) < 0 || PyList_Append(out, entry) < 0 ||
              count_add(stats, s_frames_sent, fs, &sver, "a NIC's frames_sent") < 0 ||
              count_add(stats, s_messages_sent, ms, &sver, "a NIC's messages_sent") < 0;
    Py_XDECREF(entry);
    if (bad)
        goto done;
    n_nic_sent++;
    rc = 1;
done:
    if (rc == 0)
        PyErr_Clear();
    Py_XDECREF(transport);
    Py_XDECREF(spec);
    Py_XDECREF(mtu);
    Py_XDECREF(nd);
    Py_XDECREF(routes);
    Py_XDECREF(heads);
    Py_XDECREF(msg_id);
    Py_XDECREF(stats);
    Py_XDECREF(out);
    Py_XDECREF(node_id);
    return rc;
}

/* nic_send(engine, dst, tag, data, t, vc): nic_send_one from Python (Host._op_send): True (sent),
 * False (not this case) */
static PyObject *nic_send(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "nic_send(engine, dst, tag, data, t, vc)");
        return NULL;
    }
    int rc = nic_send_one(args[0], args[1], args[2], args[3], args[4], args[5]);
    if (rc < 0)
        return NULL;
    return Py_NewRef(rc ? Py_True : Py_False);
}

#endif /* EMU_CSRC_NIC_H */
