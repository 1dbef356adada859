/* emu._core: the compiled core of the element loop (optional; emu.native chooses it).
 *
 * Three functions, each the exact twin of a pure-Python path it replaces, taking over only the
 * plain case and handing everything else back to Python before it has changed anything:
 *
 *   enqueue(port, frame, at)  -> start, or None        OutPort.enqueue without tracer, priority
 *                                                       overtaking, modelled framing or head flits
 *   forward(heap, t_end, ins, outs, busy, routes, delay) -> (n, now)
 *                                                       Element.run_window's frames-only loop for a
 *                                                       static-table switch (SwitchEngine.receive,
 *                                                       Element._emit, OutPort.enqueue): plain data
 *                                                       frames only; stops at the first other one
 *   hand_over(pending, heap, index, seq, flags, release, pool_flag)
 *                                                       -> (n, nbytes, seq, last arrival)
 *                                                       Element._transmit's in-memory hand-over
 *
 * The ports are slotted dataclasses (emu.port.OutPort / InPort): setup() reads the offsets of their
 * slots from the classes' member descriptors, so a slot is read and written in place; every object
 * of another type is refused (None / n = 0: Python does it). The frames stay real bytes: a switch
 * builds the frame it sends (hops + 1, and its FCS unless the port defers it), as Python does.
 * Figures are identical by construction and by test (tests/test_native.py runs the golden runs on
 * both paths).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static PyTypeObject *OutPortT, *InPortT, *LazyT, *SenderT, *ReceiverT;
static PyObject *CausalityError, *s_heap, *s_safe_time, *s_domain, *s_frames_arrived;
static Py_ssize_t i_peer_addr;
static PyObject *s_append, *s_popleft, *s_make, *s_plain;

/* OutPort slots */
static Py_ssize_t o_free_at, o_pending, o_defer_fcs, o_queued, o_queued_bytes, o_up, o_timeline, o_flow,
    o_priority, o_peak_f, o_peak_b, o_busy_ns, o_tracer, o_head_bytes, o_framing, o_bps, o_latency;
static Py_ssize_t o_local, o_ctl, o_fault_rng, o_link, o_sent_done, o_tx_frames, o_tx_bytes;
/* InPort slots */
static Py_ssize_t i_timeline, i_buf, i_index, i_link, i_rx_frames, i_rx_bytes, i_name;
/* LinkSender / LinkReceiver slots */
static Py_ssize_t ls_seq, ls_retained, ls_prefix, ls_prefix_pool, lr_expected;

/* frame layout and codes (given by emu.element at setup: one source of truth) */
static long C_MAGIC, C_VERSION, C_KIND_DATA, C_KIND_POOL, C_OUTER_LEN, C_MAX_DATAGRAM, C_POOL, C_CLEAN, C_NOFCS, C_FCS_RESIDUE, C_CREDIT_LEN, C_CREDIT_HI, C_CREDIT_LO, C_ET_HI, C_ET_LO, C_HDR_LEN, C_DST_OFF,
    C_PTYPE_OFF, C_FLAGS_OFF, C_HOPS_OFF, C_PRIO_OFF, C_FLAG_BCAST;
static int ready = 0;
static unsigned long long n_forwarded, n_enqueued, n_handed, n_records, n_taken; /* what the core did (counts()) */
/* the switch's part (given by emu.switch.forward at its import: the substrate does not know it) */
static long C_MAX_HOPS;
static unsigned char decline[256]; /* packet types a plain switch does not forward by its table */
static int switch_ready = 0;

/* what emu/native.py expects: raise it whenever a function's arguments or results change */
#define CORE_API 1

#define SLOT(obj, off) (*(PyObject **)((char *)(obj) + (off)))

/* a new tuple of ``n`` new references (stolen; NULL if any is NULL, all released) */
static PyObject *tuple_steal(Py_ssize_t n, PyObject **items)
{
    PyObject *t = NULL;
    for (Py_ssize_t k = 0; k < n; k++)
        if (items[k] == NULL)
            goto fail;
    t = PyTuple_New(n);
    if (t == NULL)
        goto fail;
    for (Py_ssize_t k = 0; k < n; k++)
        PyTuple_SET_ITEM(t, k, items[k]);
    return t;
fail:
    for (Py_ssize_t k = 0; k < n; k++)
        Py_XDECREF(items[k]);
    return NULL;
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

static inline int get_ll(PyObject *o, long long *v)
{
    if (o == NULL || !PyLong_CheckExact(o))
        return 0;
    int overflow;
    *v = PyLong_AsLongLongAndOverflow(o, &overflow);
    return !overflow && !(*v == -1 && PyErr_Occurred());
}

static inline int set_ll(PyObject *obj, Py_ssize_t off, long long v)
{
    PyObject *n = PyLong_FromLongLong(v);
    if (n == NULL)
        return -1;
    Py_XSETREF(SLOT(obj, off), n);
    return 0;
}

static PyObject *setup(PyObject *self, PyObject *args)
{
    PyObject *outp, *inp, *lazy, *sender, *receiver, *causality, *consts;
    if (!PyArg_ParseTuple(args, "OOOOOOO!", &outp, &inp, &lazy, &sender, &receiver, &causality, &PyTuple_Type, &consts))
        return NULL;
    if (!PyType_Check(outp) || !PyType_Check(inp) || !PyType_Check(lazy) || !PyType_Check(sender) ||
        !PyType_Check(receiver) || !PyExceptionClass_Check(causality)) {
        PyErr_SetString(PyExc_TypeError, "setup: OutPort, InPort, LazyFrame, LinkSender, LinkReceiver must be classes, "
                                         "CausalityError an exception");
        return NULL;
    }
    SenderT = (PyTypeObject *)Py_NewRef(sender);
    ReceiverT = (PyTypeObject *)Py_NewRef(receiver);
    Py_XSETREF(CausalityError, Py_NewRef(causality));
    ready = 0;
    OutPortT = (PyTypeObject *)outp;
    InPortT = (PyTypeObject *)inp;
    LazyT = (PyTypeObject *)lazy;
    Py_INCREF(outp);
    Py_INCREF(inp);
    Py_INCREF(lazy);
    struct { const char *n; Py_ssize_t *o; } os[] = {
        {"free_at", &o_free_at}, {"pending", &o_pending}, {"defer_fcs", &o_defer_fcs}, {"queued", &o_queued},
        {"queued_bytes", &o_queued_bytes}, {"up", &o_up}, {"timeline", &o_timeline}, {"flow", &o_flow},
        {"priority", &o_priority}, {"peak_queue_frames", &o_peak_f}, {"peak_queue_bytes", &o_peak_b},
        {"busy_ns", &o_busy_ns}, {"tracer", &o_tracer}, {"head_bytes", &o_head_bytes}, {"framing", &o_framing},
        {"bandwidth_bps", &o_bps}, {"latency_ns", &o_latency}, {"local", &o_local}, {"ctl", &o_ctl},
        {"fault_rng", &o_fault_rng}, {"link", &o_link}, {"sent_done", &o_sent_done}, {"tx_frames", &o_tx_frames},
        {"tx_bytes", &o_tx_bytes}};
    for (size_t k = 0; k < sizeof os / sizeof os[0]; k++)
        if (slot_offset(OutPortT, os[k].n, os[k].o) < 0)
            return NULL;
    if (slot_offset(InPortT, "timeline", &i_timeline) < 0 || slot_offset(InPortT, "buf", &i_buf) < 0 ||
        slot_offset(InPortT, "index", &i_index) < 0 || slot_offset(InPortT, "link", &i_link) < 0 ||
        slot_offset(InPortT, "rx_frames", &i_rx_frames) < 0 || slot_offset(InPortT, "rx_bytes", &i_rx_bytes) < 0 ||
        slot_offset(InPortT, "name", &i_name) < 0 || slot_offset(InPortT, "peer_addr", &i_peer_addr) < 0 || slot_offset(SenderT, "seq", &ls_seq) < 0 ||
        slot_offset(SenderT, "retained", &ls_retained) < 0 || slot_offset(SenderT, "prefix", &ls_prefix) < 0 ||
        slot_offset(SenderT, "prefix_pool", &ls_prefix_pool) < 0 ||
        slot_offset(ReceiverT, "expected", &lr_expected) < 0)
        return NULL;
    long *cs[] = {&C_MAGIC, &C_VERSION, &C_KIND_DATA, &C_KIND_POOL, &C_OUTER_LEN, &C_MAX_DATAGRAM, &C_POOL, &C_CLEAN, &C_NOFCS, &C_FCS_RESIDUE, &C_CREDIT_LEN, &C_CREDIT_HI, &C_CREDIT_LO, &C_ET_HI, &C_ET_LO, &C_HDR_LEN,
                  &C_DST_OFF, &C_PTYPE_OFF, &C_FLAGS_OFF, &C_HOPS_OFF, &C_PRIO_OFF, &C_FLAG_BCAST};
    if (PyTuple_GET_SIZE(consts) != (Py_ssize_t)(sizeof cs / sizeof cs[0])) {
        PyErr_SetString(PyExc_ValueError, "setup: wrong number of constants");
        return NULL;
    }
    for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) {
        *cs[k] = PyLong_AsLong(PyTuple_GET_ITEM(consts, k));
        if (*cs[k] == -1 && PyErr_Occurred())
            return NULL;
    }
    /* the layout this code reads and writes: anything else is refused (pure Python runs) */
    long top = C_DST_OFF + 3;
    long offs[] = {C_PTYPE_OFF, C_FLAGS_OFF, C_HOPS_OFF, C_PRIO_OFF};
    for (size_t k = 0; k < sizeof offs / sizeof offs[0]; k++)
        if (offs[k] > top)
            top = offs[k];
    if (C_OUTER_LEN != 28 || C_CREDIT_LEN < 14 || C_HDR_LEN <= top || C_HDR_LEN < 14 || C_DST_OFF < 0 ||
        C_MAX_DATAGRAM < C_OUTER_LEN || C_MAX_DATAGRAM > 65507 || C_POOL < 0 || C_CLEAN <= 0 || C_NOFCS <= 0) {
        PyErr_SetString(PyExc_ValueError, "setup: a frame or record layout this core was not written for");
        return NULL;
    }
    ready = 1;
    Py_RETURN_NONE;
}

