#!/usr/bin/env bash
# bench/soak.sh — a soak of a served topocomm cluster that anyone can rerun.
#
# What it does: starts a coordinator (`topocomm serve --nodes 8`) and 8 node daemons
# (`topocomm-node`) on 127.0.0.1, sharing a random cluster token kept in a mode-0600
# file (never on a command line); waits until the cluster is ready; then sends
# SOAK_RUNS client requests (`topocomm run ... --coordinator ... --json`), each
# SOAK_ITERATIONS timed iterations with no warm-up, cycling through every collective
# and re-wiring the topology (hypercube -> ring -> torus) every SOAK_REWIRE_EVERY
# requests. Every request must come back `"verified": true`. The RSS (VmRSS) and open
# descriptors of every long-lived process (the coordinator and the 8 nodes) are sampled
# once warm (after the first request), every 10 % of the way, and at the end.
#
# How to run it (from anywhere; it builds the release binaries if they are missing):
#   bench/soak.sh                                  # 1,000 requests x 10 = 10,000 collectives
#   SOAK_RUNS=50 bench/soak.sh                     # a quick one
#   SOAK_ENCRYPT=1 bench/soak.sh                   # every process with --encrypt
#   TOPOCOMM_BIN_DIR=/path/to/bin bench/soak.sh    # use prebuilt topocomm, topocomm-node
# Parameters (environment): SOAK_RUNS (1000), SOAK_ITERATIONS (10), SOAK_SIZE (1KiB),
#   SOAK_NODES (8), SOAK_REWIRE_EVERY (100), SOAK_ENCRYPT (0), SOAK_KEEP (0: keep the
#   scratch dir with the logs), SOAK_MAX_FAILURES (20: give up after this many failed
#   requests), TOPOCOMM_BIN_DIR.
#
# What it prints: the setup, a progress line per sample, a table (sample point, runs
# done, coordinator RSS and fds, the nodes' RSS min/max and fds min/max), requests and
# collectives done, failures, wall time, requests per second, p50/max request latency
# (client process wall time, start to exit), warnings/errors in the daemons' logs, and
# the verdict: "flat" when, for every process, the final fd count is at most the warm
# one + 2 and the final RSS at most the warm one + max(10 %, 8 MiB); otherwise
# "NOT flat" naming each process and its growth.
# Exit status: 0 when every request verified and everything stayed flat; 1 otherwise
# (2 for a setup failure). Every process it started is stopped on exit (EXIT/INT/TERM).
set -euo pipefail

RUNS=${SOAK_RUNS:-1000}
ITERATIONS=${SOAK_ITERATIONS:-10}
SIZE=${SOAK_SIZE:-1KiB}
NODES=${SOAK_NODES:-8}
REWIRE_EVERY=${SOAK_REWIRE_EVERY:-100}
ENCRYPT=${SOAK_ENCRYPT:-0}
KEEP=${SOAK_KEEP:-0}
MAX_FAILURES=${SOAK_MAX_FAILURES:-20}
COLLECTIVES=(broadcast reduce allgather reduce-scatter allreduce scan scatter gather alltoall shift barrier)
TOPOLOGIES=(hypercube ring torus)
RUN_TIMEOUT=60     # seconds for one client request
ADDR_TIMEOUT=20    # seconds for the coordinator to print its address
READY_TIMEOUT=60   # seconds for every node to register

for n in "$RUNS" "$ITERATIONS" "$NODES" "$REWIRE_EVERY" "$MAX_FAILURES"; do
    [[ $n =~ ^[1-9][0-9]*$ ]] || { echo "soak: counts must be positive integers (got '$n')" >&2; exit 2; }
done

# Only this script's flags and files count: a TOPOCOMM_* setting in the caller's
# environment (a token, an address, --encrypt, JSON logs) would change what is soaked.
unset TOPOCOMM_TOKEN TOPOCOMM_TOKEN_FILE TOPOCOMM_ENCRYPT TOPOCOMM_COORDINATOR TOPOCOMM_LISTEN \
    TOPOCOMM_ADVERTISE TOPOCOMM_NODE_NAME TOPOCOMM_LOG

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [[ -n ${TOPOCOMM_BIN_DIR:-} ]]; then
    BIN=$TOPOCOMM_BIN_DIR
else
    BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release
    if [[ ! -x $BIN/topocomm || ! -x $BIN/topocomm-node ]]; then
        echo "soak: building the release binaries (cargo build --release --workspace)" >&2
        (cd "$ROOT" && cargo build --release --workspace) >&2
    fi
