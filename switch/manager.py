"""The network manager of spec 03: a real element, its own frames (sans-I/O).

How it reaches the routers (``ManagerSpec.band``, ``Topology.add_manager``): **out of band** (QsNet's
default) every router has its own link to the manager -- its Ethernet controller -- and sends its
traps (``emu.wire.qsnet.QsTrap``) straight up it; commands (``QsMgmt``) come straight down it, so
no data-link fault cuts the manager off from the report of it. **In band** the manager is linked to
one switch and the *manager tree* carries traps up and commands down, source-routed (a port per
router on the way). Each command is answered DONE and resent after ``ManagerSpec.retry_ns`` until
it is (at most ``max_tries`` sends, then logged as failed).

What it does with traps:

* **link down** (a router saw its link fail, or bring-up found no one at the other end): if the
  link is still down ``persist_ns`` after the first trap, the manager acts (``ManagerSpec.action``):
  *rewrite* takes the link out of the tables: the manager recomputes every router's minimal next
  hops without it and rewrites, in the routers whose choice changes, the entries that would send
  into the dead end (``SET_ROUTES``: the static choice and the adaptive candidates), and moves the
  multicast trees off it (``SET_GROUP``; a tree whose root switch is gone moves to the next live
  one); *reset* resets the links of the router that can no longer reach the destinations behind it
  (``RESET`` to it and its neighbours: no traffic flows that way; see ``_reset``). A **link up**
  that persists puts it back (new tables, or ``ADMIT`` of the ports reset).
* **bring-up** results (``emu.bringup``): a link whose test pattern lost or damaged more than
  ``max_error_rate`` of its frames, or that is mis-cabled, is taken out of the tables where the
  network has another way between all hosts; where it is the only way (a node's only link), it is
  kept and admitted into service (``ADMIT``), and the report says so.
* **invalid destination** (a router NACKed a packet it could not deliver): counted; the link-down
  trap that explains it drives the action.

``actions`` lists what the manager did, in virtual time, for reports and tests.
"""

from __future__ import annotations

import copy
import heapq
import logging
from dataclasses import dataclass, field
from typing import Any

from emu.build import register_engine
import struct

from emu.config import ConfigError, ManagerSpec, SwitchSpec
from emu.wire import DecodeError
from emu.wire import HDR_LEN, PacketType, build_frame
from emu.wire.qsnet import MGMT, ROUTE_ENTRY, TRAP, MgmtOp, TrapKind

log = logging.getLogger(__name__)

ENTRIES_PER_COMMAND = 200
"""SET_ROUTES entries per command frame (a table is rewritten in as many commands as it takes)."""