static PyObject *switch_setup(PyObject *self, PyObject *args)
{
    PyObject *decl;
    long max_hops;
    if (!PyArg_ParseTuple(args, "O!l", &PyBytes_Type, &decl, &max_hops))
        return NULL;
    if (PyBytes_GET_SIZE(decl) != 256 || max_hops < 1 || max_hops > 256) {
        PyErr_SetString(PyExc_ValueError, "switch_setup: a 256-entry decline table and a hop limit of 1..256");
        return NULL;
    }
    memcpy(decline, PyBytes_AS_STRING(decl), 256);
    C_MAX_HOPS = max_hops;
    switch_ready = 1;
    Py_RETURN_NONE;
}

/* Is ``p`` an output port the plain path may take (no tracer, up, no schedule, no credit flow,
 * plain framing, no head flits)? Its defer_fcs in *defer. */
static int plain_port(PyObject *p, int *defer)
{
    if (Py_TYPE(p) != OutPortT)
        return 0;
    if (SLOT(p, o_tracer) != Py_None || SLOT(p, o_up) != Py_True || SLOT(p, o_timeline) != Py_None ||
        SLOT(p, o_flow) != Py_None)
        return 0;
    PyObject *hb = SLOT(p, o_head_bytes);
    if (hb == NULL || !PyLong_CheckExact(hb) || Py_SIZE(hb) != 0) /* (not 0: an int of no digits) */
        return 0;
    PyObject *fr = SLOT(p, o_framing);
    if (fr == NULL)
        return 0;
    PyObject *plain = PyObject_GetAttr(fr, s_plain);
    if (plain == NULL) {
        PyErr_Clear();
        return 0;
    }
    Py_DECREF(plain);
    if (plain != Py_True)
        return 0;
    PyObject *d = SLOT(p, o_defer_fcs);
    if (d != Py_True && d != Py_False)
        return 0;
    *defer = d == Py_True;
    return 1;
}

/* -- CRC-32 (IEEE 802.3, zlib's crc32: reflected 0xEDB88320, init and final xor 0xFFFFFFFF), by
 * slices of 8 bytes: the frames' FCS and its check on receipt, on the bytes in place (no copies) */
static uint32_t crc_t[8][256];

static void crc_init(void)
{
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_t[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++)
        for (int k = 1; k < 8; k++)
            crc_t[k][n] = crc_t[0][crc_t[k - 1][n] & 0xFF] ^ (crc_t[k - 1][n] >> 8);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#define HAVE_CLMUL_CRC 1
/* CRC-32 by carry-less multiplication (Intel, "Fast CRC Computation for Generic Polynomials Using
 * PCLMULQDQ"; the bit-reflected constants as zlib-chromium uses them): ``len`` >= 64, a multiple of
 * 16; ``crc`` the running state (inverted). Checked against zlib by tests/test_native.py. */
__attribute__((target("pclmul,sse4.1"))) static uint32_t crc32_clmul(const unsigned char *buf, Py_ssize_t len,
                                                                     uint32_t crc)
{
    static const uint64_t k1k2[2] __attribute__((aligned(16))) = {0x0154442bd4ULL, 0x01c6e41596ULL};
    static const uint64_t k3k4[2] __attribute__((aligned(16))) = {0x01751997d0ULL, 0x00ccaa009eULL};
    static const uint64_t k5k0[2] __attribute__((aligned(16))) = {0x0163cd6124ULL, 0x0000000000ULL};
    static const uint64_t poly[2] __attribute__((aligned(16))) = {0x01db710641ULL, 0x01f7011641ULL};
    __m128i x0, x1, x2, x3, x4, x5, x6, x7, x8, y5, y6, y7, y8;

    x1 = _mm_loadu_si128((const __m128i *)(buf + 0x00));
    x2 = _mm_loadu_si128((const __m128i *)(buf + 0x10));
    x3 = _mm_loadu_si128((const __m128i *)(buf + 0x20));
    x4 = _mm_loadu_si128((const __m128i *)(buf + 0x30));
    x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128((int)crc));
    x0 = _mm_load_si128((const __m128i *)k1k2);
    buf += 64;
    len -= 64;
    while (len >= 64) { /* fold four blocks of 16 at a time */
        x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
        x6 = _mm_clmulepi64_si128(x2, x0, 0x00);
        x7 = _mm_clmulepi64_si128(x3, x0, 0x00);
        x8 = _mm_clmulepi64_si128(x4, x0, 0x00);
        x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
        x2 = _mm_clmulepi64_si128(x2, x0, 0x11);
        x3 = _mm_clmulepi64_si128(x3, x0, 0x11);
        x4 = _mm_clmulepi64_si128(x4, x0, 0x11);
        y5 = _mm_loadu_si128((const __m128i *)(buf + 0x00));
        y6 = _mm_loadu_si128((const __m128i *)(buf + 0x10));
        y7 = _mm_loadu_si128((const __m128i *)(buf + 0x20));
        y8 = _mm_loadu_si128((const __m128i *)(buf + 0x30));
        x1 = _mm_xor_si128(_mm_xor_si128(x1, x5), y5);
        x2 = _mm_xor_si128(_mm_xor_si128(x2, x6), y6);
        x3 = _mm_xor_si128(_mm_xor_si128(x3, x7), y7);
        x4 = _mm_xor_si128(_mm_xor_si128(x4, x8), y8);
        buf += 64;
        len -= 64;
    }
    x0 = _mm_load_si128((const __m128i *)k3k4); /* into 128 bits */
    x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
    x1 = _mm_xor_si128(_mm_xor_si128(x1, x2), x5);
    x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
    x1 = _mm_xor_si128(_mm_xor_si128(x1, x3), x5);
    x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
    x1 = _mm_xor_si128(_mm_xor_si128(x1, x4), x5);
    while (len >= 16) { /* single blocks of 16 */
        x2 = _mm_loadu_si128((const __m128i *)buf);
        x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
        x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
        x1 = _mm_xor_si128(_mm_xor_si128(x1, x2), x5);
        buf += 16;
        len -= 16;
    }
    x2 = _mm_clmulepi64_si128(x1, x0, 0x10); /* 128 bits to 64 */
    x3 = _mm_setr_epi32(~0, 0, ~0, 0);
    x1 = _mm_srli_si128(x1, 8);
    x1 = _mm_xor_si128(x1, x2);
    x0 = _mm_loadl_epi64((const __m128i *)k5k0);
    x2 = _mm_srli_si128(x1, 4);
    x1 = _mm_and_si128(x1, x3);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_xor_si128(x1, x2);
    x0 = _mm_load_si128((const __m128i *)poly); /* Barrett reduction to 32 bits */
    x2 = _mm_and_si128(x1, x3);
    x2 = _mm_clmulepi64_si128(x2, x0, 0x10);
    x2 = _mm_and_si128(x2, x3);
    x2 = _mm_clmulepi64_si128(x2, x0, 0x00);
    x1 = _mm_xor_si128(x1, x2);
    return (uint32_t)_mm_extract_epi32(x1, 1);
}
static int use_clmul = 0;
#endif

