/* emu/csrc/iqtimer.h: the input-queued router's timer, credit and receive in the element's window --
 * the twins of InputQueuedEngine.on_timer (its round and _retime's compiled twins, without the Python
 * frame around them), of InputQueuedEngine.on_credit's plain case, and InputQueuedEngine.receive's
 * call of its compiled twin (iq_receive, csrc/iqrecv.h) without the method's frame (part of
 * emu/_core.c, one translation unit; called from csrc/window.h's element_window and csrc/credits.h's
 * credit_in_c).
 *
 * The engine's state these read and write at every call is in its slots (InputQueuedEngine.__slots__),
 * at the offsets iq_setup found; the rest (credit_out, the methods set on the object) in its dict.
 *
 * Plain: the engine of exactly the class given to iq_setup, that class's on_timer / on_credit still
 * the ones it had then, none set on the object, and its compiled round chosen (``_cst`` a tuple:
 * CoreRound._core_state; None, at its first round: the method's ``_core_state()`` called here first, as
 * on_timer calls it, and likewise ``_crx`` at its first frame); on_timer's also no switch timer of its own due (link tests, processing
 * unit: Python injects their frames); on_credit's also a VC credit (no pool, no frames counted, no
 * VC waiting for a tail credit) within the receiver's buffer. Anything else: Python's method, called
 * before anything here changed. */
#ifndef EMU_CSRC_IQTIMER_H
#define EMU_CSRC_IQTIMER_H

static PyTypeObject *IQEngT;            /* switch.iq.InputQueuedEngine (iq_setup's third argument) */
static PyObject *iq_fn_timer, *iq_fn_credit, *iq_fn_receive; /* its on_timer, on_credit, receive as given */
enum { T_CST, T_BTIMER, T_NEXT, T_RNOW, T_STATS, T_ACTIVE, T_FRESH, T_UP, T_COUT, T_GRANTED, T_SLOT, T_TIMER,
       T_TAILW, T_ONTIMER, T_ONCREDIT, T_ROUNDS, T_REPEATS, T_RECEIVE, T_CRX, T_N };
static const char *t_names[T_N] = {"_cst", "_btimer", "_next", "_rnow", "iq_stats", "active", "_fresh", "_up",
                                   "credit_out", "_granted", "slot", "timer", "_tail_wait", "on_timer", "on_credit",
                                   "rounds", "repeats", "receive", "_crx"};
static PyObject *t_s[T_N];
static Py_ssize_t t_off[T_N]; /* the slots' offsets in the class's objects (0: not a slot, read from the dict) */
static unsigned long long n_iq_timers, n_iq_credits, n_iq_frames;
static unsigned int t_tver[T_N]; /* (t_method_is) */

/* the engine's slot ``k`` (borrowed; NULL when unset), for an engine of exactly IQEngT */
#define ESLOT(eng, k) SLOT(eng, t_off[k])

/* the engine's slot ``k`` = v (a new reference to v taken) */
static inline void eslot_set(PyObject *eng, int k, PyObject *v) { Py_XSETREF(ESLOT(eng, k), Py_NewRef(v)); }

/* the same for a slot holding a time: the int it held, when the slot's was its last reference, kept
 * for the round's next int (iq.h's int_drop) instead of freed */
static inline void eslot_set_time(PyObject *eng, int k, PyObject *v)
{
    PyObject *old = ESLOT(eng, k);
    ESLOT(eng, k) = Py_NewRef(v);
    if (old != NULL)
        int_drop(old);
}

/* the class's method ``name`` is still ``fn``: its type version tag when it last was, kept per name
 * (CPython gives a class a new tag, or none, whenever its attributes or its bases' change) */
static inline int t_method_is(int name, PyObject *fn)
{
    unsigned int tv = IQEngT->tp_version_tag;
    if (tv != 0 && tv == t_tver[name] && PyType_HasFeature(IQEngT, Py_TPFLAGS_VALID_VERSION_TAG))
        return 1;
    if (_PyType_Lookup(IQEngT, t_s[name]) != fn)
        return 0;
    /* (_PyType_Lookup assigns the class a valid tag when it can: read after it) */
    t_tver[name] = PyType_HasFeature(IQEngT, Py_TPFLAGS_VALID_VERSION_TAG) ? IQEngT->tp_version_tag : 0;
    return 1;
}

