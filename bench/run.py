#!/usr/bin/env python3
"""topocomm against Open MPI: the same collectives, node count and sizes, timed the same way.

For every (collective, size) this runs `topocomm run ... --json` (a fresh local cluster
of node daemons over loopback TCP, raw links) once per topocomm column (the topology's
default algorithms, and `--algorithm auto`) and reads the median iteration time; where
`mpirun` and `mpicc` are installed it runs bench/mpi/collectives.c under Open MPI with
the TCP transport on loopback, timed the same way (barrier, every rank times the call,
an iteration takes its slowest rank's time, median over the iterations), and prints the
columns and their ratios, each ratio with the topology's floor beside it: the bytes
the algorithm moves across links, once per link crossed (from `topocomm explain`), over
the fewest any algorithm needs on a fully connected network, where every message is a
direct send as Open MPI's ranks make them (on a hypercube of 8: 12 block-hops per node
against 7 for all-to-all and scatter, so 1.71). It also holds a 2-node topocomm broadcast of the largest size
against one loopback TCP stream with large writes (bench/tcp_stream.c, iperf3-style), and
reports the memory of the daemons in an all-reduce of the largest size. With both the
`default` and the `auto` column, the table ends with every point where `auto` ran
another algorithm, auto's time over the default's pass by pass: `auto` must never be
slower than the default it replaces, and the table says SLOWER where it was.

    bench/run.py --wait-idle --repeat 3           # the p = 8 hypercube table of docs/open-mpi.md
    bench/run.py --sizes 64KiB,1MiB --collectives broadcast,allreduce
    bench/run.py --no-mpi --algorithms auto,ring  # topocomm only, two columns
    bench/run.py --algorithms default,default+encrypt --collectives allreduce,broadcast,alltoall \
                 --sizes 64KiB,1MiB,8MiB --busbw      # the cost of --encrypt, in busbw
    bench/run.py --page docs/bench/open-mpi-results.md   # also write the book's page (and its plot)

`--page FILE` writes what the command printed as a page of the book, under a line saying
that this script wrote it and when, with the command line, the machine (CPU model, cores,
kernel) and a plot of every column's time over Open MPI's against size (FILE with .svg
for .md, drawn here without any plotting library).

A column `NAME+encrypt` runs column NAME with every link encrypted (TOPOCOMM_ENCRYPT=true);
`--busbw` adds a table of bus bandwidths (nccl-tests' factors, as `topocomm sweep` prints
them) for Open MPI and every column, with each encrypted column's cost against its plain one.

Only the Python standard library and a C compiler are needed. Times are wall-clock: on a
shared machine use --wait-idle (each run waits for idle CPUs) and --repeat (each cell is
then the median of the repeats, and the spread shows the lowest and highest ratio).
Nothing here asserts a time; it measures and prints.
"""

import argparse
import json
import os
import platform
import re
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COLLECTIVES = [
    "broadcast",
    "reduce",
    "allreduce",
    "allgather",
    "reduce-scatter",
    "alltoall",
    "scatter",
    "gather",
    "scan",
]
SIZES = "8B,1KiB,64KiB,1MiB,8MiB"
MPI_FLAGS = ["--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", "lo", "--bind-to", "none"]