static uint32_t crc32_of(const unsigned char *b, Py_ssize_t len)
{
    uint32_t c = 0xFFFFFFFFu;
#ifdef HAVE_CLMUL_CRC
    if (use_clmul && len >= 64) {
        Py_ssize_t chunk = len & ~(Py_ssize_t)15;
        c = crc32_clmul(b, chunk, c);
        b += chunk;
        len -= chunk;
    }
#endif
    while (len >= 8) {
        uint32_t lo = c ^ ((uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24);
        uint32_t hi = (uint32_t)b[4] | (uint32_t)b[5] << 8 | (uint32_t)b[6] << 16 | (uint32_t)b[7] << 24;
        c = crc_t[7][lo & 0xFF] ^ crc_t[6][(lo >> 8) & 0xFF] ^ crc_t[5][(lo >> 16) & 0xFF] ^ crc_t[4][lo >> 24] ^
            crc_t[3][hi & 0xFF] ^ crc_t[2][(hi >> 8) & 0xFF] ^ crc_t[1][(hi >> 16) & 0xFF] ^ crc_t[0][hi >> 24];
        b += 8;
        len -= 8;
    }
    while (len--)
        c = crc_t[0][(c ^ *b++) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

static PyObject *crc32(PyObject *self, PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    uint32_t c = crc32_of(view.buf, view.len);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(c);
}

/* -- the event heaps: heapq's algorithm exactly (so a heap is laid out as heapq would lay it out),
 * with the comparison of the entries (time, port, sequence, ...) done on their leading integers */
static inline int leading(PyObject *t, long long *k)
{
    if (!PyTuple_CheckExact(t) || PyTuple_GET_SIZE(t) < 3)
        return 0;
    for (int i = 0; i < 3; i++) {
        PyObject *o = PyTuple_GET_ITEM(t, i);
        if (!PyLong_CheckExact(o))
            return 0;
        int overflow;
        k[i] = PyLong_AsLongLongAndOverflow(o, &overflow);
        if (overflow)
            return 0;
    }
    return 1;
}

/* a < b: 1, 0, or -1 (error) */
static int entry_lt(PyObject *a, PyObject *b)
{
    long long ka[3], kb[3];
    if (leading(a, ka) && leading(b, kb)) {
        for (int i = 0; i < 3; i++)
            if (ka[i] != kb[i])
                return ka[i] < kb[i];
        /* equal keys (never, in a run): the tuples decide, as heapq's comparison would */
    }
    return PyObject_RichCompareBool(a, b, Py_LT);
}

static int sift_down(PyObject *heap, Py_ssize_t startpos, Py_ssize_t pos)
{
    PyObject **arr = ((PyListObject *)heap)->ob_item;
    PyObject *newitem = arr[pos];
    while (pos > startpos) {
        Py_ssize_t parentpos = (pos - 1) >> 1;
        PyObject *parent = arr[parentpos];
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
    Py_INCREF(lastelt);
    if (PyList_SetSlice(heap, n - 1, n, NULL) < 0) {
        Py_DECREF(lastelt);
        return NULL;
    }
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

/* OutPort.enqueue's plain tail for ``frame`` (bytes, its FCS already on unless deferred) of ``n``
 * modelled bytes handed over at ``at`` with the port free at ``free``: the port's times, occupancy
 * and pending queue. Returns start, or -1 on error (a Python exception set). */
static long long enqueue_tail(PyObject *p, PyObject *frame, long long n, long long at, long long free)
{
    long long bps, lat, busy, qb, peakf, peakb;
    if (!get_ll(SLOT(p, o_bps), &bps) || bps <= 0 || !get_ll(SLOT(p, o_latency), &lat) ||
        !get_ll(SLOT(p, o_busy_ns), &busy) || !get_ll(SLOT(p, o_queued_bytes), &qb) ||
        !get_ll(SLOT(p, o_peak_f), &peakf) || !get_ll(SLOT(p, o_peak_b), &peakb)) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "emu._core: an output port's counters are not integers");
        return -1;
    }
    long long start = at > free ? at : free;
    long long ser = (n * 8000000000LL + bps - 1) / bps;
    long long done = start + ser;
    PyObject *q = SLOT(p, o_queued);
    for (;;) {
        Py_ssize_t len = PySequence_Size(q);
        if (len < 0)
            return -1;
        if (len == 0)
            break;
        PyObject *head = PySequence_GetItem(q, 0);
        if (head == NULL)
            return -1;
        long long hd, hn;
        int ok = PyTuple_Check(head) && PyTuple_GET_SIZE(head) == 2 && get_ll(PyTuple_GET_ITEM(head, 0), &hd) &&
                 get_ll(PyTuple_GET_ITEM(head, 1), &hn);
        Py_DECREF(head);
        if (!ok) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "emu._core: a queued entry is not (done, bytes)");
            return -1;
        }
        if (hd > at)
            break;
        PyObject *r = PyObject_CallMethodNoArgs(q, s_popleft);
        if (r == NULL)
            return -1;
        Py_DECREF(r);
        qb -= hn;
    }
    PyObject *entry = tuple_steal(2, (PyObject *[]){PyLong_FromLongLong(done), PyLong_FromLongLong(n)});
    if (entry == NULL)
        return -1;
    PyObject *r = PyObject_CallMethodOneArg(q, s_append, entry);
    Py_DECREF(entry);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    qb += n;
    Py_ssize_t qlen = PySequence_Size(q);
    if (qlen < 0)
        return -1;
    if (set_ll(p, o_free_at, done) < 0 || set_ll(p, o_busy_ns, busy + ser) < 0 || set_ll(p, o_queued_bytes, qb) < 0)
        return -1;
    if (qlen > peakf && set_ll(p, o_peak_f, qlen) < 0)
        return -1;
    if (qb > peakb && set_ll(p, o_peak_b, qb) < 0)
        return -1;
    PyObject *pe = tuple_steal(4, (PyObject *[]){PyLong_FromLongLong(start), PyLong_FromLongLong(done + lat),
                                                 Py_NewRef(frame), Py_NewRef(Py_False)});
    if (pe == NULL)
        return -1;
    r = PyObject_CallMethodOneArg(SLOT(p, o_pending), s_append, pe);
    Py_DECREF(pe);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return start;
}

/* ``frame`` (len flen, from ``src``) with its FCS appended (CRC-32, little-endian), the hop count
 * byte at ``hops_off`` raised by one when ``hops_off`` >= 0. */
static PyObject *with_fcs(const char *src, Py_ssize_t flen, Py_ssize_t hops_off)
{
    PyObject *out = PyBytes_FromStringAndSize(NULL, flen + 4);
    if (out == NULL)
        return NULL;
    unsigned char *b = (unsigned char *)PyBytes_AS_STRING(out);
    memcpy(b, src, flen);
    if (hops_off >= 0)
        b[hops_off] = (b[hops_off] + 1) & 0xFF;
    uint32_t crc = crc32_of(b, flen);
    b[flen] = crc & 0xFF;
    b[flen + 1] = (crc >> 8) & 0xFF;
    b[flen + 2] = (crc >> 16) & 0xFF;
    b[flen + 3] = (crc >> 24) & 0xFF;
    return out;
}

static PyObject *enqueue(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "enqueue(port, frame, at)");
        return NULL;
    }
    PyObject *p = args[0], *frame = args[1];
    long long at, free;
    int defer;
    if (!ready || !PyBytes_CheckExact(frame) || !plain_port(p, &defer) || !get_ll(args[2], &at) ||
        !get_ll(SLOT(p, o_free_at), &free)) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    Py_ssize_t flen = PyBytes_GET_SIZE(frame);
    const unsigned char *f = (const unsigned char *)PyBytes_AS_STRING(frame);
    if (flen <= C_PRIO_OFF + 4 || (free > at && SLOT(p, o_priority) != Py_False && f[C_PRIO_OFF]))
        Py_RETURN_NONE; /* it may overtake (a short frame's FCS byte read as its priority, too): Python's */
    PyObject *wire;
    if (defer)
        wire = Py_NewRef(frame);
    else if ((wire = with_fcs((const char *)f, flen, -1)) == NULL)
        return NULL;
    long long start = enqueue_tail(p, wire, flen + 4, at, free);
    Py_DECREF(wire);
    if (start < 0)
        return NULL;
    n_enqueued++;
    return PyLong_FromLongLong(start);
}

