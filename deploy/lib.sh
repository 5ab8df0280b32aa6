# shellcheck shell=bash
# Shell functions shared by deploy/e2e.sh and deploy/scale.sh, which source this file
# (it defines functions only; running it does nothing).

# Sets COMPOSE to the Compose command this machine has: Compose v2's `docker compose`,
# else v1's `docker-compose`. With neither, says so (prefixed by $1, the caller's name)
# and returns 1.
detect_compose() {
  if docker compose version >/dev/null 2>&1; then
    COMPOSE=(docker compose)
  elif command -v docker-compose >/dev/null; then
    COMPOSE=(docker-compose)
  else
    printf '%s\n' "$1: neither 'docker compose' nor 'docker-compose' is installed"
    return 1
  fi
}

# Polls "$@" (after the first argument) every second until it succeeds; fails after $1
# seconds.
wait_for() {
  local limit=$1
  shift
  local deadline=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || return 1
    sleep 1
  done
}