fi
for b in topocomm topocomm-node; do
    [[ -x $BIN/$b ]] || { echo "soak: $BIN/$b is missing" >&2; exit 2; }
done

SECURITY=()
[[ $ENCRYPT == 1 ]] && SECURITY=(--encrypt)

SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/topocomm-soak.XXXXXX")
TOKEN_FILE=$SCRATCH/token
COORD_PID=
NODE_PIDS=()
CLIENT_PID=

# Stops every process this script started (TERM, then KILL after 5 s), then removes
# the scratch dir unless SOAK_KEEP=1 or something failed.
cleanup() {
    local status=$? pids=() pid i
    trap - EXIT INT TERM
    [[ -n $CLIENT_PID ]] && pids+=("$CLIENT_PID")
    pids+=("${NODE_PIDS[@]}")
    [[ -n $COORD_PID ]] && pids+=("$COORD_PID")
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for ((i = 0; i < 50; i++)); do
        local alive=0
        for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
        ((alive)) || break
        sleep 0.1
    done
    for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    if [[ $KEEP == 1 || $status != 0 ]]; then
        echo "soak: logs kept in $SCRATCH" >&2
    else
        rm -rf "$SCRATCH"
    fi
    exit "$status"
}
trap cleanup EXIT
trap 'echo "soak: interrupted" >&2; exit 130' INT
trap 'echo "soak: terminated" >&2; exit 143' TERM

