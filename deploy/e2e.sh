#!/usr/bin/env bash
# End to end in containers: the topocomm image (FROM scratch), a coordinator and 8, then
# 16, node containers under Compose, every collective with its default algorithm on ring,
# torus and hypercube (each run checked `verified`), every node's TCP connections read
# from the host and held against the topology the coordinator wired, node faults (a
# crash, `docker kill`, `docker pause`, `docker network disconnect`) mid-run, JSON and
# debug logs, and a single-node Docker Swarm running the same image.
#
#   deploy/e2e.sh                  # builds the image first
#   E2E_SKIP_BUILD=1 deploy/e2e.sh # uses the topocomm:latest already built
#
# Needs: docker (engine + Compose v2 `docker compose` or v1 `docker-compose`), jq,
# nsenter and ss (util-linux, iproute2), root (nsenter into the containers' network
# namespaces). Every wait has a deadline and every docker command a timeout; whatever
# it creates (containers, networks, volumes, the stack, a swarm it initialised) is
# removed on exit, however it exits. Exit status 0 only if every check passed.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
# shellcheck source=deploy/lib.sh
source "$ROOT/deploy/lib.sh"

# --- settings ---------------------------------------------------------------------------
IMAGE=${TOPOCOMM_IMAGE:-topocomm:latest}
PROJECT=topocomm-e2e-$$
STACK=topocomm-e2e-swarm-$$
# The swarm's token (compose's coordinator makes its own, on its token volume): 128
# random bits, as a coordinator that other hosts can reach requires.
TOKEN=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
COLLECTIVES=(broadcast reduce allgather reduce-scatter allreduce scan scatter gather alltoall shift barrier)
TOPOLOGIES=(ring torus hypercube)
ITERATIONS=${E2E_ITERATIONS:-20} # the CLI's defaults: 20 timed iterations after 3 warm-up ones
RUN_TIMEOUT=5s # the deadline of every wait inside a run: a fault must fail the run in ~2x this
FAULT_DEADLINE=30 # seconds from a fault to the failed run, at most
# A long run to hurt: t_s = 1 ms emulated per message, undilated, so >= log2(p) ms an iteration.
LONG_RUN=(broadcast -t hypercube --ts 1ms --dilation 1 -i 20000 --warmup 0)

# The caller's environment must not steer the cluster.
unset TOPOCOMM_COORDINATOR TOPOCOMM_TOKEN TOPOCOMM_TOKEN_FILE TOPOCOMM_ENCRYPT TOPOCOMM_LISTEN TOPOCOMM_ADVERTISE TOPOCOMM_NODE_NAME TOPOCOMM_LOG RUST_LOG NODES

T0=$SECONDS
TMP=$(mktemp -d "${TMPDIR:-/tmp}/topocomm-e2e.XXXXXX")
RESULTS=()
FAILED=0
COORD=""
BACKGROUND=""
STACK_DEPLOYED=""
SWARM_INITIALISED=""
GWBRIDGE_EXISTED=""

say() { printf '%s\n' "$*"; }
elapsed() { printf '%ds' $((SECONDS - T0)); }
section() { printf '\n== [%s] %s\n' "$(elapsed)" "$*"; }
pass() { RESULTS+=("PASS  $*"); say "   PASS  $*"; }
fail() { RESULTS+=("FAIL  $*"); FAILED=$((FAILED + 1)); say "   FAIL  $*"; }
die() {
  fail "$*"
  exit 1
}

# docker with a deadline (seconds first).
dk() {
  local limit=$1
  shift
  timeout --kill-after=5 "$limit" docker "$@"
}

# --- prerequisites ----------------------------------------------------------------------
for tool in docker jq nsenter ss timeout; do
  command -v "$tool" >/dev/null || {
    say "e2e: $tool is missing"
    exit 2
  }
done
[ "$(id -u)" = 0 ] || {
  say "e2e: run as root (nsenter reads the containers' network namespaces)"
  exit 2
}
dk 20 info >/dev/null 2>&1 || {
  say "e2e: the docker engine does not answer"
  exit 2
}
detect_compose e2e || exit 2

# Compose on this test's project, with this test's settings.
compose() {
  NODES=$NODES TOPOCOMM_ENCRYPT=$ENCRYPT TOPOCOMM_IMAGE=$IMAGE TOPOCOMM_LOG=$LOG_FORMAT RUST_LOG=$NODE_LOG \
    timeout --kill-after=5 240 "${COMPOSE[@]}" --no-ansi -p "$PROJECT" -f "$ROOT/docker-compose.yml" "$@" 2>&1
}
# v2 dropped --no-ansi.
if ! "${COMPOSE[@]}" --no-ansi version >/dev/null 2>&1; then
  compose() {
    NODES=$NODES TOPOCOMM_ENCRYPT=$ENCRYPT TOPOCOMM_IMAGE=$IMAGE TOPOCOMM_LOG=$LOG_FORMAT RUST_LOG=$NODE_LOG \
      timeout --kill-after=5 240 "${COMPOSE[@]}" --ansi never -p "$PROJECT" -f "$ROOT/docker-compose.yml" "$@" 2>&1
  }
fi
NODES=8
ENCRYPT=false
LOG_FORMAT=text
NODE_LOG=info

