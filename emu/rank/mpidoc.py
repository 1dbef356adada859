"""The docstrings of the emulated ``mpi4py.MPI``: mpi4py's own, as its compiled module has them.

``mpidoc.json`` holds the docstring of every function, class, method and property of mpi4py 4.1.2's
``MPI`` module (mpi4py, BSD-2-Clause, (c) Lisandro Dalcin; taken from the compiled module's
``__doc__``s): ``"Comm.Get_rank": "Get_rank(self) -> int\\n\\nReturn the rank of ..."`` -- the call's
signature, a blank line, then what it does. ``apply`` gives each name of the emulated module that mpi4py
has its docstring, so that ``help(MPI.Comm.Send)`` reads as with mpi4py (and mpi4py's ``test_doc``, which
checks that form, passes). A name mpi4py has not got keeps the emulated library's own docstring, put in
that form (its own signature first); a private name's docstring (the library's internals) is dropped
there, as the compiled module has none."""

from __future__ import annotations

import inspect
import json
import os
import textwrap

TABLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mpidoc.json")


def _signature(name: str, obj) -> str:
    """``name(a, b, ...)``: the function's parameters by name (what ``inspect.signature`` would say, cheaply:
    this runs at every rank's import)."""
    code = getattr(obj, "__code__", None)
    if code is None:
        return f"{name}(...)"
    n = code.co_argcount + code.co_kwonlyargcount
    return f"{name}({', '.join(code.co_varnames[:n])})"


def _own(name: str, obj, doc: str | None, head: str | None) -> str | None:
    """The emulated library's docstring of a name mpi4py has not got, in mpi4py's form (None if none, or
    private: its ``__name__`` starts with ``_``)."""
    own = getattr(obj.fget if isinstance(obj, property) and obj.fget is not None else obj, "__name__", name)
    if own.startswith("_") or not doc or not doc.strip():
        return None
    text = textwrap.dedent(doc if doc.startswith("\n") else "\n" + doc.partition("\n")[2]).strip() \
        if "\n" in doc else doc.strip()
    if "\n" in doc and not text:
        text = doc.partition("\n")[0].strip()
    summary, _, rest = text.partition("\n\n")
    summary = " ".join(summary.split())
    summary = summary[:1].upper() + summary[1:]
    if not summary.endswith("."):
        summary += "."
    rest = rest.rstrip()
    if rest and not rest.endswith("."):
        rest += "."
    body = summary + ("\n\n" + rest if rest else "")
    return body if head is None else f"{head}\n\n{body}"


def _set(obj, doc: str | None) -> None:
    try:
        obj.__doc__ = doc
    except (AttributeError, TypeError):
        pass


def _member(table: dict, by_name: dict, cls: type, name: str, value) -> None:
    if isinstance(value, (classmethod, staticmethod)):
        value = value.__func__
    if not (inspect.isfunction(value) or isinstance(value, property)):
        return
    # mpi4py's docstring of this class's member, else of a base's (an Intercomm's Bcast is a Comm's), else
    # of any class's member of that name (a handle's ``fromhandle``)
    doc = next((table[k] for k in (f"{c.__name__}.{name}" for c in cls.__mro__) if k in table), by_name.get(name))
    if doc is None:
        target = value.fget if isinstance(value, property) and value.fget is not None else value
        head = f"{name}: object" if isinstance(value, property) else _signature(name, target)
        doc = _own(name, value, value.__doc__, head)
    _set(value, doc)


def apply(namespace: dict) -> None:
    """Give the module's functions, classes and their members mpi4py's docstrings (``namespace``: the
    emulated module's globals)."""
    with open(TABLE, encoding="utf-8") as f:
        table = json.load(f)
    by_name = {}
    for key, doc in sorted(table.items()):
        by_name.setdefault(key.rpartition(".")[2], doc)
    for name, value in list(namespace.items()):
        if isinstance(value, type):
            if not value.__module__.startswith(("mpi4py", "emu.")):
                continue
            doc = table.get(name)
            _set(value, doc if doc is not None else _own(name, value, value.__doc__, None))
            for mname, member in list(vars(value).items()):
                _member(table, by_name, value, mname, member)
        elif inspect.isfunction(value):
            doc = table.get(name)
            _set(value, doc if doc is not None else _own(name, value, value.__doc__, _signature(name, value)))