static PyObject *forward(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "forward(heap, t_end, ins, outs, busy, routes, delay)");
        return NULL;
    }
    PyObject *heap = args[0], *ins = args[2], *outs = args[3], *busy = args[4], *routes = args[5];
    long long t_end, delay, now = -1;
    long n = 0;
    if (!ready || !switch_ready || !PyList_CheckExact(heap) || !PyList_CheckExact(ins) || !PyList_CheckExact(outs) ||
        !PyDict_CheckExact(busy) || !PyList_CheckExact(routes) || !get_ll(args[1], &t_end) ||
        !get_ll(args[6], &delay)) {
        PyErr_Clear();
        return Py_BuildValue("(lO)", 0L, Py_None);
    }
    for (;;) {
        if (PyList_GET_SIZE(heap) == 0)
            break;
        PyObject *item = PyList_GET_ITEM(heap, 0);
        if (!PyTuple_CheckExact(item) || PyTuple_GET_SIZE(item) != 5)
            break;
        long long arrival, port, kind;
        if (!get_ll(PyTuple_GET_ITEM(item, 0), &arrival) || arrival >= t_end ||
            !get_ll(PyTuple_GET_ITEM(item, 1), &port) || !get_ll(PyTuple_GET_ITEM(item, 4), &kind))
            break;
        PyObject *wire = PyTuple_GET_ITEM(item, 3);
        if (!PyBytes_CheckExact(wire) || port < 0 || port >= PyList_GET_SIZE(ins))
            break;
        PyObject *inp = PyList_GET_ITEM(ins, port);
        if (Py_TYPE(inp) != InPortT || SLOT(inp, i_timeline) != Py_None || SLOT(inp, i_buf) != Py_None)
            break;
        Py_ssize_t wlen = PyBytes_GET_SIZE(wire);
        const unsigned char *w = (const unsigned char *)PyBytes_AS_STRING(wire);
        if (!(kind & C_CLEAN) && (wlen < 4 || crc32_of(w, wlen) != C_FCS_RESIDUE))
            break; /* (a bad FCS: the port's, in Python) */
        if (wlen >= C_CREDIT_LEN && w[13] == C_CREDIT_LO && w[12] == C_CREDIT_HI)
            break; /* link control */
        Py_ssize_t flen = (kind & C_NOFCS) ? wlen : wlen - 4;
        /* SwitchEngine.receive: a plain data frame, routed by the table */
        if (flen < C_HDR_LEN || w[12] != C_ET_HI || w[13] != C_ET_LO || decline[w[C_PTYPE_OFF]] ||
            (w[C_FLAGS_OFF] & C_FLAG_BCAST) || w[C_HOPS_OFF] >= C_MAX_HOPS)
            break;
        long long dst = ((long long)w[C_DST_OFF] << 24) | (w[C_DST_OFF + 1] << 16) | (w[C_DST_OFF + 2] << 8) |
                        w[C_DST_OFF + 3];
        if (dst >= PyList_GET_SIZE(routes))
            break;
        long long out;
        if (!get_ll(PyList_GET_ITEM(routes, dst), &out) || out < 0 || out >= PyList_GET_SIZE(outs))
            break;
        /* Element._emit and OutPort.enqueue: a plain port */
        PyObject *p = PyList_GET_ITEM(outs, out);
        int defer;
        long long free;
        if (!plain_port(p, &defer) || !get_ll(SLOT(p, o_free_at), &free))
            break;
        long long at = arrival + delay;
        if (free > at && SLOT(p, o_priority) != Py_False && flen > C_PRIO_OFF && w[C_PRIO_OFF])
            break; /* it may overtake: Python's */
        /* taken: off the heap, the next hop's frame, onto the port */
        PyObject *popped = heap_pop(heap);
        if (popped == NULL)
            return NULL;
        if (popped != item) { /* (cannot happen: heap[0] is what heappop returns) */
            Py_DECREF(popped);
            PyErr_SetString(PyExc_RuntimeError, "emu._core.forward: the heap changed under it");
            return NULL;
        }
        PyObject *frame;
        if (defer) {
            frame = PyBytes_FromStringAndSize((const char *)w, flen);
            if (frame != NULL)
                ((unsigned char *)PyBytes_AS_STRING(frame))[C_HOPS_OFF] = (w[C_HOPS_OFF] + 1) & 0xFF;
        } else
            frame = with_fcs((const char *)w, flen, C_HOPS_OFF);
        Py_DECREF(popped);
        if (frame == NULL)
            return NULL;
        long long start = enqueue_tail(p, frame, flen + 4, at, free);
        Py_DECREF(frame);
        if (start < 0)
            return NULL;
        if (PyDict_SetItem(busy, p, Py_None) < 0)
            return NULL;
        now = arrival;
        n++;
    }
    n_forwarded += n;
    if (n == 0)
        return Py_BuildValue("(lO)", 0L, Py_None);
    return Py_BuildValue("(lL)", n, now);
}

