#!/usr/bin/env python3
"""Writes the ingest_decode seeds: agent -> hub messages (gwhub.v1, see
proto/gwhub/v1/) encoded by hand, each seed a stream of length-delimited
messages as the target reads them. Run from fuzz/: python3 make_seeds.py"""

import os


def varint(n):
    out = bytearray()
    n &= (1 << 64) - 1
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(num, value):
    if isinstance(value, int):
        return varint(num << 3) + varint(value)
    if isinstance(value, str):
        value = value.encode()
    return varint(num << 3 | 2) + varint(len(value)) + value


def msg(*fields):
    return b"".join(field(n, v) for n, v in fields if v is not None)


def condition(type_, status, reason="Ok", message="", generation=1, time=1_700_000_000):
    return msg((1, type_), (2, status), (3, reason), (4, message), (5, generation), (6, time))


def report(name, ns="openshift-ingress", ip="10.0.0.1", programmed=1, listeners=("http",)):
    status = msg(
        (1, condition("Accepted", 1)),
        (1, condition("Programmed", programmed, "Ok" if programmed == 1 else "Pending")),
        (2, msg((1, "IPAddress"), (2, ip))),
        *[
            (3, msg((1, l), (2, 1), (3, msg((2, "HTTPRoute"))), (4, condition("DNSReady", 1))))
            for l in listeners
        ],
    )
    return msg((1, ns), (2, name), (3, "uid-" + name), (4, 1), (5, status))


def hello(cluster):
    return msg((1, msg((1, "fuzz"), (2, "deltas"), (3, cluster))))


def snapshot(sid, seq, reports, chunk=0, final=1):
    return msg((2, msg((1, sid), (2, chunk), (3, final), (4, seq), *[(5, r) for r in reports])))


def delta(seq, *changes):
    return msg((3, msg((1, seq), *[(2, c) for c in changes])))


def upsert(r):
    return msg((1, r))


def delete(name, ns="openshift-ingress"):
    return msg((2, msg((1, ns), (2, name))))


def heartbeat():
    return msg((4, msg((1, 1_700_000_000_000))))


def stream(*messages):
    return b"".join(varint(len(m)) + m for m in messages)


seeds = {
    "hello": stream(hello("east")),
    "snapshot": stream(hello("east"), snapshot(1, 0, [report("gw"), report("internal", ip="10.0.0.2")])),
    "deltas": stream(
        hello("west"),
        snapshot(7, 10, [report("gw", programmed=2)]),
        delta(11, upsert(report("gw", ip="10.0.0.9"))),
        heartbeat(),
        delta(12, delete("gw"), upsert(report("new", listeners=("a", "b", "c")))),
    ),
    "chunks": stream(
        hello("central"),
        snapshot(3, 5, [report("a")], chunk=0, final=0),
        snapshot(3, 5, [report("b")], chunk=1, final=1),
        delta(7, upsert(report("a"))),
    ),
    "bad_cluster": stream(hello("Cluster_1"), snapshot(1, 0, [report("gw", ns="")])),
    "one_message": snapshot(1, 0, [report("gw")]),
}
os.makedirs("corpus/ingest_decode", exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join("corpus/ingest_decode", name), "wb") as f:
        f.write(data)
