"""Settings: every field of the specs, from the CLI (``--set``) and from TOML files (``--config``)."""

from __future__ import annotations

from .base import ConfigError
from .numbers import decimal_float, decimal_int, hint, is_decimal, with_unit
from .host import ElanSpec, HostSpec, NicSpec
from .network import LinkSpec, ManagerSpec, PUSpec, SwitchSpec
from .queues import QueueSpec

# -- settings: every field of the specs, from the CLI (--set) and from TOML files (--config) ------
SECTIONS: dict[str, type] = {"link": LinkSpec, "host": HostSpec, "nic": NicSpec, "elan": ElanSpec,
                             "switch": SwitchSpec, "manager": ManagerSpec, "pu": PUSpec,
                             "queues": QueueSpec}
"""Settable sections by name; a later spec registers its own with :func:`register_section`."""
MAX_INT = 1 << 62
"""Largest integer a setting may take: virtual times are 64-bit on the wire."""


def register_section(name: str, cls: type) -> None:
    SECTIONS[name] = cls


_FIELD_TYPES: dict[type, dict[str, type]] = {}
"""``_field_types`` per class, worked out once (``typing.get_type_hints`` compiles every annotation)."""


def _field_types(cls: type) -> dict[str, type]:
    got = _FIELD_TYPES.get(cls)
    if got is None:
        import dataclasses
        import typing

        hints = typing.get_type_hints(cls)
        own = cls.__dict__.get("__annotations__", {})  # a spec's own fields first, then its bases' (HostSpec's CcParams)
        fields = sorted(dataclasses.fields(cls), key=lambda f: f.name not in own)
        got = _FIELD_TYPES[cls] = {f.name: hints[f.name] for f in fields if hints[f.name] in (int, float, bool, str)}
    return dict(got)


def field_docs(cls: type) -> dict[str, str]:
    """The docstring under each field of a spec dataclass (the first sentence: up to a full stop
    followed by a capital, so that "e.g. 4" or "i.e. 512" does not end it)."""
    import ast
    import re
    import inspect
    import textwrap

    docs = {}
    for base in cls.__mro__[1:-1]:  # a spec's dataclass bases (HostSpec's CcParams) document their own fields
        docs.update(field_docs(base) if hasattr(base, "__dataclass_fields__") else {})
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError):
        return docs
    body = tree.body[0].body
    for a, b in zip(body, body[1:]):
        if (isinstance(a, ast.AnnAssign) and isinstance(a.target, ast.Name) and isinstance(b, ast.Expr)
                and isinstance(b.value, ast.Constant) and isinstance(b.value.value, str)):
            text = " ".join(b.value.value.split())
            docs[a.target.id] = re.split(r"(?<!\be\.g)(?<!\bi\.e)\.\s+(?=[A-Z`(])", text, maxsplit=1)[0].rstrip(".") + "."
    return docs


def settable_fields() -> list[tuple[str, str, object, str]]:
    """(section.field, type name, default, doc) of every settable field, for help texts."""
    out = []
    for section, cls in SECTIONS.items():
        docs = field_docs(cls)
        defaults = cls()
        for name, kind in _field_types(cls).items():
            out.append((f"{section}.{name}", kind.__name__, getattr(defaults, name), docs.get(name, "")))
    return out


def _convert(where: str, value: object, kind: type) -> object:
    """A setting's value as the field's type (strings from the CLI, TOML values from a file)."""
    if isinstance(value, str) and kind is not str:
        text = value.strip()
        if not text.isascii():  # int() and float() take any script's digits: '٤' would be 4
            raise ConfigError(f"{where} must be written in ASCII (digits 0-9), got {value!r}")
        try:  # decimal only (emu.config.numbers): 0x10 and 1_0 are refused, with the decimal spelling
            if kind is bool:
                if text.lower() not in ("true", "false", "1", "0", "yes", "no"):
                    raise ValueError
                value = text.lower() in ("true", "1", "yes")
            elif (scaled := with_unit(where, text)) is not None:  # 1us, 100Gbps, 8KiB
                value = _int_from_float(where, round(scaled, 6)) if kind is int else scaled
            elif kind is int:
                value = decimal_int(text) if is_decimal(text, fraction=False) \
                    else _int_from_float(where, decimal_float(text))
            else:
                value = decimal_float(text)
        except ValueError as e:
            if "unit" in str(e):
                raise ConfigError(f"{where}={value}: {e}") from None
            raise ConfigError(f"{where} must be {'an integer' if kind is int else 'a number' if kind is float else 'true or false'}, "
                              f"got {value!r}{hint(text) if kind is not bool else ''}") from None
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if kind is int and isinstance(value, float):
        value = _int_from_float(where, value)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ConfigError(f"{where} must be of type {kind.__name__}, got {value!r}")
    if kind is int and not -MAX_INT <= value <= MAX_INT:
        raise ConfigError(f"{where}={value} is out of range (at most 2**62); use a smaller value")
    if kind is float:
        import math

        if not math.isfinite(value) or abs(value) > MAX_INT:
            raise ConfigError(f"{where}={value} must be a finite number of at most 2**62")
    return value


def _int_from_float(where: str, v: float) -> int:
    import math

    if not math.isfinite(v) or v != int(v):
        raise ConfigError(f"{where} must be an integer, got {v!r}")
    return int(v)


def parse_settings(items: list[str]) -> dict[str, dict[str, object]]:
    """``["host.send_overhead_ns=435", "link.latency_ns=100"]`` -> {section: {field: value}},
    each value converted and checked against its field (ConfigError names the fix)."""
    out: dict[str, dict[str, object]] = {}
    for item in items:
        key, eq, value = (x.strip() for x in str(item).partition("="))
        section, dot, name = key.partition(".")
        if not eq or not dot or not value:
            raise ConfigError(f"--set {item!r} is not SECTION.FIELD=VALUE, e.g. --set host.send_overhead_ns=435")
        _check_key(section, name, f"--set {key}")
        out.setdefault(section, {})[name] = _convert(key, value, _field_types(SECTIONS[section])[name])
    return out


def _check_key(section: str, name: str, where: str) -> None:
    cls = SECTIONS.get(section)
    if cls is None:
        raise ConfigError(f"{where}: unknown section {section!r}; sections: {', '.join(SECTIONS)}")
    if name not in _field_types(cls):
        raise ConfigError(f"{where}: {section} has no field {name!r}; fields: {', '.join(_field_types(cls))}")


def load_settings(path: str) -> dict[str, dict[str, object]]:
    """A TOML file of sections (``[link]``, ``[host]``, ``[nic]``, ``[switch]``) of fields."""
    from .files import read_toml

    data = read_toml(path, f"--config {path}")
    out: dict[str, dict[str, object]] = {}
    for section, fields in data.items():
        if section == "job" and isinstance(fields, list):  # [[job]] tables: the jobs of a run (emu.front.jobs)
            continue
        if not isinstance(fields, dict):
            raise ConfigError(f"--config {path}: {section} = ... must be a [section] of fields "
                              f"(sections: {', '.join(SECTIONS)})")
        for name, value in fields.items():
            _check_key(section, name, f"--config {path}")
            out.setdefault(section, {})[name] = _convert(f"{section}.{name}", value, _field_types(SECTIONS[section])[name])
    return out


def merge_settings(*layers: dict[str, dict[str, object]] | None) -> dict[str, dict[str, object]]:
    """Later layers win, field by field."""
    out: dict[str, dict[str, object]] = {}
    for layer in layers:
        for section, fields in (layer or {}).items():
            out.setdefault(section, {}).update(fields)
    return out
