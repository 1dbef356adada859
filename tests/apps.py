"""Applications used by the tests (module level, so worker processes can import them)."""


async def send_to(host, dst, size, tag=0, count=1):
    data = bytes((i * 7 + 3) & 0xFF for i in range(size))
    for _ in range(count):
        await host.send(dst, data, tag)
    return host.now


async def recv_n(host, count=1, src=None):
    out = []
    for _ in range(count):
        m = await host.recv(src=src)
        out.append((m.src, m.tag, len(m.data), m.t_ns, m.hops, m.data[:8]))
    return out


async def recv_count(host, count):
    total = 0
    for _ in range(count):
        m = await host.recv()
        total += len(m.data)
    return (total, host.now)


async def ping(host, dst):
    return await host.ping(dst)


async def exchange(host, peer, size, rounds):
    """Ping-pong ``rounds`` messages of ``size`` bytes; the lower-named host starts."""
    first = host.name < peer
    times = []
    for _ in range(rounds):
        if first:
            await host.send(peer, b"a" * size)
            await host.recv(src=peer)
        else:
            await host.recv(src=peer)
            await host.send(peer, b"b" * size)
        times.append(host.now)
    return times


async def sleeper(host, ns):
    await host.sleep(ns)
    return host.now


async def wait_forever(host):
    await host.recv(src="h1", tag=99)


async def crash(host):
    await host.sleep(10)
    raise RuntimeError("boom in the app")
