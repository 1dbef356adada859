/* emu/csrc/gather.h: the socket path's system calls -- a datagram gathered from its records' parts by
 * one sendmsg; datagrams received into one buffer and their records read there (part of emu/_core.c,
 * one translation unit) */
#ifndef EMU_CSRC_GATHER_H
#define EMU_CSRC_GATHER_H

/* Batch._send's gather: one datagram of ``items`` (each a bytes, or a group: a list of bytes parts)
 * by sendmsg on the non-blocking UDP socket ``fd`` to (``host``, ``port``) -- what socket.sendmsg
 * does with the flattened parts, without a buffer object per part. Returns the bytes sent; None
 * when it is not this case (more than ``iov_max`` parts, a part not bytes, not an IPv4 address: the
 * caller's socket.sendmsg); an OSError (BlockingIOError: no room) as socket.sendmsg raises it. */
#ifndef _WIN32
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <errno.h>
#endif
static PyObject *sendparts(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    long long fd, port, iov_max;
    if (nargs != 5 || !get_ll(args[0], &fd) || !PyUnicode_CheckExact(args[1]) || !get_ll(args[2], &port) ||
        !PyList_CheckExact(args[3]) || !get_ll(args[4], &iov_max)) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "sendparts(fd, host, port, items, iov_max)");
        return NULL;
    }
#ifdef _WIN32
    Py_RETURN_NONE;
#else
    PyObject *items = args[3];
    Py_ssize_t nparts = 0, total = 0;
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(items); k++) {
        PyObject *it = PyList_GET_ITEM(items, k);
        if (PyBytes_CheckExact(it))
            nparts++;
        else if (PyList_CheckExact(it))
            nparts += PyList_GET_SIZE(it);
        else
            Py_RETURN_NONE;
    }
    const char *host = PyUnicode_AsUTF8(args[1]);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    if (host == NULL)
        return NULL;
    if (nparts > iov_max || nparts == 0 || port < 0 || port > 0xFFFF || inet_pton(AF_INET, host, &sa.sin_addr) != 1)
        Py_RETURN_NONE;
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    struct iovec stack_iov[256], *iov = nparts <= 256 ? stack_iov : PyMem_Malloc(nparts * sizeof(struct iovec));
    if (iov == NULL)
        return PyErr_NoMemory();
    Py_ssize_t j = 0;
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(items); k++) {
        PyObject *it = PyList_GET_ITEM(items, k);
        Py_ssize_t m = PyBytes_CheckExact(it) ? 1 : PyList_GET_SIZE(it);
        for (Py_ssize_t q = 0; q < m; q++) {
            PyObject *b = PyBytes_CheckExact(it) ? it : PyList_GET_ITEM(it, q);
            if (!PyBytes_CheckExact(b)) {
                if (iov != stack_iov)
                    PyMem_Free(iov);
                Py_RETURN_NONE;
            }
            iov[j].iov_base = PyBytes_AS_STRING(b);
            iov[j].iov_len = (size_t)PyBytes_GET_SIZE(b);
            total += PyBytes_GET_SIZE(b);
            j++;
        }
    }
    struct msghdr msg;
    memset(&msg, 0, sizeof msg);
    msg.msg_name = &sa;
    msg.msg_namelen = sizeof sa;
    msg.msg_iov = iov;
    msg.msg_iovlen = (size_t)j;
    ssize_t sent;
    do
        sent = sendmsg((int)fd, &msg, 0);
    while (sent < 0 && errno == EINTR);
    int err = errno;
    if (iov != stack_iov)
        PyMem_Free(iov);
    if (sent < 0) {
        errno = err;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    (void)total;
    return PyLong_FromSsize_t(sent);
#endif
}

/* Batch.drain_own's reads on its connected socket ``fd`` (non-blocking), at most ``count`` datagrams,
 * each into the writable buffer ``into`` and its records read there (records_in, ``sender`` the
 * peer it is connected to) -- the Python loop's recv_into and on_datagram for the datagrams the core
 * reads whole. Returns (read, taken, state, n, off, k): ``read`` datagrams read and done with,
 * ``taken`` the frames they brought; state 0: ``count`` read, 1: the socket empty (BlockingIOError),
 * 2: one more read (not in ``read``), of ``n`` bytes, whose records from ``off`` are Python's
 * (Batch._records; ``k`` frames taken before it). A refused connection (ICMP from a peer that
 * closed) is read past, as Python does; any other error raised as socket.recv_into raises it. */
static PyObject *recv_records(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    long long fd, count, cid;
    if (nargs != 6 || !get_ll(args[0], &fd) || !get_ll(args[2], &count) || !get_ll(args[3], &cid) ||
        !PyList_CheckExact(args[4]) || !ready) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "recv_records(fd, into, count, cluster_id, in_list, sender)");
        return NULL;
    }
#ifdef _WIN32
    Py_RETURN_NONE;
#else
    Py_buffer view;
    if (PyObject_GetBuffer(args[1], &view, PyBUF_WRITABLE) < 0)
        return NULL;
    long long read = 0, taken = 0, off = 0, k = 0;
    ssize_t got = 0;
    int state = 0;
    while (read < count) {
        got = recv((int)fd, view.buf, (size_t)view.len, 0);
        if (got < 0) {
            if (errno == EINTR) {
                if (PyErr_CheckSignals() < 0)
                    goto fail;
                continue;
            }
            if (errno == ECONNREFUSED)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                state = 1;
                break;
            }
            PyErr_SetFromErrno(PyExc_OSError);
            goto fail;
        }
        off = 0;
        k = 0;
        if (got > 0 && records_in((const unsigned char *)view.buf, &off, (long long)got, cid, args[4], args[5], &k) < 0)
            goto fail; /* (the core's own types broken, or no memory: the run stops, as on_datagram's error stops it) */
        if (got == 0 || off < got) { /* Python's from here (an empty datagram: its drop) */
            state = 2;
            break;
        }
        read++;
        taken += k;
    }
    PyBuffer_Release(&view);
    return Py_BuildValue("(LLinLL)", read, taken, state, (Py_ssize_t)(state == 2 ? got : 0), off, k);
fail:
    PyBuffer_Release(&view);
    return NULL;
#endif
}

#endif /* EMU_CSRC_GATHER_H */