static PyObject *hand_over(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "hand_over(pending, heap, index, seq, flags, release, pool_flag)");
        return NULL;
    }
    PyObject *pend = args[0], *heap = args[1], *index = args[2];
    long long seq, flags, release, poolf, nbytes = 0, last = -1;
    long n = 0;
    if (!ready || !PyList_CheckExact(heap) || !get_ll(args[3], &seq) || !get_ll(args[4], &flags) ||
        !get_ll(args[5], &release) || !get_ll(args[6], &poolf)) {
        PyErr_SetString(PyExc_TypeError, "emu._core.hand_over: bad arguments");
        return NULL;
    }
    PyObject *f_plain = PyLong_FromLongLong(flags), *f_pool = PyLong_FromLongLong(flags | poolf);
    if (f_plain == NULL || f_pool == NULL)
        goto fail;
    for (;;) {
        Py_ssize_t len = PySequence_Size(pend);
        if (len < 0)
            goto fail;
        if (len == 0)
            break;
        PyObject *head = PySequence_GetItem(pend, 0);
        if (head == NULL)
            goto fail;
        long long arrival;
        int ok = PyTuple_Check(head) && PyTuple_GET_SIZE(head) == 4 && get_ll(PyTuple_GET_ITEM(head, 1), &arrival);
        if (!ok) {
            Py_DECREF(head);
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "emu._core.hand_over: a pending entry is not a 4-tuple");
            goto fail;
        }
        if (arrival >= release) {
            Py_DECREF(head);
            break;
        }
        PyObject *r = PyObject_CallMethodNoArgs(pend, s_popleft);
        if (r == NULL) {
            Py_DECREF(head);
            goto fail;
        }
        Py_DECREF(r);
        PyObject *frame = Py_NewRef(PyTuple_GET_ITEM(head, 2));
        int pool = PyObject_IsTrue(PyTuple_GET_ITEM(head, 3));
        Py_DECREF(head);
        if (pool < 0) {
            Py_DECREF(frame);
            goto fail;
        }
        if (Py_TYPE(frame) == LazyT) { /* made from its sender's buffer now (emu.wire.lazy) */
            PyObject *made = PyObject_CallMethodNoArgs(frame, s_make);
            Py_DECREF(frame);
            if (made == NULL)
                goto fail;
            frame = made;
        }
        Py_ssize_t flen = PyObject_Length(frame);
        if (flen < 0) {
            Py_DECREF(frame);
            goto fail;
        }
        PyObject *rec = tuple_steal(5, (PyObject *[]){PyLong_FromLongLong(arrival), Py_NewRef(index),
                                                      PyLong_FromLongLong(seq), frame,
                                                      Py_NewRef(pool ? f_pool : f_plain)});
        if (rec == NULL)
            goto fail;
        int pushed = heap_push(heap, rec);
        Py_DECREF(rec);
        if (pushed < 0)
            goto fail;
        seq = (seq + 1) & 0xFFFFFFFFLL;
        n++;
        nbytes += flen;
        last = arrival;
    }
    Py_DECREF(f_plain);
    Py_DECREF(f_pool);
    n_handed += n;
    return Py_BuildValue("(lLLL)", n, nbytes, seq, last);
fail:
    Py_XDECREF(f_plain);
    Py_XDECREF(f_pool);
    return NULL;
}

static inline void drop(PyObject **o) { Py_CLEAR(*o); }

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

/* Element._transmit's first part: every busy port whose peer is in this process and that has
 * neither link control, an emulated fault nor a capture (the caller checks the capture) hands the
 * frames due before ``release`` straight into the peer's heap; a port left empty leaves ``busy``.
 * Returns (earliest arrival handed over or INF, the other busy ports for Python, in their order). */
static PyObject *transmit_local(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "transmit_local(busy, release, window, domain)");
        return NULL;
    }
    PyObject *busy = args[0], *window = args[2], *domain = args[3];
    long long release, clean = C_CLEAN, nofcs = C_NOFCS, first = (long long)1 << 62;
    if (!ready || !PyDict_CheckExact(busy) || !get_ll(args[1], &release)) {
        PyErr_SetString(PyExc_TypeError, "emu._core.transmit_local: bad arguments");
        return NULL;
    }
    /* the ports as they are now (Python code runs in between: a lazy frame made, the domain told),
     * each port's (peer, input port) held while it is used */
    PyObject *others = PyList_New(0), *done = PyList_New(0), *ports = PyDict_Keys(busy), *held = NULL;
    if (others == NULL || done == NULL || ports == NULL)
        goto fail;
    for (Py_ssize_t kp = 0; kp < PyList_GET_SIZE(ports); kp++, drop(&held)) {
        PyObject *p = PyList_GET_ITEM(ports, kp), *local, *ctl, *pend;
        Py_ssize_t nctl;
        if (Py_TYPE(p) != OutPortT || (local = SLOT(p, o_local)) == NULL || local == Py_None ||
            !PyTuple_CheckExact(local) || PyTuple_GET_SIZE(local) != 2 || SLOT(p, o_fault_rng) != Py_None ||
            (ctl = SLOT(p, o_ctl)) == NULL || (nctl = PySequence_Size(ctl)) != 0 || (pend = SLOT(p, o_pending)) == NULL) {
            if (PyErr_Occurred() || PyList_Append(others, p) < 0)
                goto fail;
            continue;
        }
        held = Py_NewRef(local);
        Py_ssize_t npend = PySequence_Size(pend);
        if (npend < 0)
            goto fail;
        if (npend) {
            PyObject *head = PySequence_GetItem(pend, 0);
            if (head == NULL)
                goto fail;
            long long a0;
            int ok = PyTuple_Check(head) && PyTuple_GET_SIZE(head) == 4 && get_ll(PyTuple_GET_ITEM(head, 1), &a0);
            Py_DECREF(head);
            if (!ok) {
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_TypeError, "emu._core.transmit_local: a pending entry is not a 4-tuple");
                goto fail;
            }
            if (a0 < release) {
                PyObject *peer = PyTuple_GET_ITEM(local, 0), *inp = PyTuple_GET_ITEM(local, 1);
                PyObject *link = SLOT(p, o_link), *rlink;
                if (Py_TYPE(inp) != InPortT || link == NULL || Py_TYPE(link) != SenderT ||
                    (rlink = SLOT(inp, i_link)) == NULL || Py_TYPE(rlink) != ReceiverT) {
                    if (PyList_Append(others, p) < 0)
                        goto fail;
                    continue;
                }
                PyObject *safe = PyObject_GetAttr(peer, s_safe_time);
                long long st;
                int okst = get_ll(safe, &st);
                Py_XDECREF(safe);
                if (!okst) {
                    if (!PyErr_Occurred())
                        PyErr_SetString(PyExc_TypeError, "emu._core.transmit_local: safe_time is not an integer");
                    goto fail;
                }
                if (a0 < st) {
                    PyErr_Format(CausalityError, "%S: frame stamped %lld ns handed over after %lld ns was processed; "
                                 "the synchroniser let a window run too far", SLOT(inp, i_name), a0, st);
                    goto fail;
                }
                if (a0 < first)
                    first = a0;
                PyObject *heap = PyObject_GetAttr(peer, s_heap);
                if (heap == NULL)
                    goto fail;
                long long seq, flags = SLOT(p, o_defer_fcs) == Py_True ? clean | nofcs : clean;
                if (!get_ll(SLOT(link, ls_seq), &seq)) {
                    Py_DECREF(heap);
                    if (!PyErr_Occurred())
                        PyErr_SetString(PyExc_TypeError, "emu._core.transmit_local: a sequence number is not an integer");
                    goto fail;
                }
                PyObject *hargs[7] = {pend, heap, SLOT(inp, i_index), NULL, NULL, NULL, NULL};
                PyObject *seqo = PyLong_FromLongLong(seq), *fl = PyLong_FromLongLong(flags), *rel = PyLong_FromLongLong(release),
                         *poolo = PyLong_FromLong(C_POOL);
                hargs[3] = seqo; hargs[4] = fl; hargs[5] = rel; hargs[6] = poolo;
                PyObject *r = (seqo && fl && rel && poolo) ? hand_over(NULL, hargs, 7) : NULL;
                Py_XDECREF(seqo); Py_XDECREF(fl); Py_XDECREF(rel); Py_XDECREF(poolo);
                Py_DECREF(heap);
                if (r == NULL)
                    goto fail;
                long n;
                long long nbytes, nseq, last, lat;
                int okr = PyArg_ParseTuple(r, "lLLL", &n, &nbytes, &nseq, &last);
                Py_DECREF(r);
                if (!okr || !get_ll(SLOT(p, o_latency), &lat))
                    goto fail;
                if (flags & nofcs)
                    nbytes += 4LL * n;
                if (set_ll(link, ls_seq, nseq) < 0 || set_ll(rlink, lr_expected, nseq) < 0 ||
                    set_ll(p, o_sent_done, last - lat) < 0 || add_ll(p, o_tx_frames, n) < 0 ||
                    add_ll(p, o_tx_bytes, nbytes) < 0 || add_ll(inp, i_rx_frames, n) < 0 ||
                    add_ll(inp, i_rx_bytes, nbytes) < 0)
                    goto fail;
                PyObject *fr = PyObject_CallMethod(domain, "frames_local", "OlLO", peer, n, a0, window);
                if (fr == NULL)
                    goto fail;
                Py_DECREF(fr);
                npend = PySequence_Size(pend);
                if (npend < 0)
                    goto fail;
            }
        }
        if (npend == 0 && PyList_Append(done, p) < 0)
            goto fail;
    }
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(done); k++)
        if (PyDict_DelItem(busy, PyList_GET_ITEM(done, k)) < 0)
            goto fail;
    Py_DECREF(done);
    Py_DECREF(ports);
    return Py_BuildValue("(LN)", first, others);
