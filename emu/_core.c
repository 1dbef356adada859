/* emu._core: the compiled core of the element loop (optional; emu.native chooses it).
 *
 * Each function is the exact twin of a pure-Python path it replaces, taking over only the plain case
 * and handing everything else back to Python before it has changed anything (or where Python's code
 * goes on from the state it left, as the Python would have):
 *
 *   enqueue(port, frame, at)            OutPort.enqueue without tracer or priority overtaking (bytes, or
 *                                       a message's lazy frames; a modelled framing the core computes and
 *                                       head flits into an input-queued router: bytes)
 *   forward(heap, t_end, ins, outs, busy, routes, delay)
 *                                       Element.run_window's frames-only loop for a static-table switch
 *                                       (SwitchEngine.receive, Element._emit, OutPort.enqueue)
 *   due(heap, t1, at, elements)       Domain._run's first loop: the domain heap's entries before t1
 *                                       popped, the elements they name (csrc/window.h)
 *   window(domain, active, k, t1, w, link_end, sent)
 *                                       Domain._window's loop over its active elements; a static-table
 *                                       switch's whole window (forward, transmit, next time) in C; any
 *                                       other element's frames, timers and port events in run_window's
 *                                       order, the credit path's plain cases in C (csrc/credits.h)
 *   transmit_local(busy, release, window, domain, batch, stats)
 *                                       Element._transmit for ports to this process (the in-memory
 *                                       hand-over, queued credits first: csrc/transmit.h) and to its
 *                                       socket (records given to the batch)
 *   hand_over, take, records, arrived, forget
 *                                       the hand-over loop, LinkSender.take, Batch.on_datagram's common
 *                                       records and last loop, Element.forget
 *   nic_send, and in window() (csrc/nic.h, host.h)
 *                                       a host NIC's one-frame messages both ways and its timers,
 *                                       Host.resume / deliver and the send and recv requests' plain
 *                                       cases; Op.__await__ (await_setup)
 *   api_setup (csrc/hostapi.h)          HostAPI.send, sleep, recv, try_recv, arrived_ns and now's plain cases
 *   iq_receive (csrc/iqrecv.h)          the input-queued router's receive of a plain data frame
 *                                       (switch/iq.py: InputQueuedEngine.receive, its table lookup, _file)
 *   iq_round (csrc/iq.h)                the input-queued router's allocation round (switch/iqround.py:
 *                                       VC and separable switch allocation, grants, pops, credits)
 *   and in window() (csrc/iqtimer.h)    InputQueuedEngine.on_timer (its round, _retime), on_credit's
 *                                       plain case, receive's call of iq_receive (csrc/iqhooks.h: the
 *                                       round's up and credit_out callbacks)
 *   start_ready (csrc/flowwake.h)      OutPort.start_ready's plain case under credit flow control (a
 *                                       host's port into an input-queued router), for Flow._wake
 *   heappush, heappop, crc32, counts, setup, switch_setup, domain_setup, element_setup, nic_setup,
 *   host_setup
 *
 * The ports are slotted dataclasses (emu.port.OutPort / InPort): setup() reads the offsets of their
 * slots from the classes' member descriptors, so a slot is read and written in place; every object
 * of another type is refused (None / n = 0: Python does it). The frames stay real bytes: a switch
 * builds the frame it sends (hops + 1, and its FCS unless the port defers it), as Python does.
 * Figures are identical by construction and by test (tests/test_native.py, test_native_window.py,
 * test_fast_paths.py run runs both ways). The parts live in csrc/ (one translation unit).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "csrc/common.h"
#include "csrc/crc.h"
#include "csrc/heap.h"
#include "csrc/attrs.h"

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
        {"tx_bytes", &o_tx_bytes}, {"peer_addr", &o_peer_addr}, {"peer_domain", &o_peer_domain}, {"peer", &o_peer},
        {"line", &o_line}};
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
                  &C_DST_OFF, &C_PTYPE_OFF, &C_FLAGS_OFF, &C_HOPS_OFF, &C_PRIO_OFF, &C_FLAG_BCAST, &C_QPKT_PORT};
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
#include "csrc/domain.h"
#include "csrc/fpool.h"
#include "csrc/links.h"
#include "csrc/gather.h"
#include "csrc/ports.h"
#include "csrc/transmit.h"
#include "csrc/nic.h"
#include "csrc/host.h"
#include "csrc/hostapi.h"
#include "csrc/hostflow.h"
#include "csrc/credits.h"
#include "csrc/window.h"
#include "csrc/iqhooks.h"
#include "csrc/iq.h"
#include "csrc/iqrecv.h"
#include "csrc/iqtimer.h"
#include "csrc/flowwake.h"

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
    PyObject *d = Py_BuildValue("{sKsKsKsKsKsKsKsKsKsKsKsKsKsKsKsKsKsKsKsKsKsKsKsKsKsKsK}", "reused", n_reused, "iq_received", n_iq_received, "credits_out", n_credits_out,
                         "credits_in", n_credits_in, "forwarded", n_forwarded, "enqueued", n_enqueued, "handed_over",
                         n_handed, "taken", n_taken, "batched", n_batched, "records", n_records, "windows", n_windows,
                         "element_windows", n_element_windows, "nic_messages", n_nic_messages,
                         "nic_sent", n_nic_sent, "host_steps", n_host_steps, "nic_segments", n_nic_segments, "iq_timers", n_iq_timers, "iq_credits", n_iq_credits, "iq_hooks", n_iq_hooks, "iq_frames", n_iq_frames, "started", n_started, "flow_handed", n_flow_handed, "flow_wakes", n_flow_wakes, "flow_credits", n_flow_credits, "host_sleeps", n_host_sleeps, "host_try_recvs", n_host_try_recvs, "flow_idle", n_flow_idle);
    if (d != NULL && hp_counts(d) < 0) /* (csrc/heap.h: the records and domain entries made again) */
        Py_CLEAR(d);
    PyObject *tk = d == NULL ? NULL : PyLong_FromUnsignedLongLong(tm_kept); /* (csrc/nic.h: timer entries) */
    if (d != NULL && (tk == NULL || PyDict_SetItemString(d, "timers_reused", tk) < 0))
        Py_CLEAR(d);
    Py_XDECREF(tk);
    return d;
}