# Removes this project's networks. Docker can keep an endpoint of a container that is
# already gone (a restart racing the removal, or a disconnect and reconnect); such a
# network refuses `network rm` with "has active endpoints" until the stale endpoint is
# force-disconnected, so that is done here, a few times at most.
remove_project_networks() {
  local net name attempt
  for net in $(docker network ls -q --filter "label=com.docker.compose.project=$PROJECT"); do
    for attempt in 1 2 3 4 5; do
      dk 20 network rm "$net" >/dev/null 2>"$TMP/network-rm.log" && break
      say "   network $net: $(head -c 200 "$TMP/network-rm.log")"
      for name in $(docker network inspect -f '{{range $id, $e := .Containers}}{{$e.Name}} {{end}}' "$net" 2>/dev/null); do
        say "   force-disconnecting stale endpoint $name from $net"
        dk 20 network disconnect -f "$net" "$name" >/dev/null 2>&1
      done
      sleep 1
    done
  done
}

# --- clean-up, however the script ends ---------------------------------------------------
cleanup() {
  local status=$?
  set +e
  trap - EXIT INT TERM
  [ -n "$BACKGROUND" ] && kill "$BACKGROUND" 2>/dev/null
  section "tearing down"
  local ids
  ids=$(docker ps -aq --filter "label=com.docker.compose.project=$PROJECT")
  # A paused container cannot be stopped; a disconnected one is removed all the same.
  for id in $(docker ps -q --filter "label=com.docker.compose.project=$PROJECT" --filter status=paused); do
    dk 20 unpause "$id" >/dev/null
  done
  if [ -n "$ids" ]; then compose down -v --remove-orphans -t 5 | tail -n 1; fi
  ids=$(docker ps -aq --filter "label=com.docker.compose.project=$PROJECT")
  [ -n "$ids" ] && dk 60 rm -f -v $ids >/dev/null
  remove_project_networks
  for vol in $(docker volume ls -q --filter "label=com.docker.compose.project=$PROJECT"); do dk 20 volume rm "$vol" >/dev/null; done
  if [ -n "$STACK_DEPLOYED" ]; then
    dk 60 stack rm "$STACK" >/dev/null
    wait_for 60 no_stack_left
  fi
  if [ -n "$SWARM_INITIALISED" ]; then
    dk 60 swarm leave --force >/dev/null && say "left the swarm this test initialised"
    if [ -z "$GWBRIDGE_EXISTED" ]; then
      wait_for 20 dk 20 network rm docker_gwbridge
    fi
  fi
  rm -rf "$TMP"
  local left
  left=$(
    docker ps -aq --filter "label=com.docker.compose.project=$PROJECT"
    docker ps -aq --filter "label=com.docker.stack.namespace=$STACK"
    docker network ls -q --filter "label=com.docker.compose.project=$PROJECT"
    docker network ls -q --filter "name=^${STACK}_"
    docker volume ls -q --filter "label=com.docker.compose.project=$PROJECT"
  )
  if [ -n "$left" ]; then
    say "   left behind: $(echo $left)"
    status=1
  else
    say "   no containers, networks or volumes left behind"
  fi
  section "summary ($(elapsed) in all)"
  printf '   %s\n' "${RESULTS[@]}"
  if ((FAILED > 0)) || ((status != 0)); then
    say "e2e: FAILED ($FAILED failed checks, exit $status)"
    exit 1
  fi
  say "e2e: every check passed"
  exit 0
}
trap cleanup EXIT
trap 'say "interrupted"; exit 130' INT TERM

no_stack_left() {
  [ -z "$(docker ps -aq --filter "label=com.docker.stack.namespace=$STACK")" ] &&
    [ -z "$(docker network ls -q --filter "name=^${STACK}_")" ]
}

# --- the cluster, as seen from the host --------------------------------------------------
# topocomm in the coordinator container (the image has no shell: exec form).
tc() { timeout --kill-after=5 120 docker exec "$COORD" topocomm "$@"; }

ready() { tc status --ready; }
coordinator_healthy() { [ "$(docker inspect -f '{{.State.Health.Status}}' "$COORD")" = healthy ]; }
restarted_since() { [ "$(docker inspect -f '{{.RestartCount}} {{.State.Running}}' "$VICTIM")" = "$(($1 + 1)) true" ]; }
swarm_coordinator() { docker ps -q --filter "label=com.docker.swarm.service.name=${STACK}_coordinator" --filter status=running | head -n 1; }
swarm_coordinator_running() { [ -n "$(swarm_coordinator)" ]; }

# The node containers: "<hostname> <container id> <pid> <ip> <name>" lines, in $NODE_TABLE.
node_table() {
  local filter=$1
  NODE_TABLE=$(docker ps -q --filter "$filter" | xargs -r docker inspect -f \
    '{{.Config.Hostname}} {{.Id}} {{.State.Pid}} {{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}{{.Name}}' |
    awk '{print $1, $2, $3, $4, $NF}' | sed 's#/##')
}
field_of_host() { awk -v h="$1" -v f="$2" '$1 == h {print $f}' <<<"$NODE_TABLE"; }

# Established TCP connections in the network namespace of process $1: "local peer" lines
# (IPv4-mapped addresses unwrapped).
connections() {
  nsenter -t "$1" -n ss -Htn state established 2>/dev/null |
    awk '{print $(NF-1), $NF}' | sed -E 's/\[::ffff:([0-9.]+)\]/\1/g'
}