static int iqtimer_setup(PyObject *cls)
{
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "iq_setup: InputQueuedEngine must be a class");
        return -1;
    }
    for (int k = 0; k < T_N; k++)
        if (t_s[k] == NULL && (t_s[k] = PyUnicode_InternFromString(t_names[k])) == NULL)
            return -1;
    PyObject *ft = _PyType_Lookup((PyTypeObject *)cls, t_s[T_ONTIMER]),
             *fc = _PyType_Lookup((PyTypeObject *)cls, t_s[T_ONCREDIT]),
             *fr = _PyType_Lookup((PyTypeObject *)cls, t_s[T_RECEIVE]);
    if (ft == NULL || fc == NULL || fr == NULL) {
        PyErr_SetString(PyExc_TypeError, "iq_setup: the class has no on_timer, on_credit or receive");
        return -1;
    }
    /* (switch/iq.py's InputQueuedEngine.__slots__: the state read and written at every call) */
    static const int slotted[] = {T_CST, T_BTIMER, T_NEXT, T_RNOW, T_STATS, T_ACTIVE, T_FRESH, T_UP, T_GRANTED, T_SLOT,
                                  T_TIMER, T_TAILW, T_CRX};
    Py_ssize_t off[T_N] = {0};
    for (size_t k = 0; k < sizeof slotted / sizeof slotted[0]; k++)
        if (slot_offset((PyTypeObject *)cls, t_names[slotted[k]], &off[slotted[k]]) < 0)
            return -1;
    memcpy(t_off, off, sizeof off);
    memset(t_tver, 0, sizeof t_tver);
    rx_off_next = off[T_NEXT];
    rx_off_timer = off[T_TIMER];
    Py_XSETREF(rx_engt, (PyTypeObject *)Py_NewRef(cls));
    Py_XSETREF(iq_fn_receive, Py_NewRef(fr));
    Py_XSETREF(iq_fn_timer, Py_NewRef(ft));
    Py_XSETREF(iq_fn_credit, Py_NewRef(fc));
    Py_XSETREF(IQEngT, (PyTypeObject *)Py_NewRef(cls));
    return 0;
}

/* is ``f`` this module's function ``fn`` (``_cst``'s round and retime: Python's on_timer calls what the
 * tuple holds, so a tuple holding anything else is Python's to call) */
static int iq_is_core_fn(PyObject *f, PyObject *(*fn)(PyObject *, PyObject *const *, Py_ssize_t))
{
    return PyCFunction_Check(f) && ((PyCFunctionObject *)f)->m_ml->ml_meth == (PyCFunction)(void (*)(void))fn;
}

/* Per engine, the methods seen absent from its instance dict (a bit per name) and its ``credit_out``
 * there, kept while that dict is unchanged (csrc/iqrecv.h's RX_KEEP: CPython 3.11's dict version
 * tags, one global counter, so an equal tag is the same dict unchanged): the state the calls write is
 * in slots, so the dict seldom changes. */
#if RX_KEEP
#define T_EC 4096 /* (a power of two, well above the routers of a run, two ways: an 8x8 mesh's 64 in 64 entries
                   * shared many, each filled again at every other call; in 1,024 of one way, two shared one
                   * about every other run) */
static struct { PyObject *eng, *dict; uint64_t dver; unsigned absent; PyObject *cout; } t_ec[T_EC];

static inline __typeof__(t_ec[0]) *t_kept(PyObject *eng, PyObject *d)
{
    size_t h = (size_t)(((uint64_t)(uintptr_t)eng * 0x9E3779B97F4A7C15ULL) >> 52); /* (of T_EC: 4096) */
    __typeof__(t_ec[0]) *e = &t_ec[way2(h, t_ec[h].eng, t_ec[h ^ 1].eng, eng)];
    uint64_t v = rx_dver(d);
    if (e->eng != eng || e->dict != d || e->dver != v) { /* (another engine's, or this one's dict changed) */
        e->eng = eng;
        e->dict = d;
        e->dver = v;
        e->absent = 0;
        e->cout = NULL;
    }
    return e;
}
#endif