def parse_size(text):
    match = re.fullmatch(r"\s*(\d+)\s*(B|KiB|MiB|GiB)?\s*", text)
    if not match:
        raise argparse.ArgumentTypeError(f"bad size {text!r}: want e.g. 8B, 64KiB, 8MiB")
    unit = {"B": 1, None: 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[match.group(2)]
    return int(match.group(1)) * unit


def show_size(n):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


def iterations_for(size, args):
    """More iterations for small messages (they are quick and noisier)."""
    if args.iterations:
        return args.iterations
    return 1000 if size <= 1024 else 100 if size <= 64 * 1024 else 20 if size <= 1 << 20 else 10


def cpu_times():
    fields = [int(v) for v in open("/proc/stat").readline().split()[1:]]
    return fields[3] + fields[4], sum(fields)


def wait_until_idle(args):
    """With --wait-idle: waits until the CPUs were at least 90 % idle over half a second
    (other people's compilers on a shared machine), for at most a minute."""
    if not args.wait_idle:
        return
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        idle0, total0 = cpu_times()
        time.sleep(0.5)
        idle1, total1 = cpu_times()
        if (idle1 - idle0) >= 0.9 * max(1, total1 - total0):
            return


class Refused(Exception):
    """topocomm refused a run before it started: more memory than this machine has."""


class Failed(Exception):
    """A topocomm run that started and failed (a node's error, a deadline): the point is
    marked failed in the table and the benchmark goes on."""


def topocomm_point(args, collective, size, nodes=None, algorithm=None):
    """One `topocomm run --json`; returns (median µs, min µs, algorithm that ran)."""
    wait_until_idle(args)
    command = [
        str(args.topocomm),
        "run",
        collective,
        "--nodes",
        str(nodes or args.nodes),
        "--topology",
        args.topology,
        "--size",
        f"{size}B",
        "--iterations",
        str(iterations_for(size, args)),
        "--warmup",
        str(args.warmup),
        "--json",
    ]
    algorithm = algorithm or args.algorithm
    encrypted = algorithm.endswith("+encrypt")
    algorithm = algorithm.removesuffix("+encrypt")
    if algorithm != "default":
        command += ["--algorithm", algorithm]
    env = dict(os.environ, TOPOCOMM_ENCRYPT="true" if encrypted else "false")
    done = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout, env=env)
    if done.returncode != 0 and "needs about" in done.stderr:
        raise Refused(done.stderr.strip().splitlines()[-1])
    if done.returncode != 0:
        raise Failed(f"{' '.join(command)} failed:\n{done.stderr.strip()}")
    summary = json.loads(done.stdout)
    if not summary.get("verified"):
        raise RuntimeError(f"{' '.join(command)}: not verified: {summary}")
    return summary["time_us"]["median"], summary["time_us"]["min"], summary["algorithm"]


def block_hops(args, topology, collective, size, algorithm):
    """The bytes an algorithm moves across links, each counted once per link it crosses
    (`topocomm explain --json`: every message's bytes times its route's hops)."""
    command = [str(args.topocomm), "explain", collective, "--nodes", str(args.nodes), "--topology", topology]
    command += ["--size", f"{size}B", "--json"]
    if algorithm != "default":
        command += ["--algorithm", algorithm]
    done = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout)
    if done.returncode != 0:
        raise Failed(f"{' '.join(command)} failed:\n{done.stderr.strip()}")
    schedule = json.loads(done.stdout)["schedule"]
    return sum(message["bytes"] * (len(message["route"]) - 1) for message in schedule)


def algorithms_of(args, collective):
    """Every algorithm topocomm has for `collective` (`topocomm list --markdown`)."""
    command = [str(args.topocomm), "list", collective, "--markdown"]
    table = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout, check=True).stdout
    # The algorithms' table is the first one; the rules of `auto` follow after a blank line.
    first = table.split("\n\n")[0]
    rows = [line.split("|") for line in first.splitlines()[2:] if line.startswith("|")]
    return [row[2].strip() for row in rows]


def fully_connected_block_hops(args, collective, size):
    """The fewest block-hops any algorithm needs on a fully connected network: every
    message a direct send, so its bytes (pairwise all-to-all, the root's sends for
    scatter and gather, the chain for scan: the sends Open MPI's ranks make)."""
    sends = []
    for algorithm in algorithms_of(args, collective):
        try:
            sends.append(block_hops(args, "full", collective, size, algorithm))
        except RuntimeError:
            continue  # an algorithm this p cannot run
    return min(sends, default=0)


def topology_floor(args, collective, size, algorithm, cache={}):
    """The topology's floor for a ratio against Open MPI: the block-hops of `algorithm`
    on this topology over the fewest a fully connected network needs (what Open MPI's
    directly connected ranks send); a ratio under it cannot be had without links the
    topology lacks."""
    key = (collective, size)
    if key not in cache:
        cache[key] = fully_connected_block_hops(args, collective, size)
    full = cache[key]
    return block_hops(args, args.topology, collective, size, algorithm) / full if full else 1.0