fail:
    Py_XDECREF(held);
    Py_XDECREF(others);
    Py_XDECREF(done);
    Py_XDECREF(ports);
    return NULL;
}

/* LinkSender.take: every frame of ``pend`` arriving before ``release`` becomes a DATA (DATA_POOL)
 * record -- its 12-byte prefix, then seq, arrival, length, window (network order) and the frame --
 * joined into datagrams of at most MAX_DATAGRAM bytes, each retained for retransmission as
 * (window, first seq, last seq, datagram). Returns (datagrams, frames, their bytes, last arrival). */
typedef struct { PyObject *frame; long long arrival; int pool; } rec_t;

static PyObject *flush_dgram(PyObject *link, rec_t *recs, Py_ssize_t k0, Py_ssize_t k1, Py_ssize_t size,
                             long long seq0, long long w16, long long window, PyObject *out)
{
    PyObject *dg = PyBytes_FromStringAndSize(NULL, size);
    if (dg == NULL)
        return NULL;
    unsigned char *b = (unsigned char *)PyBytes_AS_STRING(dg);
    PyObject *pre = SLOT(link, ls_prefix), *prep = SLOT(link, ls_prefix_pool);
    long long seq = seq0;
    for (Py_ssize_t k = k0; k < k1; k++) {
        PyObject *px = recs[k].pool ? prep : pre;
        memcpy(b, PyBytes_AS_STRING(px), 12);
        b += 12;
        uint32_t sq = (uint32_t)seq;
        uint64_t ts = (uint64_t)recs[k].arrival;
        Py_ssize_t n = PyBytes_GET_SIZE(recs[k].frame);
        b[0] = sq >> 24; b[1] = sq >> 16; b[2] = sq >> 8; b[3] = sq;
        for (int i = 0; i < 8; i++)
            b[4 + i] = (unsigned char)(ts >> (56 - 8 * i));
        b[12] = (n >> 8) & 0xFF; b[13] = n & 0xFF;
        b[14] = (w16 >> 8) & 0xFF; b[15] = w16 & 0xFF;
        b += 16;
        memcpy(b, PyBytes_AS_STRING(recs[k].frame), n);
        b += n;
        seq = (seq + 1) & 0xFFFFFFFFLL;
    }
    PyObject *kept = Py_BuildValue("(LLLO)", window, seq0, (seq - 1) & 0xFFFFFFFFLL, dg);
    if (kept == NULL) {
        Py_DECREF(dg);
        return NULL;
    }
    PyObject *r = PyObject_CallMethodOneArg(SLOT(link, ls_retained), s_append, kept);
    Py_DECREF(kept);
    if (r == NULL || PyList_Append(out, dg) < 0) {
        Py_XDECREF(r);
        Py_DECREF(dg);
        return NULL;
    }
    Py_DECREF(r);
    Py_DECREF(dg);
    return out;
}

