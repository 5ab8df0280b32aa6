#!/usr/bin/env python3
"""Runs every `topocomm` command the README and the book show, so that they stay true.

A command is a line inside a fenced block (not a ```text one: those are pictures and
outputs; a ```sh,script block runs whole, as one script) that starts with `topocomm` (or `$ topocomm`, or
such a line behind `VAR=value` assignments), joined with its `\\` continuation lines. Each
runs in a scratch folder of its page (one per page, so a file one command makes is there
for the next; the repository's node/, proto/, docs/, deploy/ and bench/ are linked there, as
examples name them from the root) with the built `topocomm` first on PATH, under a deadline, and
must exit 0 (a pipe into jq or grep runs as written, through the shell). Commands that
need more than one machine's worth of set-up are not run here; each is listed with the
test or script that runs its like, so nothing is skipped silently.

Before the commands it checks the map the pages draw (no binary needed): every path into
the repository they name (`node/src/router.rs`, `coordinator/tests/cluster.rs:21`,
`coordinator/src/render/{page,table}.rs`, `docs/images/`, a glob such as
`node/tests/schedules/*.xml`: any path that begins with one of the repository's top-level
folders; a user's own `my.xml` or `logs/` is not one) exists, and every `RUST_LOG` target
they name (`RUST_LOG=topocomm_node::router=trace`) is a module of a crate of the workspace
whose file exists and which emits events there (a `tracing::trace!` ... `error!` in its file
or its submodules' files), or a `target: "..."` some event names. Each failure names the
page and line.

    docs/check-examples.py [--bin DIR] [--full] [--list] [--paths-only] [FILE.md ...]

--bin DIR     folder holding the `topocomm` binary (default: target/release, or
              $CARGO_TARGET_DIR/release)
--full        also run the long benchmarks (bench-model: minutes each)
--list        print the commands and what would be done with each, run nothing
--paths-only  check only the map (paths and RUST_LOG targets): quick, no binary needed
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


# The map: paths into the repository and RUST_LOG targets, wherever a page names them.

# The crates a RUST_LOG target may begin with (a target is a module path: the crate's name
# as Rust spells it, then its modules), and the source folder of each.
CRATE_SOURCES = {
    "topocomm_proto": "proto/src",
    "topocomm_collectives": "collectives/src",
    "topocomm_node": "node/src",
    "topocomm": "coordinator/src",
}
LEVELS = {"trace", "debug", "info", "warn", "error", "off"}
# An event macro, called by its path or imported from tracing.
EVENT = re.compile(r"\b(?:tracing::)?(?:trace|debug|info|warn|error|event)!\s*[(\[{]")
NAMED_TARGET = re.compile(r"\btarget:\s*\"([^\"]+)\"")
RUST_LOG = re.compile(r"\bRUST_LOG=(\"[^\"]*\"|'[^']*'|[^\s`]+)")


def top_level_folders():
    """The repository's top-level folders (the tracked ones where git can say, so that a
    build's target/ is never one)."""
    try:
        listed = subprocess.run(["git", "-C", ROOT, "ls-files"], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, check=True).stdout.decode().splitlines()
        folders = {line.split("/", 1)[0] for line in listed if "/" in line}
    except (OSError, subprocess.CalledProcessError):
        folders = set()
    if not folders:
        folders = {name for name in os.listdir(ROOT) if os.path.isdir(os.path.join(ROOT, name))
                   and name not in (".git", "target")}
    return sorted(folders)


def path_pattern(folders):
    # A path begins a word (not inside a longer path, a URL or a ../ link), with one of the
    # folders, then runs on through path characters and {a,b} groups.
    names = "|".join(re.escape(folder) for folder in sorted(folders, key=len, reverse=True))
    return re.compile(r"(?<![\w./~:-])(?:" + names + r")/(?:[\w.*/+-]|\{[\w.,/+-]*\})*")


def expand_braces(path):
    """`a/{b,c}.rs` as `a/b.rs`, `a/c.rs` (nested groups too)."""
    match = re.search(r"\{([^{}]*)\}", path)
    if not match:
        return [path]
    return [expanded for part in match.group(1).split(",")
            for expanded in expand_braces(path[:match.start()] + part + path[match.end():])]


def path_exists(path):
    if any(c in path for c in "*?["):
        return bool(glob.glob(os.path.join(ROOT, path)))
    return os.path.exists(os.path.join(ROOT, path))