/* is the name t_s[k] missing from the engine's instance dict ``d``: 1, 0 (there), -1 (an error) */
static int t_absent(PyObject *eng, PyObject *d, int k)
{
#if RX_KEEP
    __typeof__(t_ec[0]) *e = t_kept(eng, d);
    if (e->absent >> k & 1)
        return 1;
#endif
    if (PyDict_GetItemWithError(d, t_s[k]) != NULL)
        return 0;
    if (PyErr_Occurred())
        return -1;
#if RX_KEEP
    e->absent |= 1u << k;
#endif
    return 1;
}

/* the engine's ``credit_out`` in its instance dict ``d`` (borrowed), or NULL (missing, or an error) */
static PyObject *t_cout(PyObject *eng, PyObject *d)
{
#if RX_KEEP
    __typeof__(t_ec[0]) *e = t_kept(eng, d);
    if (e->cout != NULL)
        return e->cout; /* (the dict unchanged: it still holds it) */
    return e->cout = PyDict_GetItemWithError(d, t_s[T_COUT]);
#else
    (void)eng;
    return PyDict_GetItemWithError(d, t_s[T_COUT]);
#endif
}

/* the engine's instance dict when the engine is plain for ``fn`` (the method named ``name``), with
 * its compiled round's state (a borrowed tuple in *cs); NULL otherwise (no error) */
static PyObject *iq_plain_dict(PyObject *eng, PyObject *fn, int name, PyObject **cs)
{
    if (IQEngT == NULL || Py_TYPE(eng) != IQEngT || !iq_ready || !t_method_is(name, fn))
        return NULL;
    PyObject **dp = _PyObject_GetDictPtr(eng);
    if (dp == NULL || *dp == NULL || !PyDict_CheckExact(*dp))
        return NULL;
    PyObject *d = *dp, *c = ESLOT(eng, T_CST);
    if (c == NULL || !PyTuple_CheckExact(c) || PyTuple_GET_SIZE(c) != 4 || !iq_is_core_fn(PyTuple_GET_ITEM(c, 0), iq_round) ||
        !iq_is_core_fn(PyTuple_GET_ITEM(c, 3), iq_retime) || t_absent(eng, d, name) <= 0) {
        PyErr_Clear();
        return NULL;
    }
    *cs = c;
    return d;
}

/* Per engine, what iq_on_timer last found plain: its ``_cst`` tuple (held: a tuple never changes, so
 * its round and retime are still the core's, its state and settings tuples still laid out as checked),
 * its instance dict and that dict's version tag (RX_KEEP: unchanged, no ``on_timer`` of its own is
 * there and ``credit_out`` is the one kept), and the settings' integers (iq_consts'). A call that finds
 * all of these as they were takes them instead of checking them again; anything else checks
 * everything as before and keeps what it found. */
#if RX_KEEP
#define T_TC 4096 /* (a power of two, two ways: as t_ec) */
static struct { PyObject *eng, *cs, *dict; uint64_t dver; PyObject *cout; long long k[IK_COUNT], lim; int credit, busy; } t_tc[T_TC];

static inline __typeof__(t_tc[0]) *t_tc_slot(PyObject *eng, int fill)
{
    size_t h = (size_t)(((uint64_t)(uintptr_t)eng * 0x9E3779B97F4A7C15ULL) >> 52); /* (of T_TC: 4096) */
    h = way2(h, t_tc[h].eng, t_tc[h ^ 1].eng, eng);
    return fill || t_tc[h].eng == eng ? &t_tc[h] : NULL;
}

/* the plain case's engine dict, ``_cst``, ``credit_out`` and parsed state (z: its s, k, fresh and now,
 * as iq_parse would set them) when the engine's entry is as iq_on_timer last kept it: 1; 0 otherwise
 * (nothing read: the full checks) */