# The cluster token: 32 random bytes as hex, in a file only its owner can read.
(umask 077 && head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$TOKEN_FILE" && echo >>"$TOKEN_FILE")
chmod 600 "$TOKEN_FILE"

now_ms() { date +%s%3N; }

: >"$SCRATCH/coordinator.log"   # exists before the process does: the wait below reads it
"$BIN/topocomm" serve --nodes "$NODES" --listen 127.0.0.1:0 --token-file "$TOKEN_FILE" "${SECURITY[@]}" \
    </dev/null >"$SCRATCH/coordinator.log" 2>&1 &
COORD_PID=$!

ADDR=
deadline=$((SECONDS + ADDR_TIMEOUT))
while [[ -z $ADDR ]]; do
    ADDR=$(sed -n 's/.*topocomm coordinator on \(127\.0\.0\.1:[0-9][0-9]*\) .*/\1/p' "$SCRATCH/coordinator.log" | head -n1 || true)
    [[ -n $ADDR ]] && break
    if ! kill -0 "$COORD_PID" 2>/dev/null; then
        echo "soak: the coordinator exited before printing its address:" >&2
        sed 's/^/  | /' "$SCRATCH/coordinator.log" >&2
        exit 2
    fi
    ((SECONDS < deadline)) || { echo "soak: no coordinator address within ${ADDR_TIMEOUT}s" >&2; exit 2; }
    sleep 0.1
done

for ((i = 0; i < NODES; i++)); do
    "$BIN/topocomm-node" --coordinator "$ADDR" --name "node-$i" --listen 127.0.0.1:0 \
        --token-file "$TOKEN_FILE" "${SECURITY[@]}" </dev/null >"$SCRATCH/node-$i.log" 2>&1 &
    NODE_PIDS+=($!)
done

client() { "$BIN/topocomm" "$@" --coordinator "$ADDR" --token-file "$TOKEN_FILE" "${SECURITY[@]}"; }

deadline=$((SECONDS + READY_TIMEOUT))
until status_json=$(client status --json 2>/dev/null) && [[ $status_json =~ \"ready\":[[:space:]]*true ]]; do
    if ((SECONDS >= deadline)); then
        echo "soak: the cluster was not ready within ${READY_TIMEOUT}s; last status:" >&2
        client status 2>&1 | sed 's/^/  | /' >&2 || true
        exit 2
    fi
    sleep 0.5
done

# Every long-lived process, by label.
LABELS=(coordinator)
PIDS=("$COORD_PID")
for ((i = 0; i < NODES; i++)); do
    LABELS+=("node-$i")
    PIDS+=("${NODE_PIDS[$i]}")
done

# Checks that every daemon is still alive; names the dead one and its log tail if not.
check_alive() {
    local k dead=0 log
    for k in "${!PIDS[@]}"; do
        if ! kill -0 "${PIDS[$k]}" 2>/dev/null; then
            dead=1
            log=$SCRATCH/${LABELS[$k]}.log
            echo "soak: ${LABELS[$k]} (pid ${PIDS[$k]}) died; the last lines of its log:" >&2
            tail -n 20 "$log" | sed 's/^/  | /' >&2
        fi
    done
    return "$dead"
}

# Samples every process: one row of the table, and each process's figures kept for
# the verdict (WARM_* from the first sample, LAST_* from the latest).
declare -a WARM_RSS WARM_FDS LAST_RSS LAST_FDS
ROWS=()
sample() {
    local point=$1 done_runs=$2 k pid rss fds
    local nmin_rss= nmax_rss= nmin_fds= nmax_fds= c_rss= c_fds=
    for k in "${!PIDS[@]}"; do
        pid=${PIDS[$k]}
        rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" 2>/dev/null || true)
        fds=$(find "/proc/$pid/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
        if [[ -z $rss ]]; then
            check_alive || true
            echo "soak: cannot sample ${LABELS[$k]} (pid $pid)" >&2
            return 1
        fi
        [[ -z ${WARM_RSS[$k]:-} ]] && WARM_RSS[k]=$rss && WARM_FDS[k]=$fds
        LAST_RSS[k]=$rss
        LAST_FDS[k]=$fds
        if ((k == 0)); then
            c_rss=$rss c_fds=$fds
        else
            [[ -z $nmin_rss ]] && nmin_rss=$rss nmax_rss=$rss nmin_fds=$fds nmax_fds=$fds
            ((rss < nmin_rss)) && nmin_rss=$rss
            ((rss > nmax_rss)) && nmax_rss=$rss
            ((fds < nmin_fds)) && nmin_fds=$fds
            ((fds > nmax_fds)) && nmax_fds=$fds
        fi
    done
    ROWS+=("$(printf '%-6s %6d %12d %6d %9d..%-9d %5d..%-5d' "$point" "$done_runs" \
        "$c_rss" "$c_fds" "$nmin_rss" "$nmax_rss" "$nmin_fds" "$nmax_fds")")
    echo "soak: sample $point after $done_runs requests: coordinator ${c_rss} KiB ${c_fds} fds;" \
        "nodes ${nmin_rss}..${nmax_rss} KiB ${nmin_fds}..${nmax_fds} fds" >&2
}

# Where to sample: after request 1 (warm), at every tenth of the way, and at the end.
declare -A SAMPLE_AT
SAMPLE_AT[1]=warm
for ((t = 1; t <= 10; t++)); do
    at=$(((RUNS * t + 9) / 10))
    ((at > 1)) && SAMPLE_AT[$at]="$((t * 10))%"
done
SAMPLE_AT[$RUNS]=${SAMPLE_AT[$RUNS]:-end}

mode="links authenticated"
[[ $ENCRYPT == 1 ]] && mode="every link encrypted"
echo "soak: coordinator on $ADDR (pid $COORD_PID), $NODES nodes ready ($mode); scratch $SCRATCH"
echo "soak: $RUNS requests x $ITERATIONS iterations of $SIZE = $((RUNS * ITERATIONS)) collectives," \
    "${#COLLECTIVES[@]} collectives in turn, re-wired every $REWIRE_EVERY requests (${TOPOLOGIES[*]})"

FAILURES=0
COLLECTIVES_DONE=0
LATENCIES=$SCRATCH/latencies
: >"$LATENCIES"
START_MS=$(now_ms)
for ((r = 1; r <= RUNS; r++)); do
    collective=${COLLECTIVES[$(((r - 1) % ${#COLLECTIVES[@]}))]}
    topology=${TOPOLOGIES[$((((r - 1) / REWIRE_EVERY) % ${#TOPOLOGIES[@]}))]}
    t0=$(now_ms)
    # In the background and waited for, so that INT/TERM are handled at once.
    timeout "$RUN_TIMEOUT" "$BIN/topocomm" run "$collective" --coordinator "$ADDR" --token-file "$TOKEN_FILE" \
        "${SECURITY[@]}" --topology "$topology" --size "$SIZE" --iterations "$ITERATIONS" \
        --warmup 0 --json </dev/null >"$SCRATCH/run.out" 2>"$SCRATCH/run.err" &
    CLIENT_PID=$!
    rc=0
    wait "$CLIENT_PID" || rc=$?
    CLIENT_PID=
    echo $(($(now_ms) - t0)) >>"$LATENCIES"
    if ((rc == 0)) && grep -Eq '"verified":[[:space:]]*true' "$SCRATCH/run.out"; then
        done_iterations=$(grep -Eo -m1 '"iterations":[[:space:]]*[0-9]+' "$SCRATCH/run.out" | grep -Eo '[0-9]+$' || true)
        COLLECTIVES_DONE=$((COLLECTIVES_DONE + ${done_iterations:-0}))
    else
        FAILURES=$((FAILURES + 1))
        why=$(grep -v '^[[:space:]]*$' "$SCRATCH/run.err" | tail -n 3 | tr '\n' ' ' || true)
        ((rc == 124)) && why="timed out after ${RUN_TIMEOUT}s; $why"
        echo "soak: request $r ($collective on $topology) FAILED (exit $rc): ${why:-no verified result}" >&2
        cp "$SCRATCH/run.out" "$SCRATCH/failed-$r.out"
        cp "$SCRATCH/run.err" "$SCRATCH/failed-$r.err"
    fi
    if ! check_alive; then
        echo "soak: a daemon died after request $r; stopping" >&2
        exit 1
    fi
    if ((FAILURES >= MAX_FAILURES)); then
        echo "soak: $FAILURES failed requests; giving up after request $r" >&2
        exit 1
    fi
    if [[ -n ${SAMPLE_AT[$r]:-} ]]; then
        sample "${SAMPLE_AT[$r]}" "$r" || exit 1
    fi
done
END_MS=$(now_ms)

wall_ms=$((END_MS - START_MS))
p50=$(sort -n "$LATENCIES" | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}')
pmax=$(sort -n "$LATENCIES" | tail -n 1)
rate=$(awk -v n="$RUNS" -v ms="$wall_ms" 'BEGIN {printf "%.1f", (ms > 0) ? n * 1000 / ms : 0}')
warn_lines() { grep -Ec '(^|[[:space:]])(WARN|ERROR)([[:space:]]|$)' "$@" 2>/dev/null | awk -F: '{s += $NF} END {print s + 0}'; }

echo
echo "RSS in KiB, fds = open descriptors; nodes: min..max over the $NODES nodes"
printf '%-6s %6s %12s %6s %20s %12s\n' point runs "coord RSS" fds "nodes RSS" "nodes fds"
printf '%s\n' "${ROWS[@]}"
echo
echo "requests:    $RUNS ($FAILURES failed)"
echo "collectives: $COLLECTIVES_DONE verified (of $((RUNS * ITERATIONS)) = $RUNS x $ITERATIONS iterations of $SIZE)"
echo "wall time:   $(awk -v ms="$wall_ms" 'BEGIN {printf "%.1f s", ms / 1000}'), $rate requests/s," \
    "request latency p50 ${p50} ms, max ${pmax} ms (client process, start to exit)"
echo "log lines at WARN/ERROR: coordinator $(warn_lines "$SCRATCH/coordinator.log")," \
    "nodes $(warn_lines "$SCRATCH"/node-*.log)"
# The distinct messages among them (timestamps, addresses and numbers left out), most frequent first.
grep -hE '(^|[[:space:]])(WARN|ERROR)([[:space:]]|$)' "$SCRATCH/coordinator.log" "$SCRATCH"/node-*.log 2>/dev/null |
    sed -E 's/^[^ ]+ +//; s/(from|addr|peer)=[^ ]+/\1=_/g; s/[0-9]+/N/g' | sort | uniq -c | sort -rn | head -n 5 |
    awk '{sub(/^ +/, ""); print "  " $0}' || true

# The verdict.
grown=()
for k in "${!PIDS[@]}"; do
    w_rss=${WARM_RSS[$k]} l_rss=${LAST_RSS[$k]} w_fds=${WARM_FDS[$k]} l_fds=${LAST_FDS[$k]}
    allow=$((w_rss / 10))
    ((allow < 8192)) && allow=8192
    if ((l_fds > w_fds + 2)); then
        grown+=("${LABELS[$k]}: fds $w_fds -> $l_fds (+$((l_fds - w_fds)))")
    fi
    if ((l_rss > w_rss + allow)); then
        grown+=("${LABELS[$k]}: RSS $w_rss -> $l_rss KiB (+$((l_rss - w_rss)) KiB, allowed +$allow)")
    fi
done
status=0
if ((${#grown[@]} == 0)); then
    echo "verdict: flat (every process: fds within warm +2, RSS within warm + max(10 %, 8 MiB))"
else
    echo "verdict: NOT flat"
    printf '  %s\n' "${grown[@]}"
    status=1
fi
if ((FAILURES > 0)); then
    echo "FAILED: $FAILURES of $RUNS requests did not verify (outputs kept in $SCRATCH/failed-*)"
    status=1
fi
exit "$status"
