#!/usr/bin/env bash
# Checks that this host can hold N node containers of topocomm (and their coordinator)
# on one Docker network, before a large bring-up, and with --apply raises what must be
# raised. It prints every limit it checks, what N containers need of it, and whether it
# holds:
#
#   - the kernel's neighbour (ARP) table, which every container on the host shares:
#     net.ipv4.neigh.default.gc_thresh1/2/3 against N x (degree + 2) entries (each node
#     resolves its topology neighbours, the coordinator and the gateway). At the default
#     gc_thresh3 of 1,024, a hypercube of 128 containers (degree 7: 1,152 entries) fails
#     to wire with "No route to host" and dmesg says "neighbor table overflow";
#   - open files: fs.file-max and fs.nr_open against every container's sockets and the
#     coordinator's connection per node; Docker's own RLIMIT_NOFILE, which containers get;
#   - processes: kernel.pid_max and kernel.threads-max against the tasks running now and
#     about TASKS_PER_CONTAINER per container (the daemon's threads, its init, containerd's
#     shim);
#   - memory: MemAvailable against about MIB_PER_CONTAINER per container;
#   - the Linux bridge of one Docker network, which takes at most 1,024 ports.
#
#   deploy/prepare-host.sh 128                  # check only; exit 0 if the host is ready
#   deploy/prepare-host.sh --apply 256          # as root: raise what must be raised
#   deploy/prepare-host.sh --degree 4 512       # a torus of 512 (default: the hypercube's
#                                               # degree, the largest deploy/scale.sh runs)
#
# --apply changes only what is short (sysctl -w, never lowering a value), prints each
# change and the command that undoes it, and keeps nothing across a reboot (it says how).
# Memory and the bridge's ports cannot be raised here: a host short of them is refused,
# naming the limit. Exit status: 0 ready (or made ready), 1 not ready, 2 bad usage.
set -uo pipefail

# Measured with deploy/scale.sh 128 on a 2-core, 24 GiB VM: the host's used memory grew
# by about 1 GiB, 8 MiB per container (the daemon's cgroup holds 1.2 MiB; the rest is its
# init, containerd's shim and the kernel's share); twice that, for headroom.
MIB_PER_CONTAINER=${MIB_PER_CONTAINER:-16}
# The daemon's 2-4 threads, its init, and containerd's shim (about 10 threads).
TASKS_PER_CONTAINER=${TASKS_PER_CONTAINER:-16}
# File descriptors of one node container: its links, the control link, the listener,
# standard streams and the runtime's own, with room to spare.
FDS_PER_CONTAINER=64
# A Linux bridge takes at most this many ports (BR_MAX_PORTS): one per container.
BRIDGE_PORTS=1024

usage() {
  sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit 2
}

apply=false
degree=
degree_flag=
n=
while (($#)); do
  case $1 in
    --apply) apply=true ;;
    --degree) degree=${2:-} degree_flag=" --degree ${2:-}"; shift ;;
    -h | --help) usage ;;
    *[!0-9]* | '') printf 'prepare-host: unknown argument %s\n' "$1"; usage ;;
    *) n=$1 ;;
  esac
  shift
done
n=${n:-128}
[[ $n =~ ^[0-9]+$ ]] && ((n >= 1)) || { echo "prepare-host: N must be a positive number of containers"; exit 2; }
if [ -z "$degree" ]; then
  # The hypercube's degree, ceil(log2 N): the largest of the ring (2), the torus (4) and
  # the hypercube that deploy/scale.sh runs, from 32 nodes on.
  degree=0
  while (((1 << degree) < n)); do degree=$((degree + 1)); done
  ((degree < 4)) && degree=4
fi
[[ $degree =~ ^[0-9]+$ ]] || { echo "prepare-host: --degree must be a number"; exit 2; }

read_sysctl() { cat "/proc/sys/${1//.//}" 2>/dev/null || echo 0; }
say() { printf '%s\n' "$*"; }

short=()    # "name wanted" pairs that --apply raises
refused=()  # what cannot be raised here
undo=()     # commands that undo what --apply changed

# check NAME HAVE WANT WHAT: prints one line; a short sysctl is queued for --apply.
check() {
  local name=$1 have=$2 want=$3 what=$4
  if ((have >= want)); then
    printf '  ok     %-36s %10s >= %-10s %s\n' "$name" "$have" "$want" "$what"
  else
    printf '  SHORT  %-36s %10s <  %-10s %s\n' "$name" "$have" "$want" "$what"
    short+=("$name $want")
  fi
}

say "prepare-host: $n node containers and a coordinator, topology degree up to $degree"

neighbours=$((n * (degree + 2)))
say "neighbour (ARP) table, shared by every container: $n x ($degree + 2) = $neighbours entries"
printf '  info   %-36s %10s    %-10s %s\n' net.ipv4.neigh.default.gc_thresh1 \
  "$(read_sysctl net.ipv4.neigh.default.gc_thresh1)" "" "below it nothing is collected (no limit)"
check net.ipv4.neigh.default.gc_thresh2 "$(read_sysctl net.ipv4.neigh.default.gc_thresh2)" "$neighbours" \
  "soft limit: stale entries are collected above it"