static PyMethodDef methods[] = {
    {"heappush", (PyCFunction)(void (*)(void))py_heappush, METH_FASTCALL, "heapq.heappush, the core's comparison"},
    {"heappop", py_heappop, METH_O, "heapq.heappop, the core's comparison"},
    {"iq_setup", iq_setup, METH_VARARGS, "iq_setup(Copy, Packet, InputQueuedEngine): the input-queued router's slots and class"},
    {"iq_round", (PyCFunction)(void (*)(void))iq_round, METH_FASTCALL,
     "the input-queued router's allocation round, plain case (switch/iqround.py)"},
    {"iq_retime", (PyCFunction)(void (*)(void))iq_retime, METH_FASTCALL,
     "the input-queued router's next round time, plain case (Rounds._retime)"},
    {"iq_receive", (PyCFunction)(void (*)(void))iq_receive, METH_FASTCALL,
     "the input-queued router's receive of a plain data frame (InputQueuedEngine.receive), or None"},
    {"start_ready", (PyCFunction)(void (*)(void))start_ready, METH_FASTCALL,
     "OutPort.start_ready's plain case under credit flow control: (started, wake), or None"},
    {"counts", counts, METH_NOARGS, "frames the core forwarded, enqueued and handed over in this process"},
    {"crc32", crc32, METH_O, "crc32(bytes-like) -> zlib.crc32 of it (the core's own CRC-32)"},
    {"crc32_path", crc32_path, METH_NOARGS, "crc32_path() -> the CRC-32 a long frame gets here: vpclmul512, clmul8, clmul or table"},
    {"crc32_byte", (PyCFunction)(void (*)(void))crc32_byte, METH_FASTCALL,
     "crc32_byte(crc, old ^ new, z): the CRC-32 after one byte z bytes before the end changed (a forward's FCS)"},
    {"setup", setup, METH_VARARGS, "setup(OutPort, InPort, LazyFrame, LinkSender, LinkReceiver, CausalityError, consts)"},
    {"switch_setup", switch_setup, METH_VARARGS, "switch_setup(decline, max_hops)"},
    {"enqueue", (PyCFunction)(void (*)(void))enqueue, METH_FASTCALL, "OutPort.enqueue's plain path, or None"},
    {"forward", (PyCFunction)(void (*)(void))forward, METH_FASTCALL, "a static switch's plain frames"},
    {"domain_setup", domain_setup, METH_O, "domain_setup(Domain): its frame counts kept inline, in place"},
    {"element_setup", element_setup, METH_O, "element_setup(Element): the attributes the core reads, in place"},
    {"nic_setup", nic_setup, METH_VARARGS,
     "nic_setup(NicEngine, Timers, Message, msg_ptype, msg_header_len, sample_head, Partial, big_message)"},
    {"host_setup", host_setup, METH_VARARGS, "host_setup(Host, Proc, Send, Recv, handlers, the module's globals)"},
    {"await_setup", await_setup, METH_O, "await_setup(Op): Op.__await__ the core's"},
    {"api_setup", api_setup, METH_VARARGS, "api_setup(HostAPI, the api module's globals): its send, sleep, recv, try_recv, arrived_ns and now the core's"},
    {"nic_send", (PyCFunction)(void (*)(void))nic_send, METH_FASTCALL,
     "NicEngine.send_message's one-frame case: True (sent) or False (not this case)"},
    {"transmit_local", (PyCFunction)(void (*)(void))transmit_local, METH_FASTCALL,
     "the busy ports' frames into peers of this process; returns (first arrival, the other ports)"},
    {"window", (PyCFunction)(void (*)(void))window, METH_FASTCALL,
     "Domain._window's loop over its active elements (a static-table switch's window whole)"},
    {"due", (PyCFunction)(void (*)(void))due, METH_FASTCALL,
     "Domain._run's first loop: the heap's entries before t1 popped, the elements they name, each once"},
    {"arrived", arrived, METH_O, "Batch.on_datagram's frames accepted per element told to their domains"},
    {"forget", (PyCFunction)(void (*)(void))forget, METH_FASTCALL, "Element.forget: retained datagrams dropped"},
    {"forget_elements", (PyCFunction)(void (*)(void))forget_elements, METH_FASTCALL,
     "Element.forget of every element of a list"},
    {"records", (PyCFunction)(void (*)(void))records, METH_FASTCALL, "a datagram's in-sequence records into their heaps"},
    {"recv_records", (PyCFunction)(void (*)(void))recv_records, METH_FASTCALL,
     "recv_records(fd, into, count, cluster_id, in_list, sender): datagrams read from a connected socket and their records into their heaps"},
    {"take", (PyCFunction)(void (*)(void))take, METH_FASTCALL, "LinkSender.take: a port's frames as records in groups of parts"},
    {"sendparts", (PyCFunction)(void (*)(void))sendparts, METH_FASTCALL, "Batch._send's gather: one datagram of groups by sendmsg"},
    {"hand_over", (PyCFunction)(void (*)(void))hand_over, METH_FASTCALL, "frames into a local peer's heap"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "emu._core", "The compiled core (optional).", -1, methods};

PyMODINIT_FUNC PyInit__core(void)
{
    s_append = PyUnicode_InternFromString("append");
    s_popleft = PyUnicode_InternFromString("popleft");
    s_make = PyUnicode_InternFromString("make");
    s_with_fcs = PyUnicode_InternFromString("with_fcs");
    if (s_with_fcs == NULL)
        return NULL;
    s_plain = PyUnicode_InternFromString("plain");
    s_heap = PyUnicode_InternFromString("heap");
    s_safe_time = PyUnicode_InternFromString("safe_time");
    s_domain = PyUnicode_InternFromString("domain");
    s_frames_arrived = PyUnicode_InternFromString("frames_arrived");
    s_holding = PyUnicode_InternFromString("holding");
    s_pending = PyUnicode_InternFromString("pending");
    s_send = PyUnicode_InternFromString("send");
    s_datagrams_sent = PyUnicode_InternFromString("datagrams_sent");
    if (!s_holding || !s_pending || !s_send || !s_datagrams_sent)
        return NULL;
    if (window_init() < 0 || attrs_init() < 0 || rx_init() < 0)
        return NULL;
    PyObject *collections = PyImport_ImportModule("collections");
    if (collections == NULL)
        return NULL;
    DequeT = (PyTypeObject *)PyObject_GetAttrString(collections, "deque");
    Py_DECREF(collections);
    if (DequeT == NULL || !PyType_Check(DequeT) || (deque_popleft = PyObject_GetAttrString((PyObject *)DequeT, "popleft")) == NULL ||
        (deque_append = PyObject_GetAttrString((PyObject *)DequeT, "append")) == NULL)
        return NULL;
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
