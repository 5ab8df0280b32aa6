#!/usr/bin/env bash
# Containers at scale: N node containers (default 128) and a coordinator under Compose on
# this one machine, from the topocomm image (deploy/build-image.sh). It prints how long
# the containers took to come up and the cluster to form, then runs every collective's
# default algorithm on a ring, a torus and a hypercube (each run must say `verified`),
# printing each run's wiring time (the first run on a topology re-wires the cluster) and
# its median iteration; then it kills a node container mid-way through a run (`docker
# kill`): that run must fail naming the node, and once the container is started again
# (same host name, so the same id) the next run must pass. Memory of the containers is sampled at the end.
#
#   deploy/scale.sh 128              # the image must exist (deploy/build-image.sh)
#   SCALE_BUILD=1 deploy/scale.sh 64 # builds the image first
#   SCALE_SIZE=4KiB SCALE_ITERATIONS=3 deploy/scale.sh 256
#
# Before anything starts it runs deploy/prepare-host.sh N, which checks the host's limits
# that bite at this scale (the kernel's neighbour table above all: at its default, a
# hypercube of 128 containers fails to wire with "No route to host"); a host that is not
# ready stops it there, with the command that makes it ready
# (`sudo deploy/prepare-host.sh --apply N`). SCALE_SKIP_PREPARE=1 skips the check.
#
# Needs docker with Compose (`docker compose` or `docker-compose`) and jq. Every wait has
# a deadline; everything it starts is removed on exit. Exit 0 only if every run that had
# to pass passed and the killed node's run failed naming it; 2 if it could not start.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
# shellcheck source=deploy/lib.sh
source "$ROOT/deploy/lib.sh"

N=${1:-128}
IMAGE=${TOPOCOMM_IMAGE:-topocomm:latest}
PROJECT=topocomm-scale-$$
SIZE=${SCALE_SIZE:-1KiB}
ITERATIONS=${SCALE_ITERATIONS:-3}
RUN_TIMEOUT=${SCALE_RUN_TIMEOUT:-30s}
COLLECTIVES=(broadcast reduce allgather reduce-scatter allreduce scan scatter gather alltoall shift barrier)
TOPOLOGIES=(hypercube torus ring)
unset TOPOCOMM_COORDINATOR TOPOCOMM_TOKEN TOPOCOMM_TOKEN_FILE TOPOCOMM_ENCRYPT NODES

say() { printf '%s\n' "$*"; }
for tool in docker jq timeout; do
  command -v "$tool" >/dev/null || { say "scale: $tool is missing"; exit 2; }
done
detect_compose scale || exit 2
if [ -z "${SCALE_SKIP_PREPARE:-}" ]; then
  say "== is this host ready for $N node containers? (deploy/prepare-host.sh $N)"
  if ! deploy/prepare-host.sh "$N" | sed 's/^/   /'; then
    say "scale: this host is not ready for $N node containers (above); nothing was started"
    exit 2
  fi
fi
compose() {
  NODES=$N TOPOCOMM_IMAGE=$IMAGE \
    timeout --kill-after=5 900 "${COMPOSE[@]}" -p "$PROJECT" -f "$ROOT/docker-compose.yml" "$@"
}
cleanup() {
  trap - EXIT INT TERM
  say "== tearing down"
  compose down -v --remove-orphans -t 5 >/dev/null 2>&1
  local left
  left=$(docker ps -aq --filter "label=com.docker.compose.project=$PROJECT")
  [ -n "$left" ] && docker rm -f -v $left >/dev/null 2>&1
  say "   done"
}
trap cleanup EXIT
trap 'say "interrupted"; exit 130' INT TERM

if [ -n "${SCALE_BUILD:-}" ]; then
  deploy/build-image.sh || exit 2
fi
docker image inspect "$IMAGE" >/dev/null 2>&1 || { say "scale: no image $IMAGE (deploy/build-image.sh)"; exit 2; }

# Lines of the kernel log saying the neighbour table overflowed (0 where it cannot be read).
neighbour_overflows() { dmesg 2>/dev/null | grep -c 'neighbor table overflow'; }
OVERFLOWS_BEFORE=$(neighbour_overflows)

FAILED=0
tc() { timeout --kill-after=5 300 docker exec "$COORD" topocomm "$@"; }
ready() { tc status --ready; }

say "== $N node containers: compose up"
t=$SECONDS
compose up -d --scale "node=$N" >/tmp/scale-up-$$.log 2>&1 || { tail -5 /tmp/scale-up-$$.log; rm -f /tmp/scale-up-$$.log; exit 1; }
rm -f /tmp/scale-up-$$.log
up=$((SECONDS - t))
COORD=$(docker ps -q --filter "label=com.docker.compose.project=$PROJECT" --filter "label=com.docker.compose.service=coordinator")
running=$(docker ps -q --filter "label=com.docker.compose.project=$PROJECT" --filter "label=com.docker.compose.service=node" | wc -l)
say "   compose up: ${up}s, $running node containers running"
if wait_for 600 ready; then
  say "   cluster formed: $((SECONDS - t))s after compose up ($(tc status --json | jq -r '"\(.connected) of \(.expected) connected"'))"
