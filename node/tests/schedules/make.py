#!/usr/bin/env python3
"""Writes topocomm's own MSCCL-IR test programs for p = 8 and 16 (run from this folder:
`python3 make.py`). Each function returns the XML of one program; every step is written
out in MSCCL-IR's <step> format, as msccl-tools writes it."""


def step(s, kind, src=("i", -1), dst=("o", -1), cnt=1, dep=(-1, -1)):
    return (f'      <step s="{s}" type="{kind}" srcbuf="{src[0]}" srcoff="{src[1]}" dstbuf="{dst[0]}" '
            f'dstoff="{dst[1]}" cnt="{cnt}" depid="{dep[0]}" deps="{dep[1]}" hasdep="0"/>')


def tb(tid, send, recv, chan, steps):
    body = "\n".join(step(s, *args) for s, args in enumerate(steps))
    return f'    <tb id="{tid}" send="{send}" recv="{recv}" chan="{chan}">\n{body}\n    </tb>'


def program(name, coll, p, chunks, inplace, channels, gpus):
    """gpus: per rank (i_chunks, o_chunks, s_chunks, [tb xml])."""
    out = [f'<algo name="{name}" proto="Simple" nchannels="{channels}" nchunksperloop="{chunks}" '
           f'ngpus="{p}" coll="{coll}" inplace="{int(inplace)}">']
    for r, (i, o, s, tbs) in enumerate(gpus):
        out.append(f'  <gpu id="{r}" i_chunks="{i}" o_chunks="{o}" s_chunks="{s}">')
        out.extend(tbs)
        out.append("  </gpu>")
    out.append("</algo>")
    return "\n".join(out) + "\n"


def ring_allgather(p, channels):
    """Ring all-gather: each rank's block in `channels` chunks, chunk c travels on channel c."""
    gpus = []
    for r in range(p):
        nxt, prv = (r + 1) % p, (r - 1) % p
        tbs = []
        for c in range(channels):
            out = lambda rank: ("o", rank * channels + c)
            steps = [("cpy", ("i", c), out(r)), ("s", out(r), out(r))]
            steps += [("rcs", ("i", -1), out((r - k) % p)) for k in range(1, p - 1)]
            steps += [("r", ("i", -1), out((r - (p - 1)) % p))]
            tbs.append(tb(c, nxt, prv, c, steps))
        gpus.append((channels, p * channels, 0, tbs))
    return program(f"ring_allgather_{channels}ch", "allgather", p, p * channels, False, channels, gpus)


def ring_allreduce(p, channels):
    """Ring all-reduce in place: a reduce-scatter then an all-gather around the ring, the
    vector in p x channels chunks, channel c carrying chunk c of every segment."""
    gpus = []
    for r in range(p):
        nxt, prv = (r + 1) % p, (r - 1) % p
        tbs = []
        for c in range(channels):
            seg = lambda j: ("i", ((j % p) * channels) + c)
            steps = [("s", seg(r), seg(r))]
            steps += [("rrs", seg(r - k), seg(r - k)) for k in range(1, p - 1)]
            steps += [("rrcs", seg(r + 1), seg(r + 1))]
            steps += [("rcs", ("i", -1), seg(r - k)) for k in range(0, p - 2)]
            steps += [("r", ("i", -1), seg(r - (p - 2)))]
            tbs.append(tb(c, nxt, prv, c, steps))
        gpus.append((p * channels, p * channels, 0, tbs))
    return program(f"ring_allreduce_{channels}ch", "allreduce", p, p * channels, True, channels, gpus)


def alltoall(p):
    """All-to-all, every pair directly: a block per peer (send, then receive), and a copy
    of the rank's own block."""
    gpus = []
    for r in range(p):
        tbs = [tb(0, -1, -1, 0, [("cpy", ("i", r), ("o", r))])]
        for k, d in enumerate(d for d in range(p) if d != r):
            tbs.append(tb(k + 1, d, d, 0, [("s", ("i", d), ("o", r)), ("r", ("i", -1), ("o", d))]))
        gpus.append((p, p, 0, tbs))
    return program("alltoall_direct", "alltoall", p, p, False, 1, gpus)


def allgather_split_blocks(p):
    """Ring all-gather with receiving and sending in separate blocks: the sending block's
    k-th send waits (depid/deps) for the receiving block's (k-1)-th receive, and its first
    for the copy of the rank's own block."""
    gpus = []
    for r in range(p):
        nxt, prv = (r + 1) % p, (r - 1) % p
        copy = tb(0, -1, -1, 0, [("cpy", ("i", 0), ("o", r))])
        sends = [("s", ("o", r), ("o", r), 1, (0, 0))]
        sends += [("s", ("o", (r - k) % p), ("o", 0), 1, (2, k - 1)) for k in range(1, p - 1)]
        recvs = [("r", ("i", -1), ("o", (r - 1 - k) % p)) for k in range(p - 1)]
        gpus.append((1, p, 0, [copy, tb(1, nxt, -1, 0, sends), tb(2, -1, prv, 0, recvs)]))
    return program("allgather_split_blocks", "allgather", p, p, False, 1, gpus)


def allreduce_scratch(p):
    """All-pairs all-reduce in place: every rank sends its vector to every other, receives
    theirs into scratch chunks, then reduces each into its own once it has come."""
    gpus = []
    for r in range(p):
        peers = [d for d in range(p) if d != r]
        tbs = [tb(k + 1, d, d, 0, [("s", ("i", 0), ("s", 0)), ("r", ("i", -1), ("s", k))]) for k, d in enumerate(peers)]
        reduce = [("re", ("s", k), ("i", 0), 1, (k + 1, 1)) for k in range(len(peers))]
        tbs.insert(0, tb(0, -1, -1, 0, reduce))
        gpus.append((1, 1, p - 1, tbs))
    return program("allreduce_allpairs_scratch", "allreduce", p, 1, True, 1, gpus)


if __name__ == "__main__":
    for p in (8, 16):
        files = {
            f"ring_allgather_2ch_p{p}.xml": ring_allgather(p, 2),
            f"ring_allreduce_4ch_p{p}.xml": ring_allreduce(p, 4),
            f"alltoall_p{p}.xml": alltoall(p),
            f"allgather_deps_p{p}.xml": allgather_split_blocks(p),
            f"allreduce_scratch_p{p}.xml": allreduce_scratch(p),
        }
        for name, xml in files.items():
            with open(name, "w") as f:
                f.write(xml)
