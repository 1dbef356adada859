"""Typed configuration, units in the names (DESIGN.md principle 7).

The specs of the network (``network``: links, switches, their processing units, the manager), of a
host (``host``: the host, its NIC's engines), how a cluster runs (``run``), and the settings that
set any of their fields from ``--set`` and TOML files (``settings``); ``base`` holds the error they
raise. Every name is here as it always was: ``from emu.config import HostSpec``.
"""

from __future__ import annotations

from .base import HORIZON_NS, MAX_DELAY_NS, ConfigError, _check_delays  # noqa: F401 -- private names as before
from .host import TRANSPORTS, ROUTE_PICKS, ElanSpec, HostSpec, NicSpec
from .network import (ADAPTIVE_FREE, ADAPTIVE_HEAVY, ADAPTIVE_LOADS, ALLOCATORS, MANAGER_ACTIONS, MANAGER_BANDS, PU_SCHEDULERS, ROUTER_MODELS,
                      VC_POLICIES, LinkSpec, ManagerSpec, PUSpec, SwitchSpec)
from .queues import ECN_MODES, QueueSpec, class_mask
from .run import MIN_REALTIME_NS_PER_S, PARTITIONS, RunConfig, _refuse_wildcard, bind_address, is_loopback  # noqa: F401
from .settings import (MAX_INT, SECTIONS, _check_key, _convert, _field_types, _int_from_float, field_docs,  # noqa: F401
                       load_settings, merge_settings, parse_settings, register_section, settable_fields)

__all__ = ["ADAPTIVE_FREE", "ADAPTIVE_HEAVY", "ADAPTIVE_LOADS", "ALLOCATORS", "MANAGER_ACTIONS", "MANAGER_BANDS", "HORIZON_NS", "MAX_DELAY_NS", "MAX_INT",
           "MIN_REALTIME_NS_PER_S", "PARTITIONS", "PU_SCHEDULERS", "ROUTER_MODELS", "ROUTE_PICKS", "SECTIONS",
           "TRANSPORTS", "VC_POLICIES", "ConfigError", "ElanSpec", "HostSpec", "LinkSpec", "ManagerSpec", "NicSpec",
           "PUSpec", "QueueSpec", "ECN_MODES", "class_mask", "RunConfig", "SwitchSpec", "bind_address", "field_docs", "is_loopback", "load_settings",
           "merge_settings", "parse_settings", "register_section", "settable_fields"]