else
  say "   FAIL: the cluster did not form within 600 s: $(tc status --json | jq -c '{connected, expected}')"
  exit 1
fi

# One run: prints a line; returns 0 if verified.
run() {
  local label=$1
  shift
  local out started
  started=$(date +%s%N)
  out=$(tc run "$@" --json --size "$SIZE" -i "$ITERATIONS" --warmup 1 --timeout "$RUN_TIMEOUT" 2>/tmp/scale-err-$$)
  local status=$?
  if [ $status -eq 0 ] && jq -e '.verified == true' >/dev/null 2>&1 <<<"$out"; then
    printf '   %-10s %-15s %-20s wiring %9s  median %10s us  (%s ms in all)\n' "$label" "$1" "$(jq -r .algorithm <<<"$out")" \
      "$(jq -r 'if .setup_ms.wiring_ms == null then "-" else "\(.setup_ms.wiring_ms | floor) ms" end' <<<"$out")" \
      "$(jq -r '.time_us.median | floor' <<<"$out")" "$((($(date +%s%N) - started) / 1000000))"
    return 0
  fi
  LAST_ERROR=$(tr '\n' ' ' </tmp/scale-err-$$ | cut -c1-400)
  printf '   %-10s %-15s FAILED after %s ms: %s\n' "$label" "$1" "$((($(date +%s%N) - started) / 1000000))" "$LAST_ERROR"
  # The coordinator's word on "No route to host", which the cut above leaves out.
  grep -o 'No route to host" between .*' /tmp/scale-err-$$ | head -1 | sed 's/^/      (/; s/$/)/'
  return 1
}

runs_ok=0
for topology in "${TOPOLOGIES[@]}"; do
  say "== $topology of $N"
  for collective in "${COLLECTIVES[@]}"; do
    if run "$topology" "$collective" -t "$topology"; then
      runs_ok=$((runs_ok + 1))
    else
      FAILED=$((FAILED + 1))
    fi
  done
done

say "== a node container killed mid-way"
victim=$(docker ps -q --filter "label=com.docker.compose.project=$PROJECT" --filter "label=com.docker.compose.service=node" | sed -n 2p)
victim_name=$(docker inspect -f '{{.Config.Hostname}}' "$victim")
victim_id=$(tc status --json | jq -r --arg n "$victim_name" '.nodes[] | select(.name == $n) | .id')
say "   victim: node $victim_id ($victim_name)"
# A long run to hit: emulated t_s makes each iteration last a few milliseconds.
tc run broadcast -t hypercube --ts 1ms --dilation 1 -i 100000 --warmup 0 --timeout 5s --json >/dev/null 2>/tmp/scale-long-$$ &
long=$!
sleep 5
docker kill "$victim" >/dev/null
t=$SECONDS
if wait $long; then
  say "   FAIL: the run survived the kill"
  FAILED=$((FAILED + 1))
elif grep -q "node $victim_id ($victim_name)" /tmp/scale-long-$$; then
  say "   the run failed $((SECONDS - t))s after the kill, naming node $victim_id: $(tr '\n' ' ' </tmp/scale-long-$$ | cut -c1-200)"
else
  say "   FAIL: the failed run did not name node $victim_id: $(tr '\n' ' ' </tmp/scale-long-$$ | cut -c1-300)"
  FAILED=$((FAILED + 1))
fi
rm -f /tmp/scale-long-$$
timeout 60 docker start "$victim" >/dev/null
if wait_for 120 ready; then
  say "   started again and back in the cluster $((SECONDS - t))s after the kill"
  if run "after" allreduce -t hypercube; then runs_ok=$((runs_ok + 1)); else FAILED=$((FAILED + 1)); fi
else
  say "   FAIL: the node did not come back within 120 s"
  FAILED=$((FAILED + 1))
fi
rm -f /tmp/scale-err-$$

say "== memory"
docker stats --no-stream --format '{{.Name}} {{.MemUsage}}' $(docker ps -q --filter "label=com.docker.compose.project=$PROJECT") 2>/dev/null |
  awk '{split($2, a, /[A-Za-z]+/); v = a[1]; u = $2; gsub(/[0-9.]/, "", u);
        m = (u == "GiB") ? v * 1024 : (u == "KiB") ? v / 1024 : v;
        if ($1 ~ /coordinator/) c = m; else { n++; s += m; if (m > x) x = m } }
       END { printf "   coordinator %.1f MiB; %d nodes: %.1f MiB in all, mean %.1f MiB, max %.1f MiB\n", c, n, s, s / n, x }'
say "   host: $(free -m | awk '/^Mem:/ {print $3 " MiB used of " $2}')"

overflows=$(($(neighbour_overflows) - OVERFLOWS_BEFORE))
if ((overflows > 0)); then
  say "   the kernel's neighbour (ARP) table overflowed $overflows times meanwhile (dmesg: \"neighbor table overflow\"):"
  say "   raise it with: sudo deploy/prepare-host.sh --apply $N"
fi

say "== $runs_ok runs verified, $FAILED failures, ${SECONDS}s in all"
((FAILED == 0))