def mpi_points(args, points):
    """Runs every (collective, size) under Open MPI, one mpirun each (so that --wait-idle
    can wait before each, as it does before each topocomm run)."""
    binary = build_mpi(args)
    results = {}
    for collective, size in points:
        command = [args.mpirun, "-np", str(args.nodes), *mpirun_root_flags(), *MPI_FLAGS, str(binary)]
        command += ["-i", str(iterations_for(size, args)), "-w", str(args.warmup), f"{collective}:{size}"]
        wait_until_idle(args)
        done = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr.strip()}")
        for line in done.stdout.splitlines():
            if line.startswith("{"):
                point = json.loads(line)
                results[(point["collective"], point["size_bytes"])] = point["time_us"]["median"]
    return results


def mpirun_root_flags():
    return ["--allow-run-as-root", "--oversubscribe"] if os.geteuid() == 0 else ["--oversubscribe"]


def build_mpi(args):
    source = ROOT / "bench" / "mpi" / "collectives.c"
    binary = args.work / "mpi-collectives"
    if not binary.exists() or binary.stat().st_mtime < source.stat().st_mtime:
        subprocess.run([args.mpicc, "-O2", "-Wall", "-o", str(binary), str(source)], check=True)
    return binary


def tcp_stream_gbps(args, chunk, total=1 << 30):
    """Loopback throughput of one TCP stream with `chunk`-byte writes and reads
    (iperf3-style; iperf3's default length is 128 KiB), in GB/s: bench/tcp_stream.c,
    compiled with the system's C compiler on first use."""
    source = ROOT / "bench" / "tcp_stream.c"
    binary = args.work / "tcp-stream"
    if not binary.exists() or binary.stat().st_mtime < source.stat().st_mtime:
        compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
        if compiler is None:
            raise RuntimeError("no C compiler for bench/tcp_stream.c")
        subprocess.run([compiler, "-O2", "-o", str(binary), str(source)], check=True)
    command = [str(binary), str(total), str(chunk), "1"]
    if links_congestion() != host_congestion():
        command.append(links_congestion())
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return float(done.stdout.split()[0])


def host_congestion():
    """The host's default TCP congestion control (Open MPI's sockets run under it)."""
    try:
        return open("/proc/sys/net/ipv4/tcp_congestion_control").read().strip()
    except OSError:
        return "unknown"


def links_congestion():
    """The congestion control topocomm's links run under, as the daemons choose it
    (`--tcp-congestion`, node/src/transport/tcp.rs): TOPOCOMM_TCP_CONGESTION if set,
    else cubic where the host has it; `system` is the host's default."""
    asked = os.environ.get("TOPOCOMM_TCP_CONGESTION")
    if asked:
        return host_congestion() if asked == "system" else asked
    try:
        available = open("/proc/sys/net/ipv4/tcp_available_congestion_control").read().split()
    except OSError:
        available = []
    return "cubic" if "cubic" in available else host_congestion()


def machine():
    cpu, cores = machine_parts()
    mpi = "not installed"
    if shutil.which("mpirun"):
        out = subprocess.run(["mpirun", "--version"], capture_output=True, text=True).stdout
        mpi = out.splitlines()[0] if out else "unknown"
    congestion = f"TCP congestion control {host_congestion()}"
    if links_congestion() != host_congestion():
        congestion += f" (topocomm's links and the TCP stream: {links_congestion()})"
    return f"{platform.node()}: {cores} cores, {cpu}, Linux {platform.release()}; {mpi}; {congestion}"


def load():
    try:
        return open("/proc/loadavg").read().split()[0]
    except OSError:
        return "?"


