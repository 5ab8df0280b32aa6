#!/bin/sh
# topocomm against Open MPI on this machine: builds topocomm (release) and runs
# bench/run.py with the arguments given (see bench/README.md, or bench/run.sh --help).
set -eu
cd "$(dirname "$0")/.."
cargo build --release --bin topocomm
exec python3 bench/run.py "$@"
