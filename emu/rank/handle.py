"""The object model every MPI handle class of the emulated ``mpi4py.MPI`` shares, as mpi4py's own.

An MPI object (a communicator, a group, an info, a request ...) lives behind a *handle*; a Python
object holds one handle (``self._h``: the implementation object, ``None`` for the family's null
handle). As in mpi4py:

- ``Cls()`` is a null handle, ``Cls(other)`` a second Python object holding ``other``'s handle
  (``other`` must be of the same family, else TypeError); both see the same MPI object, and
  ``Free`` through one sets that one to null only;
- ``a == b`` compares handles; handles are unhashable and unorderable; ``bool(h)`` is "not null";
- ``h.handle`` is an int (0 for null) and ``Cls.fromhandle(h.handle)`` gives the object back;
- predefined objects pickle (and copy) as themselves, a copy of a predefined handle as a new
  object of its class holding the same handle; other handles refuse to be serialised;
- ``h.free()`` frees what is neither null nor predefined, and never raises for those.
"""

from __future__ import annotations

import weakref
from copyreg import __newobj__

MODULE = "mpi4py.MPI"
"""The module the classes say they are of: ``emu.rank.__main__`` installs ``emu.rank.mpi`` under
that name, so that pickle finds the predefined objects by name, as it does with mpi4py."""


class Impl:
    """An MPI object behind a handle: attributes as the family needs them."""

    def __init__(self, **kw):
        self.__dict__.update(kw)


_LIVE: "weakref.WeakValueDictionary[int, Impl]" = weakref.WeakValueDictionary()
"""Every live MPI object by handle (alive while a Python object holds it)."""
_PREDEFINED: dict[int, tuple[object, str]] = {}


def _kind_ok(cls, other) -> bool:
    """May ``cls(other)`` hold ``other``'s handle? Yes, unless the library's class nearest ``cls`` is strict
    (an Intracomm, a Cartcomm, a Grequest ...) and the object behind ``other`` is not of its kind -- as
    mpi4py checks the handle, not the Python class: ``pkl5.Intracomm(COMM_WORLD)`` is an intracommunicator."""
    base = next(k for k in cls.__mro__ if "_strict" in k.__dict__)
    if not base._strict:
        return True
    return isinstance(other, base) or issubclass(getattr(other._h, "cls", type(other)), base)


class _Cell:
    """Where a handle object's MPI object is found once ``MPI._addressof`` has given out the address of its
    handle: the handle (the object's id, 0 for null) is then in C memory (``_cell``, a ``void *``), which a
    program may read and write (ctypes, cffi), as mpi4py's ``ob_mpi``. A non-data descriptor: an object whose
    address was never asked for keeps its MPI object in its ``__dict__`` (a plain attribute, no cost); one
    whose address was given out reads the cell (and ``_addressof`` moves a value set since back into it)."""

    def __set_name__(self, owner, name):
        self.name = name

    def __get__(self, obj, cls=None):
        if obj is None:
            return self
        d = obj.__dict__
        cell = d.get("_cell")
        if cell is None:
            return None
        value = cell.value or 0
        keep = d.get("_keep")
        if value == (0 if keep is None else id(keep)):
            return keep
        impl = _LIVE.get(value) if value else None  # a handle written there: alive while its holder is
        d["_keep"] = impl
        return impl


class _Family:
    """``cls._family``: the family's class, kept out of the class's own namespace as a class (mpi4py's
    ``test_doc`` walks every class found in the module's and the classes' namespaces)."""

    def __init__(self, cls: type):
        self.cls = cls

    def __get__(self, obj, owner=None) -> type:
        return self.cls