def peak_memory(args, size, collective="allreduce"):
    """Memory of every daemon of a long-lived local cluster in a `collective` of `size`
    bytes: starts `topocomm serve` and the daemons itself, so that it can read their
    /proc status while they live. Returns (algorithm, [(base KiB, peak KiB)], iterations
    KiB): base is a daemon's resident set after an 8-byte all-reduce (code, runtime,
    links); peak its VmHWM after the large one, input generation and the reference check
    included; iterations the largest resident set any daemon had while the timed
    iterations ran (sampled every 2 ms over the middle of a 40-iteration run, away from
    the input generation before and the check after)."""
    token = "bench-" + os.urandom(8).hex()
    address = f"127.0.0.1:{free_port()}"
    env = dict(os.environ, TOPOCOMM_TOKEN=token)
    processes = []

    def run_collective(bytes_, iterations, collective="allreduce", algorithm="default"):
        command = [str(args.topocomm), "run", collective, "--coordinator", address, "--topology", args.topology]
        command += ["--size", f"{bytes_}B", "--iterations", str(iterations), "--warmup", "1", "--json"]
        if algorithm != "default":
            command += ["--algorithm", algorithm]
        for _ in range(100):  # the daemons may still be registering
            done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=args.timeout)
            if done.returncode == 0:
                return json.loads(done.stdout)
            time.sleep(0.2)
        raise RuntimeError(f"the {collective} on the serving cluster failed: {done.stderr.strip()}")

    try:
        serve = [str(args.topocomm), "serve", "--nodes", str(args.nodes), "--listen", address]
        processes.append(subprocess.Popen(serve, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        nodes = []
        for index in range(args.nodes):
            command = [str(args.topocomm), "node", "--coordinator", address, "--name", f"bench-{index}"]
            command += ["--listen", "127.0.0.1:0"]
            node = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            processes.append(node)
            nodes.append(node)
        run_collective(8, 5)
        bases = [proc_status_kib(node.pid, "VmRSS") for node in nodes]
        summary = run_collective(size, 5, collective, args.algorithm)
        peaks = [proc_status_kib(node.pid, "VmHWM") for node in nodes]
        samples = []
        stop = threading.Event()

        def sample():
            while not stop.is_set():
                samples.append((time.monotonic(), max(proc_status_kib(node.pid, "VmRSS") for node in nodes)))
                time.sleep(0.002)

        sampler = threading.Thread(target=sample)
        started = time.monotonic()
        sampler.start()
        run_collective(size, 40, collective, args.algorithm)
        ended = time.monotonic()
        stop.set()
        sampler.join()
        span = ended - started
        middle = [kib for at, kib in samples if started + 0.15 * span <= at <= started + 0.85 * span]
        return summary["algorithm"], list(zip(bases, peaks)), max(middle, default=0)
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()


def proc_status_kib(pid, field):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=8)
    parser.add_argument("--topology", default="hypercube")
    parser.add_argument(
        "--algorithms",
        default="default,auto",
        help="topocomm columns, comma list: default (the topology's algorithms, what runs when none is "
        "named), auto (picked by size), or an algorithm's name",
    )
    parser.add_argument("--collectives", default=",".join(COLLECTIVES))
    parser.add_argument("--sizes", default=SIZES, help=f"comma list (default {SIZES})")
    parser.add_argument(
        "--iterations",
        type=int,
        default=0,
        help="timed iterations (default by size: 1000 up to 1 KiB, 100 up to 64 KiB, 20 up to 1 MiB, 10 above)",
    )
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=1, help="run the whole table this many times")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per run")
    parser.add_argument("--topocomm", type=Path, default=ROOT / "target" / "release" / "topocomm")
    parser.add_argument("--mpirun", default="mpirun")
    parser.add_argument("--mpicc", default="mpicc")
    parser.add_argument("--no-mpi", action="store_true", help="topocomm only")
    parser.add_argument(
        "--wait-idle", action="store_true", help="before each run, wait for the CPUs to be idle (shared machines)"
    )
    parser.add_argument("--no-extras", action="store_true", help="skip the TCP stream and peak-memory checks")
    parser.add_argument(
        "--busbw", action="store_true", help="also print bus bandwidths (nccl-tests) and the cost of +encrypt columns"
    )
    parser.add_argument("--json", type=Path, help="also write every measurement here")
    parser.add_argument("--page", type=Path, help="also write the output as a page of the book (Markdown) and its plot")
    parser.add_argument("--note", default="", help="a sentence for the page: e.g. why this run was reduced")
    parser.add_argument("--work", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "topocomm-bench")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    started = time.time()
    if args.page:
        # Everything printed goes to the page too.
        sys.stdout = Tee(sys.stdout)
    collectives = [c.strip() for c in args.collectives.split(",") if c.strip()]
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    modes = [m.strip() for m in args.algorithms.split(",") if m.strip()]
    args.algorithm = modes[0]
    if not args.topocomm.exists():
        sys.exit(f"{args.topocomm} not found: cargo build --release first (or --topocomm PATH)")
    with_mpi = not args.no_mpi and shutil.which(args.mpirun) and shutil.which(args.mpicc)
    if not args.no_mpi and not with_mpi:
        print("mpirun/mpicc not found: topocomm columns only", file=sys.stderr)

    print(f"# machine: {machine()}")
    print(f"# load average at start: {load()}")
    print(
        f"# p = {args.nodes}, topology {args.topology}, raw links, MPI_DOUBLE/MPI_SUM, root 0; each cell the median "
        f"iteration (slowest node's time after a barrier); Open MPI: mpirun {' '.join(MPI_FLAGS)}"
    )
    points = [(c, s) for c in collectives for s in sizes]
    # Columns topocomm's memory check refused (more than this machine holds) are not run
    # and say so; a point every column refused is not run on Open MPI's side either, and
    # the table says why. A column whose run failed (a node's error, a deadline) is not
    # run again in later passes and says `failed`; the error goes to stderr at once.
    refused_modes = {}
    failed_modes = {}
    refused = {}
    runs = []
    for repeat in range(args.repeat):
        ours, theirs = {}, {}
        for collective, size in points:
            # Open MPI's run of a point comes right before or after topocomm's, so that a
            # ratio's two sides see the same machine; which goes first alternates from
            # pass to pass (the first pass runs topocomm first: its memory check decides
            # which points run at all).
            mpi_first = repeat % 2 == 1

            def run_mpi():
                if with_mpi and (collective, size) not in refused:
                    theirs.update(mpi_points(args, [(collective, size)]))

            if mpi_first:
                run_mpi()
            for mode in modes:
                if (collective, size, mode) in refused_modes or (collective, size, mode) in failed_modes:
                    continue
                try:
                    ours[(collective, size, mode)] = topocomm_point(args, collective, size, algorithm=mode)
                except Refused as reason:
                    refused_modes[(collective, size, mode)] = str(reason)
                    print(f"  topocomm {collective} {show_size(size)} {mode}: refused: {reason}", file=sys.stderr)
                    continue
                except Failed as error:
                    failed_modes[(collective, size, mode)] = str(error)
                    print(f"  topocomm {collective} {show_size(size)} {mode}: FAILED: {error}", file=sys.stderr)
                    continue
                print(
                    f"  [{repeat + 1}/{args.repeat}] topocomm {collective} {show_size(size)} {mode}: "
                    f"{ours[(collective, size, mode)][0]:.1f} µs",
                    file=sys.stderr,
                )
            if all((collective, size, mode) in refused_modes for mode in modes):
                refused[(collective, size)] = refused_modes[(collective, size, modes[0])]
            if not mpi_first:
                run_mpi()
        runs.append((ours, theirs))

    header = f"{'collective':<15} {'size':>7}"
    if with_mpi:
        header += f" {'Open MPI µs':>12}"
    for mode in modes:
        header += f" | {mode + ': algorithm':<22} {'µs':>10}"
        if with_mpi:
            header += f" {'ratio':>6}"
            if args.repeat > 1:
                header += f" {'(spread)':>12}"
            header += f" {'floor':>5}"
    print(header)
    print("-" * len(header))
    table = []
    for collective, size in points:
        line = f"{collective:<15} {show_size(size):>7}"
        row = {"collective": collective, "size_bytes": size}
        if (collective, size) in refused:
            print(f"{line}   not run: {refused[(collective, size)]}")
            table.append({**row, "refused": refused[(collective, size)]})
            continue
        theirs = [run[1][(collective, size)] for run in runs] if with_mpi else []
        if with_mpi:
            mpi = statistics.median(theirs)
            line += f" {mpi:>12.1f}"
            row["mpi_us"] = theirs
        for mode in modes:
            skipped = None
            if (collective, size, mode) in refused_modes:
                skipped = ("refused: memory", {"refused": refused_modes[(collective, size, mode)]})
            elif (collective, size, mode) in failed_modes:
                skipped = ("failed (see stderr)", {"failed": failed_modes[(collective, size, mode)]})
            if skipped:
                line += f" | {skipped[0]:<22} {'-':>10}"
                if with_mpi:
                    line += f" {'-':>6}" + (f" {'':>12}" if args.repeat > 1 else "") + f" {'-':>5}"
                row[mode] = skipped[1]
                continue
            ours = [run[0][(collective, size, mode)][0] for run in runs]
            algorithm = runs[-1][0][(collective, size, mode)][2]
            mine = statistics.median(ours)
            line += f" | {algorithm:<22} {mine:>10.1f}"
            row[mode] = {"algorithm": algorithm, "topocomm_us": ours}
            if with_mpi:
                ratios = [a / b for a, b in zip(ours, theirs)]
                line += f" {mine / mpi:>6.2f}"
                if args.repeat > 1:
                    line += f" {min(ratios):>5.2f}..{max(ratios):<5.2f}"
                floor = topology_floor(args, collective, size, algorithm)
                line += f" {floor:>5.2f}"
                row[mode]["ratio"] = mine / mpi
                row[mode]["floor"] = floor
        print(line)
        table.append(row)

    if args.busbw:
        print_busbw(args, [point for point in points if point not in refused], modes, runs, with_mpi)
    switches = auto_against_default(points, modes, runs)
    if switches:
        print_auto_against_default(switches)

    extras = {}
    if not args.no_extras:
        extras = run_extras(args, max(sizes), modes)
    print(f"# load average at end: {load()}")
    if args.json:
        document = {"machine": machine(), "table": table, "auto_against_default": switches, **extras}
        args.json.write_text(json.dumps(document, indent=2))
    if args.page:
        write_page(args, sys.stdout.text(), table, modes, started)


