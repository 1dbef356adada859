"""A user's own engine kind, as the README's "Write your own engine" shows: a hub that repeats every
frame on every other port. Registered by name when this module is imported."""

from emu.build import register_engine


class Hub:
    kind = "hub"

    def __init__(self, name: str, nports: int, delay_ns: int):
        self.name, self.nports, self.min_delay_ns = name, nports, delay_ns
        self.timer = None
        self.stats = {"repeated": 0}

    def receive(self, frame: bytes, port: int, now: int):
        self.stats["repeated"] += self.nports - 1
        return [(p, frame, now + self.min_delay_ns) for p in range(self.nports) if p != port]

    def on_timer(self, now: int):
        return []


def make_hub(node, topology, cache):
    return Hub(node.name, topology.nports(node.name), node.spec.processing_delay_ns)


register_engine("hub", make_hub, min_delay=lambda spec: spec.processing_delay_ns)