class Handle:
    """Base of every handle class; ``_family`` is the class a handle's kind is checked against."""

    _h = _Cell()
    _store = "_h"
    """The attribute a class keeps its MPI object in (a Datatype ``_t``, an Op ``_o``)."""

    _family: type = None  # set by each family's base class (Comm, Group, Info, ...)
    _strict = False
    """A class whose copy constructor takes only its own kind (a Grequest), nulls aside."""

    def __init_subclass__(cls, family: bool = False, **kw):
        super().__init_subclass__(**kw)
        if family:
            cls._family = _Family(cls)
        if cls.__module__.startswith("emu.rank"):
            cls.__module__ = MODULE

    def __new__(cls, other=None, *args, **kw):
        self = object.__new__(cls)
        if other is None:
            self._h = None
        elif isinstance(other, cls._family) and (other._h is None or _kind_ok(cls, other)):
            self._h = other._h
        else:
            raise TypeError(f"expecting a {cls._family.__name__} object, got {type(other).__name__}")
        return self

    def __init__(self, other=None):
        pass

    @classmethod
    def _of(cls, impl):
        """A new Python object of class ``cls`` holding ``impl`` (the library's constructor)."""
        self = object.__new__(cls)
        self._h = impl
        if impl is not None:
            _LIVE[id(impl)] = impl
            impl.family = cls._family
            if not hasattr(impl, "cls"):
                impl.cls = cls
        return self

    # -- comparisons ------------------------------------------------------------------------------
    def __eq__(self, other):
        if not isinstance(other, self._family):
            return NotImplemented
        return self._h is other._h

    def __ne__(self, other):
        if not isinstance(other, self._family):
            return NotImplemented
        return self._h is not other._h

    def _unorderable(self, other):
        raise TypeError(f"unorderable type '{type(self).__module__}.{type(self).__name__}'")

    __lt__ = __le__ = __gt__ = __ge__ = _unorderable
    __hash__ = None

    def __bool__(self) -> bool:
        return self._h is not None

    # -- the handle -------------------------------------------------------------------------------
    @property
    def handle(self) -> int:
        return 0 if self._h is None else id(self._h)

    @classmethod
    def fromhandle(cls, handle: int):
        if handle == 0:
            return cls()
        impl = _LIVE.get(handle)
        if impl is None or getattr(impl, "family", None) is not cls._family:
            raise ValueError(f"no {cls.__name__} with handle {handle:#x}")
        kind = getattr(impl, "cls", cls)  # the object's own kind (an Intercomm, a Cartcomm ...)
        return (kind if issubclass(kind, cls) else cls)._of(impl)

    def toint(self) -> int:
        return self.handle

    @classmethod
    def fromint(cls, arg: int):
        return cls.fromhandle(arg)

    def py2f(self) -> int:
        return self.handle

    @classmethod
    def f2py(cls, arg: int):
        return cls.fromhandle(arg)

    def _predefine(self, name: str):
        """Make this object the predefined ``MPI.name`` (pickled by name)."""
        key = (self._family, id(self._h))
        _PREDEFINED.setdefault(key, (self, name))
        return self

    def _is_predefined(self) -> bool:
        return self._h is None or (self._family, id(self._h)) in _PREDEFINED

    def __reduce__(self):
        got = _PREDEFINED.get((self._family, id(self._h)))
        if got is None and self._h is None:
            got = _PREDEFINED.get((self._family, 0))
        if got is None:
            return self._reduce_other()
        obj, name = got
        if self is obj:
            return name
        return (__newobj__, (type(self), obj))

    def _reduce_other(self):
        raise ValueError(f"cannot serialize '{type(self).__module__}.{type(self).__name__}' instance")

    _free_predefined = False
    """Does ``free()`` of a copy of a predefined handle call ``Free`` (an Errhandler's) or make it null?"""

    def free(self) -> None:
        """As mpi4py's ``safefree``: nothing for null and for the module's own constants; a copy of a
        predefined handle becomes null; anything else is freed (``Free``)."""
        if self._h is None or self.__dict__.get("_const"):
            return
        if self._is_predefined() and not self._free_predefined:
            self._h = None
            return
        self._free()

    def _free(self) -> None:
        self.Free()


def _sizeof(obj) -> int:
    """``MPI._sizeof``: bytes of the C object: a handle is a pointer (the MPI object's address, as Open MPI's
    handles are); a status five ints (MPICH's)."""
    cls = obj if isinstance(obj, type) else type(obj)
    if getattr(cls, "__name__", "") == "Status" or any(c.__name__ == "Status" for c in cls.__mro__):
        return 20
    if not issubclass(cls, Handle) and not hasattr(cls, "_h"):
        raise TypeError(f"expecting an MPI object or class, got {cls.__name__}")
    return 8


def _addressof(obj) -> int:
    """``MPI._addressof``: where the object's handle is in memory (``_Cell``); a status: the object's id."""
    if obj is None or not (isinstance(obj, Handle) or type(obj).__name__ == "Status" or hasattr(obj, "_h")):
        raise TypeError(f"expecting an MPI object, got {type(obj).__name__}")
    if not isinstance(obj, Handle):
        return id(obj)
    import ctypes

    d, store = obj.__dict__, type(obj)._store
    cell = d.get("_cell")
    if cell is None or store in d:  # first time, or the object was given another MPI object since
        impl = getattr(obj, store)
        d.pop(store, None)
        if cell is None:
            cell = d["_cell"] = ctypes.c_void_p()
        if impl is not None:
            _LIVE[id(impl)] = impl
        cell.value, d["_keep"] = (0 if impl is None else id(impl)), impl
    return ctypes.addressof(cell)


def _handleof(obj) -> int:
    if isinstance(obj, Handle) or hasattr(obj, "handle"):
        return obj.handle
    if type(obj).__name__ == "Status":
        return id(obj)
    raise TypeError(f"expecting an MPI object, got {type(obj).__name__}")


def mark_constants(namespace: dict) -> None:
    """The handle objects of the module ``namespace`` (``MPI.INT``, ``MPI.COMM_WORLD`` ...) are its
    constants: ``free()`` leaves them alone (mpi4py's ``PyMPI_FLAGS_CONST``)."""
    for v in list(namespace.values()):
        if isinstance(v, Handle):
            v.__dict__["_const"] = True


def predefine_null(obj, name: str):
    """``obj`` (a null handle) is ``MPI.name``."""
    _PREDEFINED.setdefault((obj._family, 0), (obj, name))
    return obj