static inline int t_tc_hit(PyObject *eng, PyObject *tt, PyObject **cs, PyObject **cout, IQ *z)
{
    __typeof__(t_tc[0]) *e = t_tc_slot(eng, 0);
    if (e == NULL || e->cs != ESLOT(eng, T_CST) || Py_TYPE(eng) != IQEngT || !t_method_is(T_ONTIMER, iq_fn_timer))
        return 0;
    PyObject **dp = _PyObject_GetDictPtr(eng), *fresh = ESLOT(eng, T_FRESH);
    if (dp == NULL || *dp != e->dict || rx_dver(e->dict) != e->dver || fresh == NULL || !PyList_CheckExact(fresh) ||
        !get_ll(tt, &z->now) || z->now < 0 || z->now > e->lim)
        return 0;
    z->s = ((PyTupleObject *)PyTuple_GET_ITEM(e->cs, 1))->ob_item; /* (cs held by the caller for the call) */
    z->k = e->k; /* (the entry busy for the call: t_tc_keep refills no busy entry) */
    z->fresh = fresh;
    z->up = z->credit_out = Py_None;
    z->va_grants = z->sa_grants = z->sa_conflicts = 0;
    z->shared_empty = 0;
    *cs = e->cs;
    *cout = e->cout;
    return 1;
}

/* keep what a call that checked everything found (``cs``, the dict ``d`` and its credit_out, z's settings) */
static void t_tc_keep(PyObject *eng, PyObject *cs, PyObject *d, PyObject *cout, const IQ *z)
{
    __typeof__(t_tc[0]) *e = t_tc_slot(eng, 1);
    long long k[IK_COUNT], lim;
    if (e->busy) /* (an engine's call under way, its settings read from here: this one not kept) */
        return;
    if (iq_consts(PyTuple_GET_ITEM(cs, 2), k, &lim) < 0) { /* (cached by the parse just done: no error) */
        PyErr_Clear();
        return;
    }
    e->eng = eng;
    Py_XSETREF(e->cs, Py_NewRef(cs));
    e->dict = d;
    e->dver = rx_dver(d);
    e->cout = cout;
    int ca = t_absent(eng, d, T_ONCREDIT); /* (no on_credit of its own in that dict: iq_on_credit's check too) */
    if (ca < 0)
        PyErr_Clear();
    e->credit = ca > 0;
    memcpy(e->k, z->k, sizeof e->k);
    e->lim = lim;
}
#endif

/* eng.<slot> = eng.<name>() (a router's core state made at its first round or frame, as its method makes
 * it; ``s`` the name's interned str, made at the first call): 0, -1 error */
static int t_state_made(PyObject *eng, PyObject **s, const char *name, int slot)
{
    if (*s == NULL && (*s = PyUnicode_InternFromString(name)) == NULL)
        return -1;
    PyObject *made = PyObject_CallMethodNoArgs(eng, *s);
    if (made == NULL)
        return -1;
    eslot_set(eng, slot, made);
    Py_DECREF(made);
    return 0;
}

/* InputQueuedEngine.on_timer(now) in the plain case: 0 done (*out_p the frames granted, a new
 * list), 1 not this case (nothing changed: Python's method), -1 error. */