@dataclass(eq=False)
class ManagerEngine:
    name: str
    node_id: int
    spec: SwitchSpec
    topology: Any
    mspec: ManagerSpec
    timer: int | None = None
    kind = "manager"
    tracer = None
    """The run's ``emu.trace.Tracer`` when traced, else None."""
    stats: dict[str, int] = field(default_factory=lambda: {
        "traps": 0, "commands_sent": 0, "commands_resent": 0, "commands_done": 0, "commands_failed": 0,
        "links_out": 0, "links_back": 0, "links_kept": 0, "foreign": 0})
    actions: list = field(default_factory=list)
    """(t_ns, what) for every decision, in order."""

    def __post_init__(self) -> None:
        from emu.topologies.paths import candidate_rows

        t = self.topology
        self.min_delay_ns = self.spec.processing_delay_ns
        self._timers: list[tuple[int, int, Any, Any]] = []
        self._tseq = 0
        self.switches = [s.name for s in t.switches if s.name != self.name]
        self.ids = {n.id: n.name for n in t.nodes.values()}
        nb = t.neighbours()
        self.link_at = {(n, p): frozenset((n, v)) for n in t.nodes for p, v, _vp, _l in nb[n]}
        self.dead: set[frozenset] = set()
        self.down_since: dict[frozenset, int] = {}
        self.up_since: dict[frozenset, int] = {}
        # what the routers hold now, as the manager knows it
        rows = candidate_rows(self._view())
        self.routes = {s: list(t.routes.get(s, [])) for s in self.switches}
        self.planned = {s: list(t.routes.get(s, [])) for s in self.switches}
        """The family's own tables: the choice a rewrite goes back to wherever it is minimal again."""
        self.cands = {s: [tuple(c) for c in rows.get(s, [])] for s in self.switches}
        self.group_ports = {s: dict(g) for s, g in t.group_ports.items()}
        self.attach = next(v for _p, v, _vp, _l in nb[self.name])
        self.out_of_band = t.nodes[self.name].info.get("band") == "out"
        """Each router has its own link to the manager (spec 03): commands go straight to it."""
        self.mport = {v: p for p, v, _vp, _l in nb[self.name]}
        """Switch -> the manager's port toward it (out of band: its own link)."""
        self.nacked: dict[frozenset, set[str]] = {}
        """Link -> the routers that raised invalid-destination traps on it."""
        self.resets: dict[frozenset, list[tuple[str, int]]] = {}
        """Link -> the (router, port) pairs the manager took out of service for it (action reset)."""
        self._paths: dict[str, list[int]] = {}
        self._paths_for: frozenset | None = None
        self._seq = 0
        self.pending: dict[int, list] = {}
        from .aggregate.control import IncControl

        self.inc = IncControl(self)

    # -- engine interface -----------------------------------------------------------------------
    def receive(self, frame: bytes, port: int, now: int) -> list[tuple[int, bytes, int]]:
        from emu.wire import parse_frame

        try:
            src, dst, _vc, _p, ptype, _f, _h, _r, _n = parse_frame(frame)
            if dst != self.node_id:
                raise ValueError(f"for {dst}")
            if ptype == PacketType.TRAP:
                return self._on_trap(TRAP.unpack(frame, HDR_LEN), now)
            if ptype == PacketType.MGMT and MGMT.unpack(frame, HDR_LEN)[0] in (MgmtOp.DONE, MgmtOp.REFUSED):
                answer, seq = MGMT.unpack(frame, HDR_LEN)[0], MGMT.unpack(frame, HDR_LEN)[4]
                cmd = self.pending.pop(seq, None)
                if cmd is not None and cmd[0] == self.ids.get(src):
                    self.stats["commands_done"] += 1
                    if cmd[3] is not None:
                        return cmd[3](answer == MgmtOp.DONE, now, "" if answer == MgmtOp.DONE else "refused")
                elif cmd is not None:
                    self.pending[seq] = cmd
                return []
            if ptype == PacketType.INCCTL:
                return self.inc.on_request(src, frame, now)
            raise ValueError(f"packet type {ptype}")
        except (DecodeError, ValueError, IndexError, struct.error) as e:  # foreign or malformed: counted, dropped, logged
            self.stats["foreign"] += 1
            log.warning("%s: dropped a frame on port %d at %d ns: %s", self.name, port, now, e)
            return []

    def on_timer(self, now: int) -> list[tuple[int, bytes, int]]:
        out: list = []
        while self._timers and self._timers[0][0] <= now:
            _t, _s, fn, arg = heapq.heappop(self._timers)
            out += fn(arg, now)
        self.timer = self._timers[0][0] if self._timers else None
        return out

    def _at(self, t: int, fn, arg) -> None:
        self._tseq += 1
        heapq.heappush(self._timers, (t, self._tseq, fn, arg))
        self.timer = self._timers[0][0]

    # -- traps -----------------------------------------------------------------------------------
    def _on_trap(self, trap, now: int) -> list:
        kind, port, count, router, dest, _t = trap
        self.stats["traps"] += 1
        key = "traps_" + (TrapKind(kind).name.lower() if kind in TrapKind._value2member_map_ else str(kind))
        self.stats[key] = self.stats.get(key, 0) + 1
        name = self.ids.get(router)
        link = self.link_at.get((name, port))
        if link is None:
            return []
        if kind == TrapKind.INVALID_DEST:
            self.nacked.setdefault(link, set()).add(name)
        elif kind == TrapKind.LINK_DOWN:
            self.up_since.pop(link, None)
            if link not in self.down_since and link not in self.dead:
                self.down_since[link] = now
                self._at(now + self.mspec.persist_ns, self._persisted_down, link)
        elif kind == TrapKind.LINK_UP:
            self.down_since.pop(link, None)
            if link in self.dead and link not in self.up_since:
                self.up_since[link] = now
                self._at(now + self.mspec.persist_ns, self._persisted_up, link)
        elif kind in (TrapKind.BRINGUP, TrapKind.BRINGUP_ONEWAY, TrapKind.MISCABLED):
            if link in self.dead:  # the other end's report of it came first
                return []
            sample = self.mspec.test_frames * (1 if kind == TrapKind.BRINGUP_ONEWAY else 2)
            rate = count / sample if kind != TrapKind.MISCABLED else 1.0
            if rate > self.mspec.max_error_rate:
                way = f" on the way to {name}" if kind == TrapKind.BRINGUP_ONEWAY else ""
                what = (f"mis-cabled (found {self.ids.get(dest, dest)} port {count})" if kind == TrapKind.MISCABLED
                        else f"{count} of {sample} test frames lost or damaged{way} (share {rate:.3g} > "
                             f"{self.mspec.max_error_rate:g}, sample {sample})")
                return self._bad_link(link, name, port, what, now)
        return []

    def _persisted_down(self, link: frozenset, now: int) -> list:
        if self.down_since.pop(link, None) is None or link in self.dead:
            return []  # it came back meanwhile
        if not self._redundant(link):  # no other way: the tables have nothing better to say
            self.stats["links_kept"] += 1
            self._record(now, f"link {'-'.join(sorted(link))} down: the only way to a node, tables left as they are")
            return []
        return self._take_out(link, "down", now)

    def _persisted_up(self, link: frozenset, now: int) -> list:
        if self.up_since.pop(link, None) is None or link not in self.dead:
            return []
        self.dead.discard(link)
        self.stats["links_back"] += 1
        held = self.resets.pop(link, None)
        if held is not None:  # action reset: the router's links back in service
            self._record(now, f"link {'-'.join(sorted(link))} back up: {held[0][0]}'s links back in service")
            return [f for sw, port in held for f in self._command(sw, MgmtOp.ADMIT, port, b"", now)]
        self._record(now, f"link {'-'.join(sorted(link))} back up: into the tables again")
        return self._rewrite(now)

    def _bad_link(self, link: frozenset, router: str, port: int, what: str, now: int) -> list:
        if self._redundant(link):
            return self._take_out(link, what, now)
        self.stats["links_kept"] += 1
        self._record(now, f"link {'-'.join(sorted(link))} {what}: kept, the only way to a node; admitted")
        return self._command(router, MgmtOp.ADMIT, port, b"", now)

    def _take_out(self, link: frozenset, why: str, now: int) -> list:
        if self.mspec.action == "none":
            self._record(now, f"link {'-'.join(sorted(link))} {why}: action none, tables left as they are")
            return []
        if self.mspec.action == "reset":
            return self._reset(link, why, now)
        self.dead.add(link)
        self.stats["links_out"] += 1
        self._record(now, f"link {'-'.join(sorted(link))} {why}: out of the tables")
        return self._rewrite(now)

    def _reset(self, link: frozenset, why: str, now: int) -> list:
        """Action reset (spec 03): reset the links of the router that can no longer reach the
        destinations behind ``link`` -- the end that raised invalid-destination traps on it, else an
        end with no node on it -- so that no traffic flows that way: it and each router linked to it
        take the ports between them out of service (``MgmtOp.RESET``); adaptive routing goes round
        it, a packet that still meets it is NACKed and resent another way. Refused (tables left as
        they are) where that would cut a node off."""
        t, nb = self.topology, self.topology.neighbours()
        hosted = {e for e in link if any(t.nodes[v].kind == "host" for _p, v, _vp, _l in nb[e])}
        ends = sorted(self.nacked.get(link, set()) & link) or sorted(link - hosted)
        name = "-".join(sorted(link))
        if not ends:
            self._record(now, f"link {name} {why}: both ends have nodes on them, no router to reset")
            return []
        router = min(ends, key=lambda e: t.nodes[e].id)
        peers = [(v, vp) for _p, v, vp, _l in nb[router] if v != self.name and t.nodes[v].kind == "switch"]
        cut = frozenset(frozenset((router, v)) for v, _vp in peers)
        if not self._redundant_all(cut | {link}):
            self.stats["links_kept"] += 1
            self._record(now, f"link {name} {why}: resetting {router}'s links would cut nodes off; left as they are")
            return []
        held = [(router, 0xFFFF)] + [(v, vp) for v, vp in peers]
        # the manager still reaches every router after the reset: ports out of service still carry management frames (as an InfiniBand port that is not
        # active still passes subnet management packets), so resetting the links next to it (its own
        # switch's, in band) never cuts it off
        self.dead.add(link)  # (the commands go round it)
        out = [f for sw, port in held for f in self._command(sw, MgmtOp.RESET, port, b"", now)]
        self.stats["links_out"] += 1
        self.stats["routers_reset"] = self.stats.get("routers_reset", 0) + 1
        self.resets[link] = held
        self._record(now, f"link {name} {why}: {router}'s links reset ({len(peers)} routers take their ports to it "
                          "out of service)")
        return out

    def _record(self, now: int, what: str) -> None:
        self.actions.append((now, what))
        log.info("%s at %d ns: %s", self.name, now, what)

    # -- tables ----------------------------------------------------------------------------------
    def _view(self, extra: frozenset | None = None):
        """The topology without the manager and without the dead links (and ``extra``)."""
        t = self.topology
        v = copy.copy(t)
        dead = self.dead | ({extra} if extra else set())
        v.nodes = {n: node for n, node in t.nodes.items() if n != self.name}
        v.links = [lk for lk in t.links if self.name not in (lk.a, lk.b) and frozenset((lk.a, lk.b)) not in dead]
        v._portmap = None
        v.group_ports, v.groups, v.group_roots = {}, {}, {}
        return v

    def _redundant(self, link: frozenset) -> bool:
        """Do all hosts still reach each other without ``link`` (and the links already out)?"""
        return self._redundant_all({link})

    def _redundant_all(self, links) -> bool:
        v = self._view()
        v.links = [lk for lk in v.links if frozenset((lk.a, lk.b)) not in links]
        nb = v.neighbours()
        hosts = [h.name for h in v.hosts]
        seen, todo = {hosts[0]}, [hosts[0]]
        while todo:
            u = todo.pop()
            if u != hosts[0] and v.nodes[u].kind == "host":
                continue
            for _p, w, _wp, _l in nb[u]:
                if w not in seen:
                    seen.add(w)
                    todo.append(w)
        return all(h in seen for h in hosts)

    def _rewrite(self, now: int) -> list:
        """New tables without the dead links: the entries that change, to the routers that hold them."""
        from emu.topologies.paths import candidate_rows

        view = self._view()
        rows = candidate_rows(view)
        out: list = []
        for s in self.switches:
            row, cur_r, cur_c = rows.get(s, []), self.routes[s], self.cands[s]
            entries = []
            for d, new in enumerate(row):
                plan = self.planned[s][d] if d < len(self.planned[s]) else -1
                static = plan if plan in new else cur_r[d] if d < len(cur_r) and cur_r[d] in new else (
                    new[0] if new else -1)
                ports = ((static,) + tuple(p for p in new if p != static)) if static >= 0 else ()
                if d >= len(cur_r) or static != cur_r[d] or set(ports) != set(cur_c[d] if d < len(cur_c) else ()):
                    entries.append((d, ports))
                    if d < len(cur_r):
                        cur_r[d] = static
                        cur_c[d] = ports
            for i in range(0, len(entries), ENTRIES_PER_COMMAND):
                chunk = entries[i:i + ENTRIES_PER_COMMAND]
                body = b"".join(ROUTE_ENTRY.pack(d, len(p)) + bytes(p) for d, p in chunk)
                out += self._command(s, MgmtOp.SET_ROUTES, len(chunk), body, now)
        if self.topology.groups:
            for gid, members in self.topology.groups.items():
                try:
                    view.add_group(gid, members)
                except ConfigError as e:
                    self._record(now, f"group {gid:#x}: no tree without the dead links ({e}); left as it is")
            for s in self.switches:
                for gid in self.topology.groups:
                    new = view.group_ports.get(s, {}).get(gid, ())
                    if tuple(self.group_ports.get(s, {}).get(gid, ())) != tuple(new):
                        self.group_ports.setdefault(s, {})[gid] = new
                        out += self._command(s, MgmtOp.SET_GROUP, len(new), gid.to_bytes(4, "big") + bytes(new), now)
            for gid, root in view.group_roots.items():
                if self.topology.group_roots.get(gid) != root:
                    self._record(now, f"group {gid:#x}: tree root moved to {root}")
                    self.topology.group_roots[gid] = root
        return out

    # -- commands --------------------------------------------------------------------------------
    def path(self, switch: str) -> list[int] | None:
        """The ports a command takes from the manager's switch to ``switch``, around the links
        known dead (breadth first over routers, ties by port); None: unreachable. Ports a reset
        took out of service are not in the way: they carry management frames still."""
        if self.out_of_band:  # its own link: no fault on the data links is in the way
            return [] if switch in self.mport else None
        # links out of service (reset) still carry management frames: only dead links are in the way
        dead = frozenset(self.dead | set(self.down_since))
        if self._paths_for != dead:
            nb = self._view(None).neighbours()
            self._paths = {self.attach: []}
            q = [self.attach]
            for u in q:
                for p, v, _vp, _l in nb[u]:
                    if v not in self._paths and self.topology.nodes[v].kind == "switch" \
                            and frozenset((u, v)) not in dead:
                        self._paths[v] = self._paths[u] + [p]
                        q.append(v)
            self._paths_for = dead
        return self._paths.get(switch)

    def _command(self, switch: str, op: MgmtOp, count: int, body: bytes, now: int, on_answer=None) -> list:
        """Send a command to ``switch``; ``on_answer(ok, now, why)`` (if given) hears how it ended
        (DONE, REFUSED, or unanswered) and returns frames to send."""
        route = self.path(switch)
        if route is None:
            self.stats["commands_failed"] += 1
            self._record(now, f"{switch} cannot be reached around the dead links: command {MgmtOp(op).name} not sent")
            return on_answer(False, now, "unreachable") if on_answer is not None else []
        self._seq = (self._seq + 1) & 0xFFFF
        head = MGMT.pack(op, 0, len(route), 0, self._seq, count)
        frame = build_frame(self.node_id, self.topology.nodes[switch].id, PacketType.MGMT,
                            head + bytes(route) + bytes(len(route)) + body, prio=1)
        port = self.mport[switch] if self.out_of_band else 0
        cmd = [switch, frame, 1, on_answer, port]
        self.pending[self._seq] = cmd
        self.stats["commands_sent"] += 1
        self._at(now + self.mspec.retry_ns, self._retry, self._seq)
        return [(port, frame, now + self.min_delay_ns)]

    def port_to(self, host: int) -> int:
        """The manager's port for a frame to host address ``host`` (spec 04's answers): in band, its one
        link; out of band, the link of the router the host is on (which forwards it by its table)."""
        if not self.out_of_band:
            return 0
        if not hasattr(self, "_host_port"):
            nb = self.topology.neighbours()
            self._host_port = {self.topology.nodes[h].id: self.mport.get(nb[h][0][1], 0)
                               for h in self.topology.host_names()}
        return self._host_port.get(host, 0)

    def _retry(self, seq: int, now: int) -> list:
        cmd = self.pending.get(seq)
        if cmd is None:
            return []
        if cmd[2] >= self.mspec.max_tries:
            del self.pending[seq]
            self.stats["commands_failed"] += 1
            self._record(now, f"command {seq} to {cmd[0]} unanswered after {cmd[2]} sends: given up")
            return cmd[3](False, now, "unanswered") if cmd[3] is not None else []
        cmd[2] += 1
        self.stats["commands_resent"] += 1
        if self.tracer is not None:
            self.tracer.instant(self.name, "retransmit", now, {"what": "command", "seq": seq, "to": cmd[0]}, "retransmit")
        self._at(now + self.mspec.retry_ns, self._retry, seq)
        return [(cmd[4], cmd[1], now + self.min_delay_ns)]


    def extra_stats(self) -> dict[str, Any]:
        """What the manager did (``Cluster.stats``): [(t_ns, what), ...]."""
        return {"actions": list(self.actions)}


def _few(names: list[str], n: int = 4) -> str:
    """``s0, s1, s2 and 3 more``: a list of names short enough for one line."""
    return ", ".join(names[:n]) + (f" and {len(names) - n} more" if len(names) > n else "")


def make_manager(node, topology, cache: dict) -> ManagerEngine:
    return ManagerEngine(node.name, node.id, node.spec, topology, node.info["manager"])


register_engine("manager", make_manager, min_delay=lambda spec: spec.processing_delay_ns)
