#!/usr/bin/env python3
"""Runs every `topocomm` command the README and the book show, so that they stay true.

A command is a line inside a fenced block (not a ```text one: those are pictures and
outputs; a ```sh,script block runs whole, as one script) that starts with `topocomm` (or `$ topocomm`, or
such a line behind `VAR=value` assignments), joined with its `\\` continuation lines. Each
runs in a scratch folder of its page (one per page, so a file one command makes is there
for the next; the repository's node/, docs/, deploy/ and bench/ are linked there, as
examples name them from the root) with the built `topocomm` first on PATH, under a deadline, and
must exit 0 (a pipe into jq or grep runs as written, through the shell). Commands that
need more than one machine's worth of set-up are not run here; each is listed with the
test or script that runs its like, so nothing is skipped silently.

    docs/check-examples.py [--bin DIR] [--full] [--list] [FILE.md ...]

--bin DIR   folder holding the `topocomm` binary (default: target/release, or
            $CARGO_TARGET_DIR/release)
--full      also run the long benchmarks (bench-model: minutes each)
--list      print the commands and what would be done with each, run nothing
"""

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Commands not run here, and where their like is run instead. Matched against the command.
ELSEWHERE = [
    (r"--coordinator ", "needs a served cluster (other hosts, containers, or a serve started beside it): "
     "coordinator/tests/cluster.rs serves one on loopback, deploy/e2e.sh in containers"),
    (r"^topocomm serve ", "serves until stopped: coordinator/tests/cluster.rs runs serve"),
    (r"^topocomm lab ", "serves its page until stopped: coordinator/tests/lab_browser.rs starts it and drives it"),
    (r"^topocomm-node ", "a daemon that runs until stopped: coordinator/tests/cluster.rs starts them"),
    (r"^topocomm status --coordinator", "coordinator/tests/cluster.rs asks a served cluster's status"),
    (r"--tuning (my-tuning|tuning|bad)\.json", "reads a tuning file written or edited beforehand: "
     "coordinator/tests/tuning.rs writes such files (by hand, and by tune) and runs run, explain, list and serve with them"),
]
# Benchmarks that take minutes: run with --full.
LONG = [r"^topocomm bench-model "]
DEADLINE_S = 600


COMMAND = re.compile(r"^([A-Z_]+=\S+ )*topocomm(-node)? ")


def commands(path):
    """(line number, command, refused) of every topocomm command in the fenced blocks of
    path; refused: the block shows it answered by an `error:` line (it must fail so). A
    ```sh,script block (a loop, a file made first) runs whole, as one script."""
    found, fence, pending, start, drawing = [], False, None, 0, False
    script, script_start, script_needed = [], 0, False
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if line.startswith("```"):
                fence = not fence
                # A ```text block is a picture or an output, never commands.
                drawing = fence and line.strip() == "```text"
                if fence:
                    script, script_start, script_needed = [], number + 1, False
                    in_sh = line.strip() == "```sh,script"
                    block_begins = len(found)
                elif in_sh and script_needed:
                    del found[block_begins:]
                    found.append((script_start, "\n".join(script), False))
                continue
            if not fence or drawing:
                continue
            text = line.rstrip("\n")
            script.append(text)
            stripped = text.strip()
            if (stripped and not stripped.startswith("#") and pending is None and not COMMAND.match(stripped)
                    and not stripped.startswith("$ ")):
                script_needed = True
            if found and found[-1][0] == number - 1 and text.startswith("error:"):
                found[-1] = (found[-1][0], found[-1][1], True)
            if pending is not None:
                pending += " " + text.strip().rstrip("\\").strip()
                if not text.rstrip().endswith("\\"):
                    found.append((start, pending, False))
                    pending = None
                continue
            if stripped.startswith("$ "):
                stripped = stripped[2:]
            if not COMMAND.match(stripped):
                continue
            # Output lines that merely begin with the word (a table's first column).
            if re.match(r"^topocomm \S+ [0-9]", stripped):
                continue
            if stripped.endswith("\\"):
                pending, start = stripped.rstrip("\\").strip(), number
            else:
                found.append((number, stripped, False))
    return found


def without_comment(command):
    # A trailing "# ..." explains the command; it is not part of it.
    return re.sub(r"\s+#\s.*$", "", command)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bin")
    parser.add_argument("--full", action="store_true")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("files", nargs="*")
    args = parser.parse_args()
    files = args.files or [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    bin_dir = os.path.abspath(args.bin or os.path.join(target, "release"))
    if not args.list and not os.access(os.path.join(bin_dir, "topocomm"), os.X_OK):
        sys.exit(f"no topocomm binary in {bin_dir}: build it first (cargo build --release) or give --bin DIR")
    env = dict(os.environ, PATH=bin_dir + os.pathsep + os.environ["PATH"])
    for name in ("TOPOCOMM_TOKEN", "TOPOCOMM_TOKEN_FILE", "TOPOCOMM_COORDINATOR", "TOPOCOMM_ENCRYPT"):
        env.pop(name, None)
    ran = failed = elsewhere = long_skipped = 0
    for path in files:
        # A page is one session: its commands share a scratch folder, in order, so a file
        # one makes is there for the next.
        scratch = tempfile.mkdtemp(prefix="topocomm-example-")
        # Examples name the repository's own files (node/tests/schedules/...) as from its root.
        for name in ("node", "docs", "deploy", "bench"):
            os.symlink(os.path.join(ROOT, name), os.path.join(scratch, name))
        for number, command, refused in commands(path):
            where = f"{os.path.relpath(path, ROOT)}:{number}"
            command = command if "\n" in command else without_comment(command)
            reason = next((why for pattern, why in ELSEWHERE if re.search(pattern, command, re.M)), None)
            if reason:
                elsewhere += 1
                print(f"ELSEWHERE {where}: {command}\n          ({reason})")
                continue
            if any(re.search(p, command, re.M) for p in LONG) and not args.full:
                long_skipped += 1
                print(f"LONG      {where}: {command}\n          (a benchmark of minutes: run with --full)")
                continue
            if args.list:
                print(f"RUN       {where}: {command}")
                continue
            began = time.monotonic()
            try:
                result = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", command], cwd=scratch, env=env,
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=DEADLINE_S)
                code, output = result.returncode, result.stdout.decode(errors="replace")
            except subprocess.TimeoutExpired as timeout:
                code, output = "timeout", (timeout.stdout or b"").decode(errors="replace")
            took = time.monotonic() - began
            ran += 1
            if refused and code not in (0, "timeout") and "error:" in output:
                print(f"refused   {where} ({took:.1f} s), as shown: {command}")
            elif code == 0 and not refused:
                print(f"ok        {where} ({took:.1f} s): {command}")
            else:
                failed += 1
                tail = "\n".join(output.splitlines()[-15:])
                print(f"FAILED    {where} (exit {code}, {took:.1f} s): {command}\n{tail}")
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"\n{ran} run, {failed} failed; {elsewhere} run elsewhere (named above); "
          f"{long_skipped} long benchmarks not run (--full runs them)")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