static int iq_on_timer(PyObject *eng, PyObject *tt, PyObject **out_p)
{
    if (IQEngT != NULL && Py_TYPE(eng) == IQEngT && ESLOT(eng, T_CST) == Py_None && t_method_is(T_ONTIMER, iq_fn_timer)) {
        /* (its first round: ``self._cst = self._core_state()``, as the method does once no switch timer of
         * its own is due -- then on as with any other) */
        PyObject **dp = _PyObject_GetDictPtr(eng), *b = ESLOT(eng, T_BTIMER);
        long long bt, now;
        if (dp != NULL && *dp != NULL && PyDict_CheckExact(*dp) && t_absent(eng, *dp, T_ONTIMER) > 0 && b != NULL &&
            get_ll(tt, &now) && (b == Py_None || (get_ll(b, &bt) && bt > now))) {
            static PyObject *s_cs;
            if (t_state_made(eng, &s_cs, "_core_state", T_CST) < 0)
                return -1;
        }
        PyErr_Clear();
    }
    PyObject *cs, *d = NULL, *v[T_N];
    IQ z; /* (the round's and _retime's arguments parsed once) */
    int hit = 0;
#if RX_KEEP
    __typeof__(t_tc[0]) *kept = NULL; /* (its entry, busy while the call reads its settings there) */
    hit = t_tc_hit(eng, tt, &cs, &v[T_COUT], &z);
#endif
    if (!hit && (d = iq_plain_dict(eng, iq_fn_timer, T_ONTIMER, &cs)) == NULL)
        return 1;
    v[T_BTIMER] = ESLOT(eng, T_BTIMER), v[T_NEXT] = ESLOT(eng, T_NEXT), v[T_RNOW] = ESLOT(eng, T_RNOW);
    v[T_STATS] = ESLOT(eng, T_STATS), v[T_ACTIVE] = ESLOT(eng, T_ACTIVE), v[T_FRESH] = ESLOT(eng, T_FRESH);
    v[T_UP] = ESLOT(eng, T_UP), v[T_GRANTED] = ESLOT(eng, T_GRANTED), v[T_SLOT] = ESLOT(eng, T_SLOT);
    v[T_TIMER] = ESLOT(eng, T_TIMER);
    if (!v[T_BTIMER] || !v[T_NEXT] || !v[T_RNOW] || !v[T_STATS] || !v[T_ACTIVE] || !v[T_FRESH] || !v[T_UP] ||
        !v[T_GRANTED] || !v[T_SLOT] || !v[T_TIMER] || (!hit && (v[T_COUT] = t_cout(eng, d)) == NULL)) {
        PyErr_Clear();
        return 1; /* (not set: Python's, which says so) */
    }
    long long now, bt = 0, nxt, rnow, inf;
    if (!get_ll(tt, &now) || (v[T_BTIMER] != Py_None && !get_ll3(v[T_BTIMER], &bt)) || !get_ll3(v[T_NEXT], &nxt) ||
        !get_ll(v[T_RNOW], &rnow) || !PyList_CheckExact(v[T_ACTIVE]) || !PyList_CheckExact(v[T_FRESH]) ||
        !PyDict_CheckExact(v[T_STATS]) || !get_ll3(PyTuple_GET_ITEM(PyTuple_GET_ITEM(cs, 2), IK_INF), &inf) ||
        (v[T_BTIMER] != Py_None && bt <= now))
        return 1; /* (the switch's own timer due: Python injects its frames) */
    /* (held for the call, as Python's locals and arguments hold them: the round may run Python's up or
     * credit_out, which could rebind the engine's _cst, _up or credit_out and free what it held) */
    PyObject *hold[4] = {Py_NewRef(eng), Py_NewRef(cs), Py_NewRef(v[T_UP]), Py_NewRef(v[T_COUT])};
    PyObject *st = PyTuple_GET_ITEM(cs, 1), *ks = PyTuple_GET_ITEM(cs, 2), *fresh = Py_NewRef(v[T_FRESH]);
    PyObject *out = NULL, *granted = Py_NewRef(v[T_GRANTED]), *t = NULL;
    int rc = -1, again = rnow == now;
    PyObject *rargs[7] = {st, ks, fresh, tt, again ? Py_True : Py_False, v[T_UP], v[T_COUT]};
    if (!hit) {
        if (iq_parse(&z, rargs, 7, 7, "InputQueuedEngine: the compiled round's state") < 0)
            goto done;
#if RX_KEEP
        t_tc_keep(eng, cs, d, v[T_COUT], &z);
#endif
    }
#if RX_KEEP
    else
        (kept = t_tc_slot(eng, 0))->busy++;
#endif
    z.up = v[T_UP];
    z.credit_out = v[T_COUT];
    z.shared_empty = 1; /* (window.h reads the frames list's size only, when it is empty) */
    if (nxt <= now) { /* (Rounds._round, as on_timer inlines it) */
        eslot_set_time(eng, T_RNOW, tt);
        if (iqr_count_add(v[T_STATS], t_s[again ? T_REPEATS : T_ROUNDS], 1, 0, "iq_stats") < 0)
            goto done;
        if (PyList_GET_SIZE(v[T_ACTIVE])) {
            if ((out = iq_round_z(&z, again)) == NULL)
                goto done;
            int g = PyList_GET_SIZE(out) > 0;
            if (!g && again && (g = PyObject_IsTrue(granted)) < 0)
                goto done;
            Py_SETREF(granted, Py_NewRef(g ? Py_True : Py_False));
            eslot_set(eng, T_GRANTED, granted);
        }
    }
    if (out == NULL && (out = iq_empty_list()) == NULL)
        goto done;
    /* (``_retime``'s compiled twin; the slots read again: the round ran Python's credit_out) */
    PyObject *slot = ESLOT(eng, T_SLOT), *b = ESLOT(eng, T_BTIMER);
    if (slot == NULL || b == NULL) {
        PyErr_SetString(PyExc_AttributeError, "InputQueuedEngine: slot or _btimer unset");
        goto done;
    }
    long long sl, tv, bv;
    int gr = granted == Py_True ? 1 : granted == Py_False ? 0 : PyObject_IsTrue(granted);
    if (gr < 0 || !get_ll(slot, &sl)) {
        iq_bad("granted, slot: a bool and an integer");
        goto done;
    }
    Py_INCREF(b);
    t = iq_retime_z(&z, gr, sl);
    if (t == NULL || !get_ll3(t, &tv)) {
        Py_DECREF(b);
        if (t != NULL && !PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "iq_retime: not an integer");
        goto done;
    }
    eslot_set_time(eng, T_NEXT, t);
    PyObject *tm = t;
    if (b != Py_None && get_ll3(b, &bv) && bv < tv)
        tm = b, tv = bv;
    eslot_set_time(eng, T_TIMER, tv >= inf ? Py_None : tm);
    Py_DECREF(b);
    *out_p = out;
    out = NULL;
    n_iq_timers++;
    rc = 0;
done:
#if RX_KEEP
    if (kept != NULL)
        kept->busy--;
#endif
    Py_XDECREF(out);
    Py_XDECREF(t);
    Py_DECREF(granted);
    Py_DECREF(fresh);
    for (int k = 0; k < 4; k++)
        Py_DECREF(hold[k]);
    return rc;
}