class Tee:
    """Standard output that also keeps what was written, for --page."""

    def __init__(self, stream):
        self.stream, self.kept = stream, []

    def write(self, text):
        self.kept.append(text)
        return self.stream.write(text)

    def flush(self):
        self.stream.flush()

    def text(self):
        return "".join(self.kept)


def write_page(args, printed, table, modes, started):
    """The book's page of this run: who wrote it and when, the command, the machine, the
    plot and the output as printed."""
    date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started))
    plot = args.page.with_suffix(".svg")
    series = ratio_series(table, modes)
    if series:
        plot.write_text(ratio_svg(series, [row["size_bytes"] for row in table]))
    command = "python3 bench/run.py " + shlex.join(sys.argv[1:])
    cpu, cores = machine_parts()
    text = f"""# Against Open MPI: the latest table

*Written by `bench/run.py` on {date}; do not edit by hand: run the command below again.*

```text
$ {command}
```

Machine: {cpu}, {cores} cores, Linux {platform.release()}; {date}. What the columns
mean, and the tables measured before this one, are in [Against Open MPI](../open-mpi.md).

"""
    if args.note:
        text += f"{args.note}\n\n"
    if series:
        text += f"![each column's time over Open MPI's, by size]({plot.name})\n\n"
    text += f"```text\n{printed.rstrip()}\n```\n"
    args.page.parent.mkdir(parents=True, exist_ok=True)
    args.page.write_text(text)
    print(f"wrote {args.page}" + (f" and {plot}" if series else ""), file=sys.stderr)


