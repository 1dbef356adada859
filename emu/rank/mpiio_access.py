"""The data access routines of ``MPI.File`` (``emu.rank.mpiio``), every one a ``File._io``: explicit
offsets, the individual and the shared file pointer, ordered, each blocking, nonblocking (a request
completed when made) and as a split collective (``_begin`` accesses, ``_end`` reports)."""

from __future__ import annotations


def add_access_methods(File, mpi, fill, done, check_spec) -> None:
    """``Read_at`` ... ``Write_ordered_end``: every data access routine as one ``File._io``."""

    def make(name: str, how: str, write: bool, form: str):
        if form == "blocking":
            if how == "at":
                def fn(self, offset, buf, status=None):
                    fill(status, self._io(how, write, buf, offset))
            else:
                def fn(self, buf, status=None):
                    fill(status, self._io(how, write, buf))
        elif form == "nonblocking":
            if how == "at":
                def fn(self, offset, buf):
                    return done(self._io(how, write, buf, offset))
            else:
                def fn(self, buf):
                    return done(self._io(how, write, buf))
        elif form == "begin":
            base = name[:-len("_begin")]
            if how == "at":
                def fn(self, offset, buf):
                    self._f()
                    self._begin(base, self._io(how, write, buf, offset))
            else:
                def fn(self, buf):
                    self._f()
                    self._begin(base, self._io(how, write, buf))
        else:
            base = name[:-len("_end")]

            def fn(self, buf, status=None):
                check_spec(buf, not write)
                self._end(base, status)
        fn.__name__ = fn.__qualname__ = name
        fn.__doc__ = f"``MPI_File_{name.lower()}``."
        setattr(File, name, mpi(fn))

    for op, write in (("Read", False), ("Write", True)):
        for suffix, how in (("_at", "at"), ("_at_all", "at"), ("", "ind"), ("_all", "ind"), ("_shared", "shared"),
                            ("_ordered", "ordered")):
            make(op + suffix, how, write, "blocking")
            if how != "ordered":
                make("I" + op.lower() + suffix, how, write, "nonblocking")
            if suffix in ("_at_all", "_all", "_ordered"):
                make(op + suffix + "_begin", how, write, "begin")
                make(op + suffix + "_end", how, write, "end")