/* ``Rounds._credit_wakes`` in the plain case (no high-priority copy, the round's methods the class's
 * own: ``_cw`` is ``vc_release != tail_credit``): may a round at ``now``, after a credit came, grant or
 * change anything? 1 yes, 0 no (the credit wakes no round), -1 error. ``st``, ``ks``: the ``_cst``
 * state and settings tuples; ``rnow``: the engine's ``_rnow``. */
static int iq_credit_wakes(PyObject *st, PyObject *ks, long long now, long long rnow)
{
    long long rule, K, x = 0;
    if (!get_ll(PyTuple_GET_ITEM(ks, IK_VCRULE), &rule) || !get_ll(PyTuple_GET_ITEM(ks, IK_RK), &K))
        return iq_bad("the settings are not integers");
    if (rule == 2)
        return 1; /* (tail_credit: a tail's credit frees its VC from the next slot once the instant's round ran) */
    PyObject *rcq = PyTuple_GET_ITEM(st, IS_RCQ), *va = PyTuple_GET_ITEM(st, IS_VA), *chk = PyTuple_GET_ITEM(st, IS_CHK);
    PyObject *sa = PyTuple_GET_ITEM(st, IS_SA), *oobj, *lst;
    if (!PyList_CheckExact(rcq) || !PyDict_CheckExact(va) || !PyList_CheckExact(chk) || !PyDict_CheckExact(sa))
        return iq_bad("the round's state is not laid out as iq_setup's");
    if (PyList_GET_SIZE(rcq)) {
        if (!get_ll(PyList_GET_ITEM(rcq, 0), &x))
            return iq_bad("a route-computation key is not an integer");
        if (x < (now + 1) * K)
            return 1;
    }
    Py_ssize_t pos = 0;
    while (iw_dict_next(va, &pos, &oobj, &lst)) {
        long long o;
        if (!get_ll(oobj, &o))
            return iq_bad("an output is not an integer");
        if (o < 0 || o >= PyList_GET_SIZE(chk) || !get_ll3(PyList_GET_ITEM(chk, o), &x))
            return iq_bad("an output's VC check time is not an integer");
        if (x <= now)
            return 1; /* (its VC allocator would be asked) */
    }
    int again = rnow == now;
    pos = 0;
    while (iw_dict_next(sa, &pos, &oobj, &lst)) {
        long long o, pl = 0;
        if (!get_ll(oobj, &o) || li(PyTuple_GET_ITEM(st, IS_OUTR), o, &x) < 0)
            return iq_bad("an output is not an integer");
        if (x > now)
            continue;
        PyObject *cr = lget(PyTuple_GET_ITEM(st, IS_CREDITS), o);
        if (cr == NULL || li(PyTuple_GET_ITEM(st, IS_POOLS), o, &pl) < 0)
            return -1;
        if (!PyList_CheckExact(lst))
            return iq_bad("an output's copies are not a list");
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(lst); i++) {
            PyObject *c = PyList_GET_ITEM(lst, i), *pkt;
            long long sa_at, sa_try, p, ovc, vpart, need, crw = 0;
            if (Py_TYPE(c) != CopyT)
                return iq_bad("a copy is not a Copy");
            IRD(c, c_sa_at, sa_at);
            IRD(c, c_sa_try, sa_try);
            if (sa_at > now || (again && sa_try == now))
                continue;
            pkt = SLOT(c, c_pkt);
            if (pkt == NULL || Py_TYPE(pkt) != PacketT)
                return iq_bad("a copy's packet is not a Packet");
            IRD(pkt, p_port, p);
            if (li(PyTuple_GET_ITEM(st, IS_INR), p, &x) < 0)
                return -1;
            if (x > now)
                continue;
            if (cr != Py_None) {
                IRD(c, c_ovc, ovc);
                IRD(c, c_vpart, vpart);
                IRD(c, c_need, need);
                if (li(cr, ovc, &crw) < 0)
                    return -1;
                if ((crw < vpart || pl < need - vpart) && pl < need)
                    continue; /* (no room for it downstream) */
            }
            return 1;
        }
    }
    return 0;