check net.ipv4.neigh.default.gc_thresh3 "$(read_sysctl net.ipv4.neigh.default.gc_thresh3)" $((2 * neighbours)) \
  "hard limit: past it, \"No route to host\""

fds=$((n * FDS_PER_CONTAINER + n + 1024))
say "open files: about $FDS_PER_CONTAINER per container, and one per node at the coordinator"
check fs.file-max "$(read_sysctl fs.file-max)" "$fds" "open files on the whole host"
check fs.nr_open "$(read_sysctl fs.nr_open)" $((n + 1024)) "the most one process (the coordinator) may be allowed"
dockerd=$(pgrep -o -x dockerd 2>/dev/null)
if [ -n "$dockerd" ] && [ -r "/proc/$dockerd/limits" ]; then
  docker_nofile=$(awk '/^Max open files/ {print $4}' "/proc/$dockerd/limits")
  if [ "$docker_nofile" = unlimited ] || ((docker_nofile >= n + 1024)); then
    printf '  ok     %-36s %10s >= %-10s %s\n' "dockerd RLIMIT_NOFILE" "$docker_nofile" $((n + 1024)) \
      "what containers get (the coordinator holds one per node)"
  else
    printf '  SHORT  %-36s %10s <  %-10s %s\n' "dockerd RLIMIT_NOFILE" "$docker_nofile" $((n + 1024)) \
      "what containers get"
    refused+=("dockerd's open-file limit ($docker_nofile): set LimitNOFILE=1048576 in its systemd unit (systemctl edit docker), then restart it")
  fi
fi

running=$(awk '{split($4, a, "/"); print a[2]}' /proc/loadavg)
tasks=$((running + n * TASKS_PER_CONTAINER))
say "processes: $running tasks now, about $TASKS_PER_CONTAINER more per container"
check kernel.pid_max "$(read_sysctl kernel.pid_max)" "$tasks" "process ids"
check kernel.threads-max "$(read_sysctl kernel.threads-max)" "$tasks" "threads on the whole host"

available_mib=$(awk '/^MemAvailable:/ {print int($2 / 1024)}' /proc/meminfo)
memory_mib=$((n * MIB_PER_CONTAINER + 512))
say "memory: about $MIB_PER_CONTAINER MiB per container and 512 MiB for the coordinator and Docker"
if ((available_mib >= memory_mib)); then
  printf '  ok     %-36s %10s >= %-10s %s\n' "MemAvailable (MiB)" "$available_mib" "$memory_mib" "memory"
else
  printf '  SHORT  %-36s %10s <  %-10s %s\n' "MemAvailable (MiB)" "$available_mib" "$memory_mib" "memory"
  refused+=("memory: $n containers need about $memory_mib MiB, $available_mib MiB is available; at most $(((available_mib - 512) / MIB_PER_CONTAINER)) containers fit")
fi

say "one Docker network: a Linux bridge takes at most $BRIDGE_PORTS ports, one per container"
if ((n + 1 <= BRIDGE_PORTS)); then
  printf '  ok     %-36s %10s <= %-10s %s\n' "bridge ports" $((n + 1)) "$BRIDGE_PORTS" "containers on the network"
else
  printf '  SHORT  %-36s %10s >  %-10s %s\n' "bridge ports" $((n + 1)) "$BRIDGE_PORTS" "containers on the network"
  refused+=("bridge ports: $((n + 1)) containers on one network, a Linux bridge takes $BRIDGE_PORTS; spread them over several hosts (deploy/README.md, Swarm or Kubernetes)")
fi

commands=()
for item in "${short[@]}"; do
  commands+=("sysctl -w ${item% *}=${item#* }")
done

if ((${#short[@]} > 0)); then
  if ! $apply; then
    say ""
    say "not ready: raise the limits above, as root:"
    say "  sudo $0 --apply $n$degree_flag"
    say "which runs:"
    printf '  %s\n' "${commands[@]}"
  elif ((EUID != 0)); then
    say ""
    say "prepare-host: --apply changes kernel settings and needs root; run:"
    say "  sudo $0 --apply $n$degree_flag"
    say "which runs:"
    printf '  %s\n' "${commands[@]}"
    exit 1
  else
    say ""
    say "raising:"
    for item in "${short[@]}"; do
      name=${item% *} want=${item#* }
      before=$(read_sysctl "$name")
      if sysctl -q -w "$name=$want" >/dev/null; then
        say "  $name: $before -> $(read_sysctl "$name")"
        undo+=("sysctl -w $name=$before")
      else
        say "  $name: could not be set to $want (sysctl -w failed)"
        refused+=("$name stays $before")
      fi
    done
    say "undo with:"
    printf '  %s\n' "${undo[@]}"
    say "(sysctl -w lasts until the next boot; to keep the values, write them to /etc/sysctl.d/90-topocomm.conf)"
    short=()
  fi
fi

if ((${#refused[@]} > 0)); then
  say ""
  say "refused: this host cannot hold $n node containers as it is:"
  printf '  %s\n' "${refused[@]}"
  exit 1
fi
if ((${#short[@]} > 0)); then
  exit 1
fi
say "ready for $n node containers"