# Checks from the outside that every node holds established data links to exactly its
# neighbours in the wiring in force (dialling higher ids, admitted by lower ones), one
# control link to the coordinator, and nothing else; and that the coordinator holds one
# control link per node. $1: label; $2: docker ps filter of the node containers; $3: the
# coordinator's container.
check_links() {
  local label=$1 filter=$2 coordinator=$3
  local status topology kind p nodes neighbours coord_pid coord_ip problems="" lines=""
  status=$(timeout 60 docker exec "$coordinator" topocomm status --json) || {
    fail "$label: topocomm status failed"
    return
  }
  kind=$(jq -r '.topology.kind // empty' <<<"$status")
  p=$(jq -r '.topology.p // empty' <<<"$status")
  [ -n "$kind" ] || {
    fail "$label: the cluster is not wired"
    return
  }
  local dims_arg=()
  case $kind in mesh | torus | mesh3d | torus3d | fat-tree | dragonfly | cluster) dims_arg=(--dims "$(jq -r '.topology.dims | map(tostring) | join("x")' <<<"$status")") ;; esac
  topology=$(timeout 60 docker exec "$coordinator" topocomm topology -t "$kind" -n "$p" "${dims_arg[@]}" --json) || {
    fail "$label: topocomm topology failed"
    return
  }
  # A switched network's daemons are its ranks (ids 0..p) and then its switches: every
  # vertex of the graph is a daemon, and each holds the links of its vertex.
  local vertices
  vertices=$(jq '.neighbours | length' <<<"$topology")
  node_table "$filter"
  coord_pid=$(docker inspect -f '{{.State.Pid}}' "$coordinator")
  coord_ip=$(docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}' "$coordinator" | awk '{print $1}')
  # id -> "name ip port"
  local -A name_of ip_of port_of id_of_ip id_of_addr
  while read -r id name addr; do
    name_of[$id]=$name
    ip_of[$id]=${addr%:*}
    port_of[$id]=${addr##*:}
    id_of_ip[${addr%:*}]=$id
    id_of_addr[$addr]=$id
  done < <(jq -r '.nodes[] | "\(.id) \(.name) \(.data_addr)"' <<<"$status")
  local data_links=0 id
  for ((id = 0; id < vertices; id++)); do
    local name=${name_of[$id]:-} container pid cip
    [ -n "$name" ] || {
      problems+=" [id $id is not connected]"
      continue
    }
    container=$(field_of_host "$name" 5)
    pid=$(field_of_host "$name" 3)
    cip=$(field_of_host "$name" 4)
    [ -n "$pid" ] || {
      problems+=" [no container has host name $name]"
      continue
    }
    [ "$cip" = "${ip_of[$id]}" ] || problems+=" [$name advertises ${ip_of[$id]}, its container has $cip]"
    local control=0
    local -a seen=() outb=() inb=() other=()
    while read -r local_addr peer_addr; do
      [ -n "$local_addr" ] || continue
      local peer_ip=${peer_addr%:*} peer_port=${peer_addr##*:} local_port=${local_addr##*:}
      if [ "$peer_ip" = "$coord_ip" ] && [ "$peer_port" = 7700 ]; then
        control=$((control + 1))
      elif [ "$local_port" = "${port_of[$id]}" ] && [ -n "${id_of_ip[$peer_ip]:-}" ]; then
        inb+=("${id_of_ip[$peer_ip]}")
        seen+=("${id_of_ip[$peer_ip]}")
      elif [ -n "${id_of_addr[$peer_addr]:-}" ]; then
        outb+=("${id_of_addr[$peer_addr]}")
        seen+=("${id_of_addr[$peer_addr]}")
      else
        other+=("$local_addr->$peer_addr")
      fi
    done < <(connections "$pid")
    local want got
    want=$(jq -r --argjson i "$id" '.neighbours[$i] | sort | map(tostring) | join(",")' <<<"$topology")
    got=$(printf '%s\n' "${seen[@]}" | sed '/^$/d' | sort -n | paste -sd, -)
    [ "$got" = "$want" ] || problems+=" [id $id ($container): data links to {$got}, neighbours {$want}]"
    ((control == 1)) || problems+=" [id $id ($container): $control control links]"
    ((${#other[@]} == 0)) || problems+=" [id $id ($container): other connections ${other[*]}]"
    local n
    for n in "${outb[@]}"; do ((n > id)) || problems+=" [id $id dialled lower id $n]"; done
    for n in "${inb[@]}"; do ((n < id)) || problems+=" [id $id admitted higher id $n]"; done
    data_links=$((data_links + ${#seen[@]}))
    lines+=$(printf '      id %2d  %-28s %-15s -> %-12s in from {%s} out to {%s} + control\n' "$id" "$container" "${ip_of[$id]}:${port_of[$id]}" "$want" \
      "$(printf '%s\n' "${inb[@]}" | sed '/^$/d' | sort -n | paste -sd, -)" "$(printf '%s\n' "${outb[@]}" | sed '/^$/d' | sort -n | paste -sd, -)")$'\n'
  done
  # The coordinator: one control link from each node's address, no data links.
  local from_nodes
  from_nodes=$(connections "$coord_pid" | awk '$1 ~ /:7700$/ {sub(/:[0-9]+$/, "", $2); print $2}' | grep -v '^127\.' | sort)
  local want_nodes
  want_nodes=$(for ((id = 0; id < vertices; id++)); do echo "${ip_of[$id]:-}"; done | sort)
  [ "$from_nodes" = "$want_nodes" ] || problems+=" [coordinator control links from {$(echo $from_nodes)}, nodes at {$(echo $want_nodes)}]"
  local edges
  edges=$(jq '.edges | length' <<<"$topology")
  ((data_links == 2 * edges)) || problems+=" [$data_links link ends, $edges edges]"
  if [ -z "$problems" ]; then
    local switches=$((vertices - p)) through=""
    ((switches > 0)) && through=" ($p ranks and $switches switches, each a container)"
    pass "$label: links read from the hosts' side = the $kind's $edges edges (each daemon: its neighbours only) + $vertices control links$through"
    [ -n "${SHOW_LINKS:-}" ] && printf '%s' "$lines"
  else
    fail "$label: links differ from the $kind:$problems"
    printf '%s' "$lines"
  fi
}

# Runs one collective in the coordinator container; passes if the JSON says verified.
RUNS_OK=0
RUNS_FAILED=()
LAST_RUN="{}"
run_verified() {
  local label=$1
  shift
  local out err
  out=$(tc run "$@" --json -i "$ITERATIONS" --warmup 3 --timeout "$RUN_TIMEOUT" 2>"$TMP/run.err")
  if jq -e '.verified == true' >/dev/null 2>&1 <<<"$out"; then
    RUNS_OK=$((RUNS_OK + 1))
    LAST_RUN=$out
    return 0
  fi
  err=$(head -c 600 "$TMP/run.err")
  RUNS_FAILED+=("$label: $* -> ${err:-$(head -c 300 <<<"$out")}")
  return 1
}

# Starts the long run in the background once the previous one is over; waits until the
# coordinator logs that it started.
start_long_run() {
  local before
  before=$(docker logs "$COORD" 2>&1 | grep -c 'run started')
  rm -f "$TMP/long.rc"
  (
    tc run "${LONG_RUN[@]}" --json --timeout "$RUN_TIMEOUT" >"$TMP/long.out" 2>"$TMP/long.err"
    echo $? >"$TMP/long.rc"
  ) &
  BACKGROUND=$!
  wait_for 60 started_since "$before" || return 1
  sleep 1
  [ ! -f "$TMP/long.rc" ] # still running
}
started_since() { (($(docker logs "$COORD" 2>&1 | grep -c 'run started') > $1)); }

# Waits (bounded) for the long run to end; checks that it failed naming the node.
# $1: label; $2: the node's id; $3: its name; $4: when the fault was made.
expect_failure_naming() {
  local label=$1 id=$2 name=$3 since=$4
  if ! wait_for "$FAULT_DEADLINE" test -f "$TMP/long.rc"; then
    fail "$label: the run did not fail within ${FAULT_DEADLINE}s of the fault"
    kill "$BACKGROUND" 2>/dev/null
    BACKGROUND=""
    return
  fi
  wait "$BACKGROUND" 2>/dev/null
  BACKGROUND=""
  local took=$((SECONDS - since)) rc
  rc=$(cat "$TMP/long.rc")
  local error
  error=$(tr '\n' ' ' <"$TMP/long.err" | sed 's/  */ /g')
  if [ "$rc" != 0 ] && grep -q "node $id ($name)" "$TMP/long.err"; then
    pass "$label: the run failed ${took}s after the fault, naming node $id ($name): ${error:0:220}"
  else
    fail "$label: run exit $rc after ${took}s; error does not name node $id ($name): ${error:0:300}"
  fi
}

# --- the image -----------------------------------------------------------------------------
section "image"
if [ -z "${E2E_SKIP_BUILD:-}" ]; then
  if timeout 1800 deploy/build-image.sh >"$TMP/build.log" 2>&1; then
    pass "deploy/build-image.sh: $(tail -n 1 "$TMP/build.log")"
  else
    tail -n 30 "$TMP/build.log"
    die "deploy/build-image.sh failed"
  fi
fi
dk 20 image inspect "$IMAGE" >/dev/null 2>&1 || die "no image $IMAGE (build it: deploy/build-image.sh)"
size=$(docker image inspect -f '{{.Size}}' "$IMAGE")
layers=$(docker history -q "$IMAGE" | wc -l)
say "   $IMAGE: $size bytes, $layers layers, compose: ${COMPOSE[*]} ($("${COMPOSE[@]}" version --short 2>/dev/null || true))"

# --- the manifests, checked without running them --------------------------------------------
section "manifests: compose file, swarm stack, Kubernetes (deploy/k8s)"
if compose config -q >"$TMP/config.log"; then pass "docker-compose.yml: '${COMPOSE[*]} config' accepts it"; else fail "docker-compose.yml: $(head -c 300 "$TMP/config.log")"; fi
if docker stack config --help >/dev/null 2>&1; then
  if NODES=8 TOPOCOMM_TOKEN=$TOKEN docker stack config -c deploy/swarm/stack.yml >/dev/null 2>"$TMP/stack-config.log"; then
    pass "deploy/swarm/stack.yml: 'docker stack config' accepts it"
  else
    fail "deploy/swarm/stack.yml: $(head -c 300 "$TMP/stack-config.log")"
  fi
fi
# Kubernetes: no cluster here. The files must parse, fit each other (names, labels,
# --nodes = replicas, the secret, the service the nodes dial), and, where the
# kubernetes-validate package is installed (pip install kubernetes-validate), pass the
# API schemas strictly.
k8s_files=(deploy/k8s/namespace.yaml deploy/k8s/secret.yaml deploy/k8s/coordinator.yaml deploy/k8s/nodes.yaml)
if python3 -c 'import yaml' 2>/dev/null; then
  if python3 - "${k8s_files[@]}" >"$TMP/k8s.log" 2>&1 <<'PY'; then
import sys, yaml
docs = {}
for path in sys.argv[1:]:
    for doc in yaml.safe_load_all(open(path)):
        if doc:
            docs[(doc["kind"], doc["metadata"]["name"])] = doc
def need(cond, what):
    if not cond:
        sys.exit("k8s: " + what)
for (kind, name), doc in docs.items():
    if kind != "Namespace":
        need(doc["metadata"].get("namespace") == "topocomm", f"{kind}/{name} is not in namespace topocomm")
dep = docs[("Deployment", "topocomm-coordinator")]
sts = docs[("StatefulSet", "topocomm-node")]
coord_svc = docs[("Service", "topocomm-coordinator")]
node_svc = docs[("Service", sts["spec"]["serviceName"])]
need(node_svc["spec"].get("clusterIP") == "None", "the StatefulSet's service is not headless")
for workload in (dep, sts):
    labels = workload["spec"]["template"]["metadata"]["labels"]
    need(workload["spec"]["selector"]["matchLabels"].items() <= labels.items(), f"{workload['metadata']['name']}: selector does not match its pods")
need(coord_svc["spec"]["selector"].items() <= dep["spec"]["template"]["metadata"]["labels"].items(), "the coordinator service selects no coordinator pod")
need(node_svc["spec"]["selector"].items() <= sts["spec"]["template"]["metadata"]["labels"].items(), "the node service selects no node pod")
coordinator = dep["spec"]["template"]["spec"]["containers"][0]
node = sts["spec"]["template"]["spec"]["containers"][0]
nodes = int(coordinator["command"][coordinator["command"].index("--nodes") + 1])
need(nodes == sts["spec"]["replicas"], f"coordinator --nodes {nodes} != node replicas {sts['spec']['replicas']}")
env = {e["name"]: e for e in node["env"]}
need(env["TOPOCOMM_NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name", "node names do not come from the pod name")
host, port = env["TOPOCOMM_COORDINATOR"]["value"].split(":")
need(host == coord_svc["metadata"]["name"] and int(port) in [p["port"] for p in coord_svc["spec"]["ports"]], "nodes do not dial the coordinator service")
for container in (coordinator, node):
    token = {e["name"]: e for e in container["env"]}["TOPOCOMM_TOKEN"]["valueFrom"]["secretKeyRef"]
    need(("Secret", token["name"]) in docs and token["key"] in docs[("Secret", token["name"])]["stringData"], "the token secret is missing")
print(f"{len(docs)} objects; coordinator --nodes {nodes} = {sts['spec']['replicas']} StatefulSet replicas; node names from metadata.name; headless service {node_svc['metadata']['name']}")
PY
    pass "deploy/k8s parses and fits together: $(tail -n 1 "$TMP/k8s.log")"
  else
    fail "deploy/k8s: $(tail -n 3 "$TMP/k8s.log")"
  fi
else
  say "   (no PyYAML: the Kubernetes manifests' consistency is not checked)"
fi
if command -v kubernetes-validate >/dev/null; then
  if kubernetes-validate --strict "${k8s_files[@]}" >"$TMP/k8s-schema.log" 2>&1; then
    pass "deploy/k8s: kubernetes-validate --strict: $(grep -c passed "$TMP/k8s-schema.log") objects pass the API schemas ($(grep -o 'against version [0-9.]*' "$TMP/k8s-schema.log" | head -n 1))"
  else
    fail "deploy/k8s: kubernetes-validate: $(grep -v passed "$TMP/k8s-schema.log" | head -c 400)"
  fi
else
  say "   (kubernetes-validate is not installed: the manifests are not checked against the API schemas)"
fi

# --- Compose: 8 then 16 nodes ---------------------------------------------------------------
for NODES in 8 16; do
  if ((NODES == 8)); then
    # The first cluster logs JSON lines at debug level: every send, forward and deliver.
    LOG_FORMAT=json NODE_LOG=debug
  else
    LOG_FORMAT=text NODE_LOG=info
  fi
  section "compose: $NODES nodes (TOPOCOMM_LOG=$LOG_FORMAT, RUST_LOG=$NODE_LOG on the nodes)"
  t=$SECONDS
  compose up -d --scale "node=$NODES" >"$TMP/up.log" || {
    cat "$TMP/up.log"
    die "compose up ($NODES nodes) failed"
  }
  COORD=$(docker ps -q --filter "label=com.docker.compose.project=$PROJECT" --filter "label=com.docker.compose.service=coordinator")
  [ -n "$COORD" ] || die "no coordinator container"
  NODE_FILTER="label=com.docker.compose.service=node"
  running=$(docker ps -q --filter "label=com.docker.compose.project=$PROJECT" --filter "$NODE_FILTER" | wc -l)
  ((running == NODES)) || die "$running node containers running, not $NODES"
  if wait_for 120 ready; then
    ready_after=$((SECONDS - t))
  else
    tc status
    die "the cluster of $NODES did not form within 120s"
  fi
  if wait_for 60 coordinator_healthy; then
    pass "$NODES node containers up; cluster formed ${ready_after}s after compose up; coordinator healthy after $((SECONDS - t))s (healthcheck: topocomm status --ready)"
  else
    fail "the coordinator's healthcheck did not turn healthy: $(docker inspect -f '{{json .State.Health}}' "$COORD" | head -c 400)"
  fi
  ports=$(docker ps --filter "label=com.docker.compose.project=$PROJECT" --format '{{.Ports}}' | grep -c '0.0.0.0\|::' || true)
  ((ports == 0)) && pass "no port published on the host" || fail "$ports containers publish ports"

  for topology in "${TOPOLOGIES[@]}"; do
    t=$SECONDS
    RUNS_OK=0
    RUNS_FAILED=()
    for collective in "${COLLECTIVES[@]}"; do
      run_verified "p=$NODES $topology" "$collective" -t "$topology"
    done
    if ((${#RUNS_FAILED[@]} == 0)); then
      pass "p=$NODES $topology: all ${#COLLECTIVES[@]} collectives verified, default algorithms, $ITERATIONS iterations each ($((SECONDS - t))s)"
    else
      fail "p=$NODES $topology: $RUNS_OK of ${#COLLECTIVES[@]} verified"
      printf '      %s\n' "${RUNS_FAILED[@]}"
    fi
    # The last run left the cluster wired as this topology: read the links from outside.
    SHOW_LINKS=$([ "$topology" = torus ] && echo 1) check_links "p=$NODES $topology" "label=com.docker.compose.project=$PROJECT" "$COORD"
  done

  if ((NODES == 16)); then
    # Switched networks on the same containers: the coordinator makes the daemons past
    # the shape's ranks its switches, which only forward (cluster 3x4: 12 ranks + 4
    # switches; dragonfly 2x2x1: 10 ranks on its 12 hosts + 6 routers).
    for network in "cluster 3x4" "dragonfly 2x2x1"; do
      read -r kind dims <<<"$network"
      t=$SECONDS
      RUNS_OK=0
      RUNS_FAILED=()
      for collective in "${COLLECTIVES[@]}"; do
        run_verified "p=$NODES $kind $dims" "$collective" -t "$kind" --dims "$dims"
      done
      switches=$(jq -r '.switches // 0' <<<"$LAST_RUN")
      if ((${#RUNS_FAILED[@]} == 0)); then
        pass "$NODES containers as $kind $dims ($switches of them switches): all ${#COLLECTIVES[@]} collectives verified on its ranks, default algorithms ($((SECONDS - t))s)"
      else
        fail "$NODES containers as $kind $dims: $RUNS_OK of ${#COLLECTIVES[@]} verified"
        printf '      %s\n' "${RUNS_FAILED[@]}"
      fi
      check_links "$kind $dims on $NODES containers" "label=com.docker.compose.project=$PROJECT" "$COORD"
    done
  fi

  # Emulated links in containers are dilated as on a local cluster: --dilation auto
  # (the default) probes this cluster and says so in the run's JSON.
  if run_verified "p=$NODES dilation" broadcast -t ring --ts 200us --th 20us --tw 10ns &&
    jq -e --argjson p "$NODES" '.dilation.factor >= 1 and .dilation.auto.probe.nodes == $p and .dilation.wall_s > 0' >/dev/null <<<"$LAST_RUN"; then
    pass "p=$NODES: $(jq -r '"emulated links dilated x\(.dilation.factor) by --dilation auto (a step of \(.dilation.auto.probe.nodes) nodes sending at once released \(.dilation.auto.probe.small.release_us | floor) us late), measured / model \(.model_ratio * 1000 | round / 1000)"' <<<"$LAST_RUN")"
  else
    fail "p=$NODES: an emulated run in the containers was not dilated by --dilation auto: $(head -c 300 <<<"$LAST_RUN") ${RUNS_FAILED[*]}"
  fi

  if ((NODES == 8)); then
    section "logs: TOPOCOMM_LOG=json, RUST_LOG=debug, from compose"
    run_verified "logs" barrier -t ring || true # dissemination on a ring: frames travel over other nodes
    forwarded=$(jq '.frames_forwarded // 0' <<<"$LAST_RUN")
    compose logs --no-color node >"$TMP/node.logs"
    count=$(grep -c 'forward' "$TMP/node.logs")
    sample=$(grep '"forward"' "$TMP/node.logs" | tail -n 1 | cut -c1-400)
    if ((count > 0)) && [ "${forwarded:-0}" != 0 ]; then
      pass "'${COMPOSE[*]} logs node | grep forward': $count lines (the run reported $forwarded frames forwarded)"
      say "      $sample"
    else
      fail "'${COMPOSE[*]} logs node | grep forward' found $count lines (frames_forwarded=$forwarded)"
    fi
    one=$(docker ps -q --filter "label=com.docker.compose.project=$PROJECT" --filter "$NODE_FILTER" | head -n 1)
    total=$(docker logs "$one" 2>&1 | wc -l)
    json=$(docker logs "$one" 2>&1 | jq -c 'select(.level and .timestamp and .fields)' 2>/dev/null | wc -l)
    if ((total > 0 && json == total)); then
      pass "TOPOCOMM_LOG=json from compose: all $total log lines of a node container are JSON objects (level, timestamp, fields)"
    else
      fail "TOPOCOMM_LOG=json: $json of $total lines of a node's log are JSON"
    fi
  fi
done

# --- faults, on the cluster of 16 -----------------------------------------------------------
# The node to hurt: a middle id, with neighbours on every topology.
fault_target() {
  local status
  status=$(tc status --json)
  VICTIM_ID=5
  VICTIM_NAME=$(jq -r --argjson i "$VICTIM_ID" '.nodes[] | select(.id == $i) | .name' <<<"$status")
  node_table "label=com.docker.compose.project=$PROJECT"
  VICTIM=$(field_of_host "$VICTIM_NAME" 2)
  VICTIM_PID=$(field_of_host "$VICTIM_NAME" 3)
  [ -n "$VICTIM" ] || die "no container for node $VICTIM_ID ($VICTIM_NAME)"
}
id_of_name() { tc status --json | jq -r --arg n "$1" '.nodes[] | select(.name == $n) | .id'; }
coordinator_started() { docker inspect -f '{{.State.StartedAt}} {{.RestartCount}}' "$COORD"; }
# After a fault: the node is back under its name and id, the cluster ready, a run passes.
expect_recovery() {
  local label=$1 t=$SECONDS
  if ! wait_for 90 ready; then
    fail "$label: the cluster is not complete 90s after recovery: $(tc status | tr '\n' ' ')"
    return
  fi
  local id
  id=$(id_of_name "$VICTIM_NAME")
  if [ "$id" != "$VICTIM_ID" ]; then
    fail "$label: $VICTIM_NAME came back as id '${id}', not $VICTIM_ID"
    return
  fi
  if run_verified "$label" allreduce -t hypercube && run_verified "$label" alltoall -t torus; then
    pass "$label: $VICTIM_NAME back as id $VICTIM_ID after $((SECONDS - t))s; the next runs (allreduce on hypercube, alltoall on torus) verified"
  else
    fail "$label: next run after recovery: ${RUNS_FAILED[*]: -1}"
  fi
}

section "fault: a node crashes mid-run (its process killed from the host; the restart policy brings it back)"
fault_target
before=$(coordinator_started)
restarts=$(docker inspect -f '{{.RestartCount}}' "$VICTIM")
if start_long_run; then
  # PID 1 is the init (docker-init); the daemon is its child.
  target=$VICTIM_PID
  [ "$(cat /proc/"$VICTIM_PID"/comm 2>/dev/null)" = docker-init ] && target=$(pgrep -P "$VICTIM_PID" | head -n 1)
  what=$(cat /proc/"$target"/comm 2>/dev/null)
  t=$SECONDS
  kill -9 "$target"
  say "   killed $what (host pid $target) in container ${VICTIM:0:12}, node $VICTIM_ID ($VICTIM_NAME)"
  expect_failure_naming "crash" "$VICTIM_ID" "$VICTIM_NAME" "$t"
  if wait_for 60 restarted_since "$restarts"; then
    pass "crash: the restart policy restarted $VICTIM_NAME's container ($(docker inspect -f '{{.RestartCount}}' "$VICTIM") restart)"
  else
    fail "crash: the container was not restarted within 60s ($(docker inspect -f '{{.State.Status}} {{.RestartCount}}' "$VICTIM"))"
  fi
  [ "$(coordinator_started)" = "$before" ] && tc status >/dev/null &&
    pass "crash: the coordinator kept serving (same process, no restart)" || fail "crash: the coordinator restarted"
  expect_recovery "crash"
else
  fail "crash: the long run did not start"
fi

section "fault: docker kill, then docker start"
fault_target
if start_long_run; then
  t=$SECONDS
  dk 30 kill "$VICTIM" >/dev/null
  expect_failure_naming "docker kill" "$VICTIM_ID" "$VICTIM_NAME" "$t"
  sleep 2
  state=$(docker inspect -f '{{.State.Status}}' "$VICTIM")
  say "   after docker kill the container is '$state' (a deliberate kill is not undone by the restart policy)"
  dk 30 start "$VICTIM" >/dev/null
  expect_recovery "docker kill + docker start"
else
  fail "docker kill: the long run did not start"
fi

section "fault: docker pause, then docker unpause"
fault_target
if start_long_run; then
  t=$SECONDS
  dk 30 pause "$VICTIM" >/dev/null
  expect_failure_naming "pause" "$VICTIM_ID" "$VICTIM_NAME" "$t"
  paused_view=$(tc status --json | jq -r --argjson i "$VICTIM_ID" '"\(.connected) of \(.expected) connected, ready \(.ready); node \($i) listed: \([.nodes[] | select(.id == $i)] | length == 1)"')
  say "   while paused, topocomm status says: $paused_view"
  t2=$SECONDS
  tc run allreduce -t ring --json -i 1 --warmup 0 --timeout "$RUN_TIMEOUT" >/dev/null 2>"$TMP/paused.err"
  say "   a run started while it is paused: fails after $((SECONDS - t2))s: $(tr '\n' ' ' <"$TMP/paused.err" | cut -c1-240)"
  grep -qE "node $VICTIM_ID \($VICTIM_NAME\)|neighbour $VICTIM_ID\b" "$TMP/paused.err" &&
    pass "pause: a run started while paused fails too, in $((SECONDS - t2))s, naming node $VICTIM_ID" ||
    fail "pause: a run started while paused did not name the node"
  dk 30 unpause "$VICTIM" >/dev/null
  expect_recovery "unpause"
else
  fail "pause: the long run did not start"
fi

section "fault: docker network disconnect, then connect"
fault_target
network=$(docker inspect -f '{{range $name, $_ := .NetworkSettings.Networks}}{{$name}} {{end}}' "$VICTIM" | awk '{print $1}')
old_ip=$(docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$VICTIM")
if start_long_run; then
  t=$SECONDS
  dk 30 network disconnect "$network" "$VICTIM"
  expect_failure_naming "disconnect" "$VICTIM_ID" "$VICTIM_NAME" "$t"
  say "   while cut off, topocomm status says: $(tc status --json | jq -r '"\(.connected) of \(.expected) connected, ready \(.ready)"')"
  dk 30 network connect "$network" "$VICTIM"
  new_ip=$(docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$VICTIM")
  say "   reconnected to $network: address $old_ip -> $new_ip"
  expect_recovery "reconnect"
else
  fail "disconnect: the long run did not start"
fi

section "links after the faults"
tc run allgather -t ring --json -i 1 --warmup 0 >/dev/null 2>&1
check_links "p=16 ring, after the faults" "label=com.docker.compose.project=$PROJECT" "$COORD"

section "compose down"
t=$SECONDS
compose down -v --remove-orphans -t 5 >"$TMP/down.log"
remove_project_networks
left=$(
  docker ps -aq --filter "label=com.docker.compose.project=$PROJECT"
  docker network ls -q --filter "label=com.docker.compose.project=$PROJECT"
)
[ -z "$left" ] && pass "compose down in $((SECONDS - t))s" || fail "compose down left $(echo $left): $(tail -n 3 "$TMP/down.log" | tr '\n' ' ')"
COORD=""

# --- Compose, every link encrypted ----------------------------------------------------------
section "compose: 8 nodes, TOPOCOMM_ENCRYPT=true (Noise on every control and data link)"
NODES=8 ENCRYPT=true LOG_FORMAT=text NODE_LOG=info
t=$SECONDS
if compose up -d --scale "node=$NODES" >"$TMP/up.log"; then
  COORD=$(docker ps -q --filter "label=com.docker.compose.project=$PROJECT" --filter "label=com.docker.compose.service=coordinator")
  if [ -n "$COORD" ] && wait_for 120 ready; then
    pass "encrypted: 8 node containers formed the cluster in $((SECONDS - t))s"
    RUNS_OK=0
    RUNS_FAILED=()
    run_verified "encrypted" allreduce -t torus --size 1MiB && run_verified "encrypted" alltoall -t hypercube --size 64KiB
    if ((${#RUNS_FAILED[@]} == 0)); then
      pass "encrypted: allreduce (torus, 1 MiB) and alltoall (hypercube, 64 KiB) verified"
    else
      fail "encrypted: ${RUNS_FAILED[*]}"
    fi
    # A client without the mode is turned away with the reason.
    if timeout 60 docker exec -e TOPOCOMM_ENCRYPT=false "$COORD" topocomm status >"$TMP/plain.out" 2>&1; then
      fail "encrypted: a plain client was let in"
    elif grep -q -- "--encrypt" "$TMP/plain.out"; then
      pass "encrypted: a plain client is refused and told why"
    else
      fail "encrypted: a plain client's error does not say why: $(head -c 300 "$TMP/plain.out")"
    fi
  else
    fail "encrypted: the cluster of 8 did not form within 120s"
  fi
else
  fail "encrypted: compose up failed: $(head -c 300 "$TMP/up.log")"
fi
compose down -v --remove-orphans -t 5 >"$TMP/down.log" || true
remove_project_networks
left=$(
  docker ps -aq --filter "label=com.docker.compose.project=$PROJECT"
  docker network ls -q --filter "label=com.docker.compose.project=$PROJECT"
)
[ -z "$left" ] || fail "encrypted: compose down left $(echo $left): $(tail -n 3 "$TMP/down.log" | tr '\n' ' ')"
COORD=""
ENCRYPT=false

# --- Docker Swarm: the same image as a stack -------------------------------------------------
section "swarm: docker stack deploy on a single-node swarm"
swarm_state=$(docker info -f '{{.Swarm.LocalNodeState}}' 2>/dev/null)
if [ "$swarm_state" = inactive ]; then
  docker network inspect docker_gwbridge >/dev/null 2>&1 && GWBRIDGE_EXISTED=1
  if dk 60 swarm init >"$TMP/swarm.log" 2>&1 ||
    dk 60 swarm init --advertise-addr "$(ip -4 route get 1.1.1.1 2>/dev/null | awk '{for (i = 1; i < NF; i++) if ($i == "src") print $(i + 1)}')" >"$TMP/swarm.log" 2>&1; then
    SWARM_INITIALISED=1
    say "   initialised a swarm (it is left when the test ends)"
  else
    fail "swarm init: $(head -c 300 "$TMP/swarm.log")"
  fi
elif [ "$swarm_state" != active ]; then
  fail "swarm: this engine's swarm is '$swarm_state'"
fi
if [ "$(docker info -f '{{.Swarm.LocalNodeState}}' 2>/dev/null)" = active ]; then
  t=$SECONDS
  STACK_DEPLOYED=1
  if NODES=8 TOPOCOMM_TOKEN=$TOKEN TOPOCOMM_IMAGE=$IMAGE dk 120 stack deploy --resolve-image never -c deploy/swarm/stack.yml "$STACK" >"$TMP/stack.log" 2>&1; then
    if wait_for 120 swarm_coordinator_running && COORD=$(swarm_coordinator) && wait_for 120 ready; then
      names=$(tc status --json | jq -r '[.nodes[] | "\(.id)=\(.name)"] | join(" ")')
      pass "stack $STACK: 8 node tasks formed the cluster in $((SECONDS - t))s over the overlay network; ids by task slot: $names"
      RUNS_OK=0
      RUNS_FAILED=()
      if run_verified "swarm" allreduce -t torus; then
        pass "swarm: allreduce on a torus verified ($(jq -r '"\(.nodes) nodes, median \(.time_us.median) us"' <<<"$LAST_RUN"))"
      else
        fail "swarm: ${RUNS_FAILED[*]}"
      fi
      check_links "swarm torus" "label=com.docker.stack.namespace=$STACK" "$COORD"
    else
      fail "swarm: the cluster did not form within the deadline: $(docker service ls --filter "label=com.docker.stack.namespace=$STACK" | tail -n +2 | tr '\n' ';')"
    fi
  else
    fail "docker stack deploy: $(head -c 400 "$TMP/stack.log")"
  fi
  t=$SECONDS
  dk 60 stack rm "$STACK" >/dev/null
  if wait_for 90 no_stack_left; then
    pass "docker stack rm: tasks and network gone in $((SECONDS - t))s"
    STACK_DEPLOYED=""
  else
    fail "docker stack rm: tasks or network still there after 90s"
  fi
  COORD=""
fi
# The EXIT trap leaves the swarm (if this test initialised it) and prints the summary.