fail:
    return -1;
}

/* InputQueuedEngine.on_credit(port, vc, nbytes, now, pool, frames) in the plain case (a VC's credit:
 * no pool, no frames, no VC waiting for its tail's credit, within the receiver's buffer): 0 done, 1
 * not this case (nothing changed: Python's method), -1 error. */
static int iq_on_credit(PyObject *eng, long long port, long long vc, long long nbytes, PyObject *now, long long pool,
                        long long frames)
{
    PyObject *cs, *d = NULL;
#if RX_KEEP
    /* (the engine as iq_on_timer last kept it, no on_credit of its own then: what iq_plain_dict checks) */
    __typeof__(t_tc[0]) *e = t_tc_slot(eng, 0);
    PyObject **dp;
    if (e != NULL && e->credit && e->cs == ESLOT(eng, T_CST) && Py_TYPE(eng) == IQEngT &&
        t_method_is(T_ONCREDIT, iq_fn_credit) && (dp = _PyObject_GetDictPtr(eng)) != NULL && *dp == e->dict &&
        rx_dver(e->dict) == e->dver)
        d = e->dict, cs = e->cs;
    else
#endif
        d = iq_plain_dict(eng, iq_fn_credit, T_ONCREDIT, &cs);
    if (d == NULL || pool || frames)
        return 1;
    PyObject *tw = ESLOT(eng, T_TAILW), *nx = ESLOT(eng, T_NEXT), *tm = ESLOT(eng, T_TIMER), *st = PyTuple_GET_ITEM(cs, 1);
    PyObject *rn = ESLOT(eng, T_RNOW), *ks = PyTuple_GET_ITEM(cs, 2);
    long long t, nv, tv = 0, rnow;
    if (tw == NULL || nx == NULL || tm == NULL || !PyDict_CheckExact(tw) || PyDict_GET_SIZE(tw) ||
        !PyTuple_CheckExact(st) || PyTuple_GET_SIZE(st) != IS_N || !get_ll(now, &t) || !get_ll3(nx, &nv) ||
        (tm != Py_None && !get_ll3(tm, &tv)) || !get_ll(rn, &rnow) || !PyTuple_CheckExact(ks) ||
        PyTuple_GET_SIZE(ks) != IK_COUNT) {
        PyErr_Clear();
        return 1;
    }
    PyObject *credits = PyTuple_GET_ITEM(st, IS_CREDITS), *caps = PyTuple_GET_ITEM(st, IS_CAPS);
    if (!PyList_CheckExact(credits) || !PyList_CheckExact(caps) || port < 0)
        return 1;
    if (port < PyList_GET_SIZE(credits)) {
        PyObject *cr = PyList_GET_ITEM(credits, port), *cap;
        long long have, cap0;
        if (cr != Py_None) {
            if (!PyList_CheckExact(cr) || PyList_GET_SIZE(cr) < 1 || port >= PyList_GET_SIZE(caps) ||
                !PyTuple_CheckExact(cap = PyList_GET_ITEM(caps, port)) || PyTuple_GET_SIZE(cap) < 1 ||
                !get_ll(PyTuple_GET_ITEM(cap, 0), &cap0))
                return 1;
            Py_ssize_t w = (Py_ssize_t)pymod(vc, PyList_GET_SIZE(cr));
            if (!get_ll(PyList_GET_ITEM(cr, w), &have) || have + nbytes > cap0)
                return 1; /* (above the receiver's buffer: Python's error) */
            if (iqr_put_ll(&((PyListObject *)cr)->ob_item[w], have + nbytes) < 0)
                return -1;
        } else
            return n_iq_credits++, 0; /* (unbounded: nothing to count, no round to wake) */
    } else
        return n_iq_credits++, 0;
    int wake = t < nv ? iq_credit_wakes(st, ks, t, rnow) : 0;
    if (wake < 0)
        return -1;
    if (wake) { /* (``_wake_at``) a copy waiting for this credit may go now */
        int later = tm == Py_None || t < tv; /* (tm read before _next's store may release it) */
        eslot_set(eng, T_NEXT, now);
        if (later)
            eslot_set(eng, T_TIMER, now);
    }
    n_iq_credits++;
    return 0;
}

