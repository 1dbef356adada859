"""The compiled ``start_ready`` (``emu/csrc/flowwake.h``'s ``fw_fields``) reads a CreditState's dict as
__init__ made it -- its class's shared keys -- by ``emu/csrc/common.h``'s ``h2_split_values``: the
fields' indices in those keys found once, a field not among them (``by_prio``) absent without a lookup;
any other dict by ``fw_dict_values``. Here the shared keys gain keys mid-run (``by_prio`` among them,
the indices found before then stale), split dicts gain, lose and replace fields, and flows of other
layouts are read in turn with the same indices: each seen as Python's ``OutPort.start_ready`` (the
specification) sees it -- the core's result and state the twin of Python's, or None (declined) before
anything changed."""

import ctypes
import os
import subprocess
import sys
from pathlib import Path

from emu.buffers import CreditState
from test_flowwake_hints import _Pair, native, needs_core


def _grow_shared_keys(name: str) -> None:
    """The class's shared keys gain ``name``: set on an instance before its dict is made (CPython 3.11's
    inline values; elsewhere harmless)."""
    spare = CreditState(1, [0])
    setattr(spare, name, 0 if name != "by_prio" else False)


def _layouts() -> dict:
    """Flows whose dicts differ: as __init__ made them (split), of another key order (combined), with a
    key equal to ``credits`` but not the interned str, with a key not a str."""
    t = {k: _Pair() for k in ("split", "split2", "reversed", "odd", "general")}
    for p in (t["reversed"].a, t["reversed"].b):
        p.flow.__dict__ = dict(reversed(list(p.flow.__dict__.items())))
    for p in (t["odd"].a, t["odd"].b):
        d = dict(p.flow.__dict__)
        d["".join(["cred", "its"])] = d.pop("credits")
        p.flow.__dict__ = d
    for p in (t["general"].a, t["general"].b):
        p.flow.__dict__[1] = 2
    return t


@needs_core
def test_split_dicts_read_as_python_reads_them():
    t = _layouts()
    for _ in range(2):
        for x in t.values():
            x.step()
    s = t["split"]
    s.both(lambda p: setattr(p.flow, "credits", [0] * p.flow.vcs))  # (a value replaced: read anew)
    assert s.step()[0] == [] and s.a.flow.stalled_since is not None
    s.both(lambda p: setattr(p.flow, "pool", 10**6))
    assert s.step()[0]
    s.both(lambda p: delattr(p.flow, "unit"))  # (a field gone from a split dict: the class's, Python's)
    s.step(expect_core=False)
    s.both(lambda p: setattr(p.flow, "unit", 1))
    s.step()
    t["split2"].step()


def _split_with_keys(o) -> bool:
    """(CPython 3.11, not a debug build) ``o``'s dict split, sharing its class's cached keys -- those of
    a new instance's dict (PyDictObject's ma_keys, ma_values read by ctypes); elsewhere True."""
    if sys.version_info[:2] != (3, 11) or hasattr(sys, "gettotalrefcount"):
        return True
    fresh = type(o).__new__(type(o))
    fresh.unit = 1  # (its dict made from the class's keys)

    def kv(d):
        return ctypes.c_void_p.from_address(id(d) + 32).value, ctypes.c_void_p.from_address(id(d) + 40).value

    (k, v), (k2, _) = kv(o.__dict__), kv(fresh.__dict__)
    return k == k2 and v is not None


def gaining() -> None:
    """(Run in a fresh interpreter: the class's shared keys with room to gain keys, as a test's run in a
    long pytest process need not leave them.) The indices found, then the shared keys gain a field new
    to them and ``by_prio``: found again; a flow with an instance ``by_prio`` (in its split dict, at an
    index found only now) Python's; the others', absent, the core's."""
    t = _layouts()
    for x in t.values():
        x.step()
    _grow_shared_keys("fwsplit_extra")  # (a key more: nothing of the fields moves)
    late = _Pair()  # (made with the grown keys)
    for x in (*t.values(), late):
        x.step()
    _grow_shared_keys("by_prio")  # (by_prio among the shared keys now: its index to be found)
    for x in (*t.values(), late):
        x.step()
    s = t["split"]
    s.both(lambda p: setattr(p.flow, "by_prio", False))  # (an instance's by_prio: Python's)
    assert _split_with_keys(s.a.flow)  # (still a split dict: by_prio found among the shared keys)
    s.step(expect_core=False)
    t["split2"].step()  # (its by_prio absent though among the keys: the core's)
    late.step()
    s.step(expect_core=False)
    s.both(lambda p: delattr(p.flow, "by_prio"))
    s.step()
    late.both(lambda p: setattr(p.flow, "by_prio", False))
    assert _split_with_keys(late.a.flow)
    late.step(expect_core=False)
    for x in t.values():
        x.step()
    print("fwsplit gaining: ok")


@needs_core
def test_shared_keys_gaining_keys_mid_run():
    here = Path(__file__).parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(here), *sys.path])}
    r = subprocess.run([sys.executable, "-c", "import test_fwsplit_shared_keys as t; t.gaining()"], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "fwsplit gaining: ok" in r.stdout, r.stderr[-3000:]


@needs_core
def test_a_subclass_and_a_field_more():
    class Sub(CreditState):
        pass

    t = _layouts()
    s = t["split"]
    s.step()
    s.both(lambda p: setattr(p.flow, "held_bytes", 0))  # (a field more: by_prio still absent)
    s.step()
    s.both(lambda p: setattr(p.flow, "__class__", Sub))  # (another class: Python's)
    s.step(expect_core=False)
    s.both(lambda p: setattr(p.flow, "__class__", CreditState))
    s.step()
    assert native.CORE is not None