static PyObject *take(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "take(link, pend, release, window)");
        return NULL;
    }
    PyObject *link = args[0], *pend = args[1];
    long long release, window, seq0;
    if (!ready || Py_TYPE(link) != SenderT || !get_ll(args[2], &release) || !get_ll(args[3], &window) ||
        !get_ll(SLOT(link, ls_seq), &seq0) || SLOT(link, ls_prefix) == NULL || !PyBytes_CheckExact(SLOT(link, ls_prefix)) ||
        PyBytes_GET_SIZE(SLOT(link, ls_prefix)) != 12 || SLOT(link, ls_prefix_pool) == NULL ||
        !PyBytes_CheckExact(SLOT(link, ls_prefix_pool)) || PyBytes_GET_SIZE(SLOT(link, ls_prefix_pool)) != 12) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "emu._core.take: bad arguments");
        return NULL;
    }
    Py_ssize_t cap = 16, nrec = 0;
    rec_t *recs = PyMem_Malloc(cap * sizeof(rec_t));
    PyObject *out = PyList_New(0);
    long long nbytes = 0, last = 0, w16 = window & 0xFFFF;
    if (recs == NULL || out == NULL)
        goto fail;
    for (;;) { /* off the queue, made if lazy */
        Py_ssize_t len = PySequence_Size(pend);
        if (len < 0)
            goto fail;
        if (len == 0)
            break;
        PyObject *head = PySequence_GetItem(pend, 0);
        if (head == NULL)
            goto fail;
        long long arrival;
        int ok = PyTuple_Check(head) && PyTuple_GET_SIZE(head) == 4 && get_ll(PyTuple_GET_ITEM(head, 1), &arrival);
        if (!ok || arrival >= release) {
            Py_DECREF(head);
            if (!ok) {
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_TypeError, "emu._core.take: a pending entry is not a 4-tuple");
                goto fail;
            }
            break;
        }
        PyObject *r = PyObject_CallMethodNoArgs(pend, s_popleft);
        if (r == NULL) {
            Py_DECREF(head);
            goto fail;
        }
        Py_DECREF(r);
        PyObject *frame = Py_NewRef(PyTuple_GET_ITEM(head, 2));
        int pool = PyObject_IsTrue(PyTuple_GET_ITEM(head, 3));
        Py_DECREF(head);
        if (pool < 0) {
            Py_DECREF(frame);
            goto fail;
        }
        if (Py_TYPE(frame) == LazyT) {
            PyObject *made = PyObject_CallMethodNoArgs(frame, s_make);
            Py_DECREF(frame);
            if (made == NULL)
                goto fail;
            frame = made;
        }
        if (!PyBytes_CheckExact(frame)) { /* bytes-like (a bytearray, a view): its bytes, as join takes them */
            PyObject *b = PyBytes_FromObject(frame);
            Py_DECREF(frame);
            if (b == NULL)
                goto fail;
            frame = b;
        }
        if (PyBytes_GET_SIZE(frame) > 0xFFFF) {
            Py_DECREF(frame);
            PyErr_SetString(PyExc_ValueError, "emu._core.take: a frame of over 65535 bytes");
            goto fail;
        }
        if (nrec == cap) {
            rec_t *more = PyMem_Realloc(recs, 2 * cap * sizeof(rec_t));
            if (more == NULL) {
                Py_DECREF(frame);
                goto fail;
            }
            recs = more;
            cap *= 2;
        }
        recs[nrec].frame = frame;
        recs[nrec].arrival = arrival;
        recs[nrec].pool = pool;
        nrec++;
        nbytes += PyBytes_GET_SIZE(frame);
        last = arrival;
    }
    { /* into datagrams, as Python's loop cuts them */
        Py_ssize_t k0 = 0, size = 0;
        long long first = seq0, seq = seq0;
        for (Py_ssize_t k = 0; k < nrec; k++) {
            Py_ssize_t n = PyBytes_GET_SIZE(recs[k].frame);
            if (size + C_OUTER_LEN + n > C_MAX_DATAGRAM && k > k0) {
                if (flush_dgram(link, recs, k0, k, size, first, w16, window, out) == NULL)
                    goto fail;
                k0 = k;
                size = 0;
                first = seq;
            }
            size += C_OUTER_LEN + n;
            seq = (seq + 1) & 0xFFFFFFFFLL;
        }
        if (nrec > k0 && flush_dgram(link, recs, k0, nrec, size, first, w16, window, out) == NULL)
            goto fail;
        if (set_ll(link, ls_seq, seq) < 0)
            goto fail;
    }
    for (Py_ssize_t k = 0; k < nrec; k++)
        Py_DECREF(recs[k].frame);
    PyMem_Free(recs);
    n_taken += nrec;
    return Py_BuildValue("(NlLL)", out, (long)nrec, nbytes, last);
fail:
    if (recs != NULL) {
        for (Py_ssize_t k = 0; k < nrec; k++)
            Py_DECREF(recs[k].frame);
        PyMem_Free(recs);
    }
    Py_XDECREF(out);
    return NULL;
}

/* Batch.on_datagram's common case: from ``off``, every DATA / DATA_POOL record of this cluster whose
 * link ends here, from the socket at its other end, in sequence and not late goes into its element's
 * heap as Python would put it; ``got`` (element -> [frames, earliest stamp, window]) counts them as
 * Python's loop does. Stops at the first other record (Python's: a drop, a gap, a NACK ...) and
 * returns its offset (``n`` when all were taken). */
static inline uint64_t be(const unsigned char *b, int k)
{
    uint64_t v = 0;
    for (int i = 0; i < k; i++)
        v = v << 8 | b[i];
    return v;
}

typedef struct { PyObject *inp, *g; long long rn, rb, rts; } run_t;

static int flush_run(run_t *r)
{
    if (r->rn == 0)
        return 0;
    long long g0, g1;
    if (add_ll(r->inp, i_rx_frames, r->rn) < 0 || add_ll(r->inp, i_rx_bytes, r->rb) < 0)
        return -1;
    if (!get_ll(PyList_GET_ITEM(r->g, 0), &g0) || !get_ll(PyList_GET_ITEM(r->g, 1), &g1)) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "emu._core.records: a count is not an integer");
        return -1;
    }
    PyObject *a = PyLong_FromLongLong(g0 + r->rn);
    if (a == NULL || PyList_SetItem(r->g, 0, a) < 0)
        return -1;
    if (r->rts < g1) {
        PyObject *b = PyLong_FromLongLong(r->rts);
        if (b == NULL || PyList_SetItem(r->g, 1, b) < 0)
            return -1;
    }
    r->rn = r->rb = 0;
    r->rts = (long long)1 << 62;
    return 0;
}