def machine_parts():
    """The processor's model name and the number of cores."""
    cpu = "unknown CPU"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return cpu, os.cpu_count()


def ratio_series(table, modes):
    """{label: [(size, ratio)]}: every column's median time over Open MPI's, per collective."""
    series = {}
    for row in table:
        for mode in modes:
            ratio = row.get(mode, {}).get("ratio") if isinstance(row.get(mode), dict) else None
            if ratio is not None:
                label = row["collective"] if len(modes) == 1 else f"{row['collective']} ({mode})"
                series.setdefault(label, []).append((row["size_bytes"], ratio))
    return series


COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]


def ratio_svg(series, sizes):
    """A line per series of ratio against size (sizes evenly spaced, in order), the line
    ratio = 1 (as fast as Open MPI) drawn across, the legend to the right of the plot."""
    sizes = sorted(set(sizes))
    width, height, left, top, plot_w, plot_h = 900, 460, 70, 40, 560, 360
    top_ratio = max(1.2, max(r for points in series.values() for _, r in points) * 1.1)
    x = lambda size: left + (sizes.index(size) + 0.5) * plot_w / len(sizes)
    y = lambda ratio: top + plot_h * (1 - ratio / top_ratio)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="13">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{left + plot_w / 2}" y="22" text-anchor="middle" font-size="16">topocomm time / Open MPI time (below 1: topocomm faster)</text>',
        f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#999"/>',
    ]
    step = 0.25 if top_ratio <= 2.5 else 0.5
    tick = 0.0
    while tick <= top_ratio:
        out.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" stroke="#eee"/>')
        out.append(f'<text x="{left - 6}" y="{y(tick) + 4:.1f}" text-anchor="end">{tick:g}</text>')
        tick += step
    out.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{y(1):.1f}" y2="{y(1):.1f}" stroke="#444" stroke-dasharray="6 4"/>')
    for size in sizes:
        out.append(f'<text x="{x(size):.1f}" y="{top + plot_h + 18}" text-anchor="middle">{show_size(size)}</text>')
    out.append(f'<text x="{left + plot_w / 2}" y="{top + plot_h + 40}" text-anchor="middle">message size (bytes per node)</text>')
    for i, (label, points) in enumerate(series.items()):
        colour = COLOURS[i % len(COLOURS)]
        path = " ".join(f"{x(size):.1f},{y(ratio):.1f}" for size, ratio in points)
        out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for size, ratio in points:
            out.append(f'<circle cx="{x(size):.1f}" cy="{y(ratio):.1f}" r="3" fill="{colour}"/>')
        ly = top + 10 + 20 * i
        out.append(f'<line x1="{left + plot_w + 20}" x2="{left + plot_w + 44}" y1="{ly}" y2="{ly}" stroke="{colour}" stroke-width="2"/>')
        out.append(f'<text x="{left + plot_w + 50}" y="{ly + 4}">{label}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def auto_against_default(points, modes, runs):
    """Every point where `auto` ran another algorithm than the default: the two
    algorithms and auto's time over the default's, pass by pass (the two columns of one
    pass ran one after the other on the same machine). The rule `auto` is held to: never
    slower than the default it replaces (docs/PERFORMANCE-NOTES.md)."""
    if "default" not in modes or "auto" not in modes:
        return []
    switches = []
    for collective, size in points:
        cells = [run[0] for run in runs if (collective, size, "default") in run[0] and (collective, size, "auto") in run[0]]
        if not cells:
            continue  # refused, by memory, in one column or both
        default, auto = cells[-1][(collective, size, "default")][2], cells[-1][(collective, size, "auto")][2]
        if default == auto:
            continue
        ratios = [cell[(collective, size, "auto")][0] / cell[(collective, size, "default")][0] for cell in cells]
        switches.append(
            {"collective": collective, "size_bytes": size, "default": default, "auto": auto, "auto_over_default": ratios}
        )
    return switches


def print_auto_against_default(switches):
    """The points where `auto` switched algorithm, and whether the switch paid."""
    print()
    header = f"{'auto switched':<15} {'size':>7} {'default':<20} {'auto':<22} {'auto/default':>12} {'(spread)':>12}"
    print(header)
    print("-" * len(header))
    for switch in switches:
        ratios = switch["auto_over_default"]
        median = statistics.median(ratios)
        verdict = "faster" if median < 1 else "SLOWER: auto breaks its rule here"
        print(
            f"{switch['collective']:<15} {show_size(switch['size_bytes']):>7} {switch['default']:<20} "
            f"{switch['auto']:<22} {median:>12.2f} {min(ratios):>5.2f}..{max(ratios):<5.2f}  {verdict}"
        )


def bus_factor(collective, p):
    """nccl-tests' busbw factor on topocomm's size (bytes per node), as `topocomm sweep`
    defines it (`bus_factor` in coordinator/src/tools/sweep.rs, the table in docs/message-flow.md): where a node
    holds p blocks of the size, nccl-tests' (p-1)/p of S = p * size is p - 1."""
    if collective == "allreduce":
        return 2 * (p - 1) / p
    if collective in ("allgather", "reduce-scatter", "alltoall", "scatter", "gather"):
        return p - 1
    if collective == "ping-pong":
        return 2.0
    return 1.0


def print_busbw(args, points, modes, runs, with_mpi):
    """busbw (GB/s) of every cell's median time; each `X+encrypt` column's cost against X."""
    print()
    header = f"{'busbw GB/s':<15} {'size':>7}"
    if with_mpi:
        header += f" {'Open MPI':>9}"
    for mode in modes:
        header += f" {mode:>18}"
        if mode.endswith("+encrypt") and mode.removesuffix("+encrypt") in modes:
            header += f" {'cost':>6}"
    print(header)
    print("-" * len(header))
    for collective, size in points:
        factor = bus_factor(collective, args.nodes)

        def busbw(us):
            return size / (us * 1e-6) / 1e9 * factor

        line = f"{collective:<15} {show_size(size):>7}"
        if with_mpi:
            line += f" {busbw(statistics.median(run[1][(collective, size)] for run in runs)):>9.3f}"
        # The others were refused, or failed in some pass.
        ran = [mode for mode in modes if all((collective, size, mode) in run[0] for run in runs)]
        medians = {mode: statistics.median(run[0][(collective, size, mode)][0] for run in runs) for mode in ran}
        for mode in modes:
            if mode not in medians:
                line += f" {'-':>18}"
                continue
            line += f" {busbw(medians[mode]):>18.3f}"
            plain = mode.removesuffix("+encrypt")
            if mode.endswith("+encrypt") and plain in medians:
                line += f" {1 - busbw(medians[mode]) / busbw(medians[plain]):>6.0%}"
        print(line)


def run_extras(args, largest, modes):
    """The 2-node throughput against one TCP stream, and the daemons' peak memory."""
    streams, large_writes, two_node = [], [], []
    for _ in range(5):  # alternating, so that both see the same machine
        wait_until_idle(args)
        streams.append(tcp_stream_gbps(args, 128 * 1024))
        large_writes.append(tcp_stream_gbps(args, 1 << 20))
        two_node.append(topocomm_point(args, "broadcast", largest, nodes=2, algorithm="default")[0])
    stream, large = statistics.median(streams), statistics.median(large_writes)
    two_node_us = statistics.median(two_node)
    ours = largest / (two_node_us * 1e-6) / 1e9
    print()
    print(
        f"2-node broadcast of {show_size(largest)}: median {two_node_us:.0f} µs "
        f"({', '.join(f'{t:.0f}' for t in two_node)}) = {ours:.2f} GB/s"
    )
    print(
        f"one TCP stream on loopback: {stream:.2f} GB/s with 128 KiB writes (iperf3's default; "
        f"{', '.join(f'{g:.2f}' for g in streams)}), {large:.2f} GB/s with 1 MiB writes "
        f"({', '.join(f'{g:.2f}' for g in large_writes)}); topocomm reaches {ours / max(stream, large):.0%} "
        f"of the faster"
    )
    extras = {"two_node_broadcast_us": two_node, "tcp_stream_gbps": {"128KiB": streams, "1MiB": large_writes}}
    for mode in (m for m in modes if not m.endswith("+encrypt")):
        args_mode = argparse.Namespace(**{**vars(args), "algorithm": mode})
        algorithm, memory, iterations = peak_memory(args_mode, largest)
        base = max(b for b, _ in memory)
        peak = max(k for _, k in memory)
        print(
            f"memory of a daemon in an all-reduce of {show_size(largest)} ({algorithm}): base {base / 1024:.1f} MiB "
            f"(resident after an 8 B all-reduce); peak (VmHWM, input and check included) base + "
            f"{(peak - base) * 1024 / largest:.2f} x the message; resident while the iterations run: base + "
            f"{(iterations - base) * 1024 / largest:.2f} x"
        )
        extras[f"memory_{mode}"] = {"algorithm": algorithm, "base_and_peak_kib": memory, "iterations_kib": iterations}
    return extras


if __name__ == "__main__":
    main()
