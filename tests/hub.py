"""A user's own engine kind, as the README's "Write your own engine" shows: a hub that repeats every
frame on every other port that is up. Registered by name when this module is imported."""

from emu.build import register_engine


class Hub:
    kind = "hub"

    def __init__(self, name: str, nports: int, delay_ns: int):
        self.name, self.nports, self.min_delay_ns = name, nports, delay_ns
        self.timer = None
        self.ports = None  # the runtime's port view (read-only, at our own `now`)
        self.stats = {"repeated": 0, "skipped_down": 0, "link_changes": 0, "last_change_ns": -1}

    def receive(self, frame: bytes, port: int, now: int):
        out = []
        for p in range(self.nports):
            if p == port:
                continue
            if self.ports is not None and not self.ports.up(p, now):
                self.stats["skipped_down"] += 1
                continue
            out.append((p, frame, now + self.min_delay_ns))
        self.stats["repeated"] += len(out)
        return out

    def on_timer(self, now: int):
        return []

    def on_link_change(self, port: int, up: bool, now: int):
        self.stats["link_changes"] += 1
        self.stats["last_change_ns"] = now
        return []


def make_hub(node, topology, cache):
    return Hub(node.name, topology.nports(node.name), node.spec.processing_delay_ns)


register_engine("hub", make_hub, min_delay=lambda spec: spec.processing_delay_ns)