static PyObject *records(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "records(data, off, n, cluster_id, in_owner, sender, got)");
        return NULL;
    }
    PyObject *data = args[0], *in_owner = args[4], *sender = args[5], *got = args[6];
    long long off, n, cid;
    if (!PyBytes_CheckExact(data))
        return Py_NewRef(args[1]); /* (not bytes: Python reads it) */
    if (!ready || !PyDict_CheckExact(in_owner) || !PyDict_CheckExact(got) ||
        !get_ll(args[1], &off) || !get_ll(args[2], &n) || !get_ll(args[3], &cid) || n > PyBytes_GET_SIZE(data) ||
        off < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "emu._core.records: bad arguments");
        return NULL;
    }
    const unsigned char *b = (const unsigned char *)PyBytes_AS_STRING(data);
    long long cur = -1, cwin = -1, safe = 0;
    PyObject *el = NULL, *heap = NULL, *lk = NULL, *index = NULL, *held = NULL; /* (el, lk, index: of held, the
                                                                                  owner tuple; heap owned) */
    run_t run = {NULL, NULL, 0, 0, (long long)1 << 62};
    PyObject *f_data = PyLong_FromLong(0), *f_pool = PyLong_FromLong(C_POOL);
    if (f_data == NULL || f_pool == NULL)
        goto fail;
    while (off < n) {
        if (n - off < C_OUTER_LEN)
            break;
        const unsigned char *h = b + off;
        long kind = h[3];
        long long link = (long long)be(h + 8, 4), seq = (long long)be(h + 12, 4), win = (long long)be(h + 26, 2);
        uint64_t ts = be(h + 16, 8);
        long long end = off + C_OUTER_LEN + (long long)be(h + 24, 2);
        if ((long)be(h, 2) != C_MAGIC || h[2] != C_VERSION || (long long)be(h + 4, 4) != cid || end > n ||
            (kind != C_KIND_DATA && kind != C_KIND_POOL) || ts >= ((uint64_t)1 << 62))
            break;
        if (link != cur || win != cwin) {
            if (flush_run(&run) < 0)
                goto fail;
            cur = -1;
            PyObject *key = PyLong_FromLongLong(link);
            if (key == NULL)
                goto fail;
            PyObject *owner = PyDict_GetItemWithError(in_owner, key);
            Py_DECREF(key);
            if (owner == NULL) {
                if (PyErr_Occurred())
                    goto fail;
                break;
            }
            if (!PyTuple_CheckExact(owner) || PyTuple_GET_SIZE(owner) != 2 ||
                Py_TYPE(PyTuple_GET_ITEM(owner, 1)) != InPortT)
                break;
            PyObject *inp = PyTuple_GET_ITEM(owner, 1);
            PyObject *pa = SLOT(inp, i_peer_addr);
            int same = pa == NULL ? 0 : PyObject_RichCompareBool(sender, pa, Py_EQ);
            if (same < 0)
                goto fail;
            if (!same || (lk = SLOT(inp, i_link)) == NULL || Py_TYPE(lk) != ReceiverT)
                break;
            Py_XSETREF(held, Py_NewRef(owner));
            el = PyTuple_GET_ITEM(owner, 0);
            PyObject *st = PyObject_GetAttr(el, s_safe_time);
            int okst = get_ll(st, &safe);
            Py_XDECREF(st);
            if (!okst) {
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_TypeError, "emu._core.records: safe_time is not an integer");
                goto fail;
            }
            Py_XSETREF(heap, PyObject_GetAttr(el, s_heap));
            if (heap == NULL)
                goto fail;
            if (!PyList_CheckExact(heap)) {
                PyErr_SetString(PyExc_TypeError, "emu._core.records: an element's heap is not a list");
                goto fail;
            }
            index = SLOT(inp, i_index);
            PyObject *g = PyDict_GetItemWithError(got, el);
            if (g == NULL && PyErr_Occurred())
                goto fail;
            long long gw = -1;
            if (g != NULL && (!PyList_CheckExact(g) || PyList_GET_SIZE(g) != 3 || !get_ll(PyList_GET_ITEM(g, 2), &gw))) {
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_TypeError, "emu._core.records: a count entry is not [frames, first, window]");
                goto fail;
            }
            if (g == NULL || gw != win) { /* (a window's groups and an older retransmitted one) */
                long long g0 = 0;
                if (g != NULL && !get_ll(PyList_GET_ITEM(g, 0), &g0))
                    goto fail;
                if (g0) {
                    PyObject *dom = PyObject_GetAttr(el, s_domain);
                    if (dom == NULL)
                        goto fail;
                    PyObject *r = PyObject_CallMethodObjArgs(dom, s_frames_arrived, el, PyList_GET_ITEM(g, 0),
                                                             PyList_GET_ITEM(g, 1), PyList_GET_ITEM(g, 2), NULL);
                    Py_DECREF(dom);
                    if (r == NULL)
                        goto fail;
                    Py_DECREF(r);
                }
                PyObject *ng = Py_BuildValue("[iLL]", 0, (long long)1 << 62, win);
                if (ng == NULL)
                    goto fail;
                int bad = PyDict_SetItem(got, el, ng);
                Py_DECREF(ng);
                if (bad < 0)
                    goto fail;
                g = ng; /* (the dict holds it) */
            }
            run.inp = inp;
            run.g = g;
            cur = link;
            cwin = win;
        }
        long long expected;
        if (!get_ll(SLOT(lk, lr_expected), &expected)) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "emu._core.records: expected is not an integer");
            goto fail;
        }
        if (seq != expected || (long long)ts < safe)
            break; /* a gap, a duplicate, a late record: Python's */
        if (set_ll(lk, lr_expected, (seq + 1) & 0xFFFFFFFFLL) < 0)
            goto fail;
        PyObject *rec = tuple_steal(5, (PyObject *[]){PyLong_FromLongLong((long long)ts), Py_NewRef(index),
                                                      PyLong_FromLongLong(seq),
                                                      PyBytes_FromStringAndSize((const char *)h + C_OUTER_LEN,
                                                                                end - off - C_OUTER_LEN),
                                                      Py_NewRef(kind == C_KIND_POOL ? f_pool : f_data)});
        if (rec == NULL)
            goto fail;
        int pushed = heap_push(heap, rec);
        Py_DECREF(rec);
        if (pushed < 0)
            goto fail;
        run.rn++;
        n_records++;
        run.rb += end - off - C_OUTER_LEN;
        if ((long long)ts < run.rts)
            run.rts = (long long)ts;
        off = end;
    }
    if (flush_run(&run) < 0)
        goto fail;
    Py_XDECREF(heap);
    Py_XDECREF(held);
    Py_DECREF(f_data);
    Py_DECREF(f_pool);
    return PyLong_FromLongLong(off);
fail:
    Py_XDECREF(heap);
    Py_XDECREF(held);
    Py_XDECREF(f_data);
    Py_XDECREF(f_pool);
    return NULL;
}

static PyObject *py_heappush(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyList_CheckExact(args[0])) {
        PyErr_SetString(PyExc_TypeError, "heappush(list, item)");
        return NULL;
    }
    if (heap_push(args[0], args[1]) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *py_heappop(PyObject *self, PyObject *heap)
{
    if (!PyList_CheckExact(heap)) {
        PyErr_SetString(PyExc_TypeError, "heappop(list)");
        return NULL;
    }
    return heap_pop(heap);
}

static PyObject *counts(PyObject *self, PyObject *unused)
{
    return Py_BuildValue("{sKsKsKsKsK}", "forwarded", n_forwarded, "enqueued", n_enqueued, "handed_over", n_handed,
                         "taken", n_taken, "records", n_records);
}

static PyMethodDef methods[] = {
    {"heappush", (PyCFunction)(void (*)(void))py_heappush, METH_FASTCALL, "heapq.heappush, the core's comparison"},
    {"heappop", py_heappop, METH_O, "heapq.heappop, the core's comparison"},
    {"counts", counts, METH_NOARGS, "frames the core forwarded, enqueued and handed over in this process"},
    {"crc32", crc32, METH_O, "crc32(bytes-like) -> zlib.crc32 of it (the core's own CRC-32)"},
    {"setup", setup, METH_VARARGS, "setup(OutPort, InPort, LazyFrame, LinkSender, LinkReceiver, CausalityError, consts)"},
    {"switch_setup", switch_setup, METH_VARARGS, "switch_setup(decline, max_hops)"},
    {"enqueue", (PyCFunction)(void (*)(void))enqueue, METH_FASTCALL, "OutPort.enqueue's plain path, or None"},
    {"forward", (PyCFunction)(void (*)(void))forward, METH_FASTCALL, "a static switch's plain frames"},
    {"transmit_local", (PyCFunction)(void (*)(void))transmit_local, METH_FASTCALL,
     "the busy ports' frames into peers of this process; returns (first arrival, the other ports)"},
    {"records", (PyCFunction)(void (*)(void))records, METH_FASTCALL, "a datagram's in-sequence records into their heaps"},
    {"take", (PyCFunction)(void (*)(void))take, METH_FASTCALL, "LinkSender.take: a port's frames as records in datagrams"},
    {"hand_over", (PyCFunction)(void (*)(void))hand_over, METH_FASTCALL, "frames into a local peer's heap"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "emu._core", "The compiled core (optional).", -1, methods};

PyMODINIT_FUNC PyInit__core(void)
{
    s_append = PyUnicode_InternFromString("append");
    s_popleft = PyUnicode_InternFromString("popleft");
    s_make = PyUnicode_InternFromString("make");
    s_plain = PyUnicode_InternFromString("plain");
    s_heap = PyUnicode_InternFromString("heap");
    s_safe_time = PyUnicode_InternFromString("safe_time");
    s_domain = PyUnicode_InternFromString("domain");
    s_frames_arrived = PyUnicode_InternFromString("frames_arrived");
    if (!s_append || !s_popleft || !s_make || !s_plain || !s_heap || !s_safe_time || !s_domain || !s_frames_arrived)
        return NULL;
    crc_init();
#ifdef HAVE_CLMUL_CRC
    unsigned int eax, ebx, ecx, edx;
    use_clmul = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 1)) && (ecx & (1u << 19)) &&
                !getenv("EMU_NO_CLMUL"); /* PCLMULQDQ and SSE4.1 */
#endif
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddIntConstant(m, "API", CORE_API) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