/* InputQueuedEngine.receive(frame, port, now) when its compiled receive is chosen (``_crx`` a tuple:
 * CoreRound._core_receive_state) and takes the frame: 0 done (*out_p its result), 1 not this case
 * (nothing changed: Python's method, which asks the compiled receive again and goes on), -1 error. */
static int iq_on_receive(PyObject *eng, PyObject *frame, PyObject *port, PyObject *now, PyObject **out_p, int spare_refs)
{
    if (IQEngT == NULL || Py_TYPE(eng) != IQEngT || !t_method_is(T_RECEIVE, iq_fn_receive))
        return 1;
    PyObject **dp = _PyObject_GetDictPtr(eng), *rx;
    if (dp != NULL && *dp != NULL && ESLOT(eng, T_CRX) == Py_None && PyDict_CheckExact(*dp) &&
        t_absent(eng, *dp, T_RECEIVE) > 0) { /* (its first frame: ``self._crx = self._core_receive_state()``, as
                                                * the method's first lines do, then on as with any other) */
        static PyObject *s_crs;
        if (t_state_made(eng, &s_crs, "_core_receive_state", T_CRX) < 0)
            return -1;
    }
    if (dp == NULL || *dp == NULL || (rx = ESLOT(eng, T_CRX)) == NULL || !PyTuple_CheckExact(rx) ||
        PyTuple_GET_SIZE(rx) != 2 || !PyDict_CheckExact(*dp) || t_absent(eng, *dp, T_RECEIVE) <= 0) {
        PyErr_Clear();
        return 1;
    }
    PyObject *args[5] = {PyTuple_GET_ITEM(rx, 1), eng, frame, port, now};
    Py_INCREF(rx);
    rx_spare_refs = spare_refs; /* (read and cleared by the call) */
    PyObject *r = iq_receive(NULL, args, 5);
    Py_DECREF(rx);
    if (r == NULL)
        return -1;
    if (r == Py_None) {
        Py_DECREF(r);
        return 1;
    }
    *out_p = r;
    n_iq_frames++;
    return 0;
}

#endif /* EMU_CSRC_IQTIMER_H */