def module_files(target):
    """The source files of the module `target` names (its own file, and those of its
    submodules, whose events a RUST_LOG target covers too), or None if no such module."""
    crate, *modules = target.split("::")
    source = CRATE_SOURCES.get(crate)
    if source is None:
        return None
    base = os.path.join(ROOT, source, *modules)
    if modules:
        own = [candidate for candidate in (base + ".rs", os.path.join(base, "mod.rs")) if os.path.isfile(candidate)]
        if not own:
            return None
    else:
        own = [os.path.join(ROOT, source, name) for name in ("lib.rs", "main.rs")
               if os.path.isfile(os.path.join(ROOT, source, name))]
    beneath = sorted(glob.glob(os.path.join(base, "**", "*.rs"), recursive=True)) if os.path.isdir(base) else []
    return sorted(set(own + beneath))


def named_targets():
    """Every `target: "..."` an event of the workspace names."""
    named = set()
    for source in CRATE_SOURCES.values():
        for path in glob.glob(os.path.join(ROOT, source, "**", "*.rs"), recursive=True):
            with open(path, encoding="utf-8") as f:
                named.update(NAMED_TARGET.findall(f.read()))
    return named


def target_problem(target, named):
    """Why a RUST_LOG target shows nothing, or None if it names a module that logs."""
    if any(name == target or name.startswith(target + "::") for name in named):
        return None
    files = module_files(target)
    if files is None:
        crates = ", ".join(sorted(CRATE_SOURCES))
        return (f"RUST_LOG target `{target}` is no module of the workspace (a target is a module path "
                f"beginning with one of {crates}; no such file)")
    for path in files:
        with open(path, encoding="utf-8") as f:
            if EVENT.search(f.read()):
                return None
    shown = ", ".join(os.path.relpath(path, ROOT) for path in files)
    return f"RUST_LOG target `{target}` emits no events: no tracing event macro in {shown}"


def rust_log_targets(value):
    """The targets of a RUST_LOG value (`a::b=trace,c=debug,info`: a::b and c)."""
    targets = []
    for directive in value.strip("\"'").split(","):
        directive = directive.strip()
        name = directive.split("=", 1)[0].split("[", 1)[0].strip()
        if name and name.lower() not in LEVELS:  # a bare level (`debug`) names no target
            targets.append(name)
    return targets


