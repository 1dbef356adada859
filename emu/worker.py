"""A worker process hosting one domain of a cluster: ``python -m emu.worker HOST PORT TOKEN``.

It connects back to the cluster's control listener (127.0.0.1), proves it was started by that
cluster with the token, receives the plan, starts its elements as trio tasks, reports their socket
addresses, then serves the synchroniser's calls until told to stop or the connection closes.
"""

from __future__ import annotations

import logging
import sys

import trio

from .sync import MsgStream

log = logging.getLogger("emu.worker")


async def serve(host: str, port: int, token: str) -> None:
    stream = await trio.open_tcp_stream(host, port)
    chan = MsgStream(stream)
    await chan.send(token)
    paths = await chan.recv()  # the parent's sys.path, so applications unpickle here too
    sys.path[:0] = [p for p in paths if p not in sys.path]
    from .build import build_domain

    plan, index = await chan.recv()
    domain = build_domain(plan, index)
    async with trio.open_nursery() as nursery:
        addrs = {}
        for el in domain.elements:
            addrs[el.name] = await nursery.start(el.serve)
        await chan.send(addrs)
        while True:
            try:
                method, args = await chan.recv()
            except EOFError:
                break
            if method == "stop":
                break
            try:
                result = await getattr(domain, "rpc_" + method)(*args)
            except Exception as e:  # report to the synchroniser, which raises it in the main process
                await chan.send(("err", e))
            else:
                await chan.send(("ok", result))
        nursery.cancel_scope.cancel()
    await stream.aclose()


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="worker %(name)s: %(message)s")
    host, port, token = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    try:
        trio.run(serve, host, port, token)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
