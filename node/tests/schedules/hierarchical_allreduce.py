#!/usr/bin/env python3
"""Prints a hierarchical all-reduce as MSCCL-IR: `python3 hierarchical_allreduce.py GROUPS RANKS_PER_GROUP`.
Members send their vector to their group leader, leaders reduce, exchange group sums
all-pairs, reduce, and send the result back (docs/schedules.md)."""
import sys

G, g = int(sys.argv[1]), int(sys.argv[2])          # groups, ranks per group
p = G * g

def step(s, kind, src, dst, dep=(-1, -1)):
    return (f'<step s="{s}" type="{kind}" srcbuf="{src[0]}" srcoff="{src[1]}" dstbuf="{dst[0]}" '
            f'dstoff="{dst[1]}" cnt="1" depid="{dep[0]}" deps="{dep[1]}" hasdep="0"/>')

def tb(id, send, recv, steps):
    body = "".join(step(s, *args) for s, args in enumerate(steps))
    return f'<tb id="{id}" send="{send}" recv="{recv}" chan="0">{body}</tb>'

I, NONE = ("i", 0), ("i", -1)
print(f'<algo name="hierarchical_allreduce_{G}x{g}" proto="Simple" nchannels="1" '
      f'nchunksperloop="1" ngpus="{p}" coll="allreduce" inplace="1">')
for r in range(p):
    leader = r - r % g
    if r != leader:   # a member: its vector to the leader, the result back
        print(f'<gpu id="{r}" i_chunks="1" o_chunks="0" s_chunks="0">'
              + tb(0, leader, leader, [("s", I, I), ("r", NONE, I)]) + '</gpu>')
        continue
    members = range(leader + 1, leader + g)
    leaders = [l for l in range(0, p, g) if l != leader]
    # tb 0 reduces: each member's vector, then each other leader's group sum.
    reduce = [("re", ("s", k), I, (1 + k, 0)) for k in range(g - 1)]
    reduce += [("re", ("s", g - 1 + j), I, (g + j, 1)) for j in range(G - 1)]
    last_local, last = g - 2, len(reduce) - 1
    tbs = [tb(0, -1, -1, reduce)]
    tbs += [tb(1 + k, m, m, [("r", NONE, ("s", k)), ("s", I, I, (0, last))]) for k, m in enumerate(members)]
    tbs += [tb(g + j, l, l, [("s", I, I, (0, last_local)), ("r", NONE, ("s", g - 1 + j))])
            for j, l in enumerate(leaders)]
    print(f'<gpu id="{r}" i_chunks="1" o_chunks="0" s_chunks="{g - 1 + G - 1}">' + "".join(tbs) + '</gpu>')
print('</algo>')