def check_map(files):
    """Every repository path and RUST_LOG target the pages name; returns the failures as
    `page:line: why`."""
    pattern = path_pattern(top_level_folders())
    named = named_targets()
    failures, paths, targets = [], 0, 0
    for page in files:
        where_page = os.path.relpath(page, ROOT)
        with open(page, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                for match in pattern.finditer(line):
                    # A link's target is relative to its page, and the book's link check
                    # (mdbook-linkcheck) holds it.
                    if line[:match.start()].endswith("](") or re.match(r"^\s*\[[^\]]+\]:\s", line):
                        continue
                    written = match.group(0).rstrip(".,;:")
                    for path in expand_braces(written):
                        paths += 1
                        if not path_exists(path.rstrip("/")):
                            failures.append(f"{where_page}:{number}: `{path}` names no file or folder of the repository")
                for match in RUST_LOG.finditer(line):
                    for target in rust_log_targets(match.group(1)):
                        targets += 1
                        problem = target_problem(target, named)
                        if problem:
                            failures.append(f"{where_page}:{number}: {problem}")
    for failure in failures:
        print(f"MAP       {failure}")
    print(f"the map: {paths} repository paths and {targets} RUST_LOG targets checked, {len(failures)} wrong")
    return failures


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


# Compose: the container lines of a page run on a host with Compose v2 (`docker compose`)
# and on one with only Compose v1 (`docker-compose`), here with stand-ins for docker that
# record what they are asked (the real bring-up is deploy/e2e.sh's).

COMPOSE_CALL = re.compile(r"(?<![\w-])(?:docker compose|docker-compose|compose)(?=\s+[a-z])")
# Lines of a container block that need a Docker engine and are run by deploy/e2e.sh instead.
COMPOSE_NOT_RUN = re.compile(r"^\s*(deploy/|sudo )")
STAND_IN = {
    # v2: `docker compose` is a plugin; no docker-compose binary.
    "v2": {
        "docker": 'if [ "$1" = compose ]; then shift; [ "$1" = version ] && { echo "Docker Compose version v2"; exit 0; }; '
                  'echo "compose $*" >>"$STAND_IN_LOG"; echo "stand-in output: forward"; exit 0; fi; '
                  'echo "docker $*" >>"$STAND_IN_LOG"',
        "docker-compose": 'echo "docker-compose: command not found" >&2; echo "MISSING docker-compose $*" >>"$STAND_IN_LOG"; exit 127',
    },
    # v1: the docker CLI has no compose command (an old one reads `compose up -d` as flags).
    "v1": {
        "docker": 'if [ "$1" = compose ]; then shift; [ "$1" = version ] && { echo "docker: unknown command: docker compose" >&2; exit 1; }; '
                  'echo "unknown shorthand flag: \'d\' in -d" >&2; echo "MISSING docker compose $*" >>"$STAND_IN_LOG"; exit 125; fi; '
                  'echo "docker $*" >>"$STAND_IN_LOG"',
        "docker-compose": 'echo "compose $*" >>"$STAND_IN_LOG"; echo "stand-in output: forward"',
    },
}


def compose_blocks(path):
    """(first line, lines) of every fenced block (not ```text) that calls Compose."""
    blocks, fence, lines, start = [], False, [], 0
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if line.startswith("```"):
                if fence and any(COMPOSE_CALL.search(text) for text in lines):
                    blocks.append((start, lines))
                fence = not fence
                lines, start, drawing = [], number + 1, line.strip() == "```text"
                continue
            if fence and not drawing:
                lines.append(line.rstrip("\n"))
    return blocks


def check_compose(files):
    """Runs each page's Compose blocks on both hosts; returns the failures as `page:line: why`."""
    failures, blocks = [], 0
    for page in files:
        where_page = os.path.relpath(page, ROOT)
        for start, lines in compose_blocks(page):
            blocks += 1
            where = f"{where_page}:{start}"
            run = [line for line in lines if not COMPOSE_NOT_RUN.match(line)]
            calls = [(match, line) for line in run if not re.match(r"^\s*compose\s*\(\)", line)
                     for match in COMPOSE_CALL.finditer(without_comment(line))]
            commands = [without_comment(line[match.end():]).split(";")[0].split("|")[0].split(")")[0].strip()
                        for match, line in calls]
            if any(word == "up" for command in commands for word in command.split()[:1]):
                last = commands[-1].split()
                if last[:1] != ["down"] or not ({"-v", "--volumes"} & set(last)):
                    failures.append(f"{where}: the block brings a cluster up but does not end with `down -v`, "
                                    f"which removes the volume holding its token (it ends with `{commands[-1]}`)")
            for host, stand_ins in STAND_IN.items():
                with tempfile.TemporaryDirectory(prefix="topocomm-compose-") as folder:
                    for name, body in stand_ins.items():
                        with open(os.path.join(folder, name), "w") as f:
                            f.write("#!/bin/sh\n" + body + "\n")
                        os.chmod(os.path.join(folder, name), 0o755)
                    log = os.path.join(folder, "calls")
                    open(log, "w").close()
                    env = dict(os.environ, PATH=folder + os.pathsep + os.environ["PATH"], STAND_IN_LOG=log)
                    result = subprocess.run(["bash", "-c", "\n".join(run)], cwd=ROOT, env=env,
                                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
                    with open(log) as f:
                        made = [line.strip() for line in f]
                    missing = [line for line in made if line.startswith("MISSING")]
                    reached = [line for line in made if line.startswith("compose ")]
                    if missing or len(reached) != len(commands) or result.returncode != 0:
                        said = "; ".join(missing) or result.stdout.decode(errors="replace").strip().splitlines()[-1:]
                        failures.append(f"{where}: on a host with only Compose {host}, {len(reached)} of the block's "
                                        f"{len(commands)} Compose commands ran (exit {result.returncode}): {said}")
    for failure in failures:
        print(f"COMPOSE   {failure}")
    # The compose file itself, read by the Compose this host has, if any.
    for compose in (["docker", "compose"], ["docker-compose"]):
        try:
            checked = subprocess.run(compose + ["-f", os.path.join(ROOT, "docker-compose.yml"), "config", "-q"],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if checked.returncode == 0:
            print(f"compose: docker-compose.yml read by this host's `{' '.join(compose)}`")
        elif compose == ["docker-compose"] or b"is not a docker command" not in checked.stdout and \
                b"unknown" not in checked.stdout:
            failures.append(f"docker-compose.yml: `{' '.join(compose)} config` refuses it: "
                            f"{checked.stdout.decode(errors='replace').strip()}")
            print(f"COMPOSE   {failures[-1]}")
    print(f"compose: {blocks} blocks run on Compose v2 and v1 stand-ins, {len(failures)} wrong")
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bin")
    parser.add_argument("--full", action="store_true")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--paths-only", action="store_true")
    parser.add_argument("files", nargs="*")
    args = parser.parse_args()
    files = args.files or [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
    map_failures = check_map(files) + check_compose(files)
    if args.paths_only:
        sys.exit(1 if map_failures else 0)
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
        for name in ("node", "proto", "docs", "deploy", "bench"):
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
          f"{long_skipped} long benchmarks not run (--full runs them); "
          f"the map: {len(map_failures)} wrong (MAP lines above)")
    sys.exit(1 if failed or map_failures else 0)


if __name__ == "__main__":
    main()
