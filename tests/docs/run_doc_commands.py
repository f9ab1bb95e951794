#!/usr/bin/env python3
"""Runs every command shown in README.md, docs/python.md and docs/predictor.md as written (ctest
label docs).

The convention these documents follow, which this test relies on:
  * A command is a line of a code block (a block indented by four spaces, or a fenced block
    tagged sh, bash, shell or console) that starts with `build/attnum`, `scripts/`, `python`,
    `/usr/bin/python3` or `PYTHONPATH=`; a line `A && B` is the commands A and B. A command runs
    in the checkout's top folder (a scratch copy of it: links to its files, so results/ written
    by a command lands in the scratch folder), at the default thread count.
  * A fenced block tagged `text` that follows a fenced command block with only blank lines between
    is the output of that block's last command: each of its non-blank lines must be a line of the
    command's standard output (spaces at the ends ignored).
  * A block's commands run in order; once a command that makes something is skipped (a /models/
    file, shell variables, mpirun, pip), the rest of that block is skipped too (they use what it
    would have made). Skipping scripts/setup, scripts/build, scripts/test or scripts/fuzz does not
    skip what follows them.
Skipped, each with the reason printed: scripts/test (it runs this test), scripts/setup (installs
packages), scripts/build (the tree under test is already built), scripts/fuzz (its own clang
build, half an hour), pip installs (they compile the library again; scripts/test installs the
package itself), commands naming a file under /models/ that this machine lacks, commands using
shell variables (a scheduler's), mpirun.
Scaled, as stated: `build/attnum study` on the synthetic zoo (no --model) takes minutes, so it runs
with `--zoo-tokens 64 --zoo-layers 1` appended, and its output is not compared with a table.
Machine-dependent tables: a line `<!-- docs-test: forward_simd X -->` between a command block and
its `text` block says the table's numbers came from a model forward whose GEMMs ran Eigen's X
kernels (`attnum version`'s forward_simd). Where this build's differ, the forward's last bits
differ and so do the numbers computed from it: the table's lines are compared with every number
masked (the rows, columns and words must match), and the test says so.

Usage: run_doc_commands.py --root CHECKOUT --build BUILD_DIR [--list] [FILES...]
Exit status 0 when every command that runs exits 0 and every table matches; 1 otherwise."""
import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

PREFIXES = ("build/attnum", "scripts/", "python", "/usr/bin/python3", "PYTHONPATH=")
FENCE_SH = {"sh", "bash", "shell", "console"}
MARKER = re.compile(r"^<!--\s*docs-test:\s*forward_simd\s+(\S+)\s*-->\s*$")
NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")


def masked(line):
    """The line with every number replaced by # and runs of spaces by one."""
    return " ".join(NUMBER.sub("#", line).split())


def blocks(text):
    """Yields (kind, lines, tag) in order: kind 'code' (indented or fenced) or 'prose'."""
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        m = re.match(r"^```\s*([A-Za-z0-9_+-]*)\s*$", line)
        if m:
            tag = m.group(1).lower()
            body = []
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                body.append(lines[i])
                i += 1
            i += 1
            yield ("fenced", body, tag)
            continue
        if line.startswith("    ") and (i == 0 or lines[i - 1].strip() == ""):
            body = []
            while i < len(lines) and (lines[i].startswith("    ") or lines[i].strip() == ""):
                if lines[i].strip() == "" and not (i + 1 < len(lines) and lines[i + 1].startswith("    ")):
                    break
                body.append(lines[i][4:])
                i += 1
            yield ("indented", body, "")
            continue
        yield ("blank" if line.strip() == "" else "prose", [line], "")
        i += 1


def commands_of(lines):
    out = []
    for line in lines:
        s = line.strip()
        if s.startswith("$ "):
            s = s[2:]
        for part in [p.strip() for p in s.split("&&")]:
            if part.startswith(PREFIXES):
                out.append(part)
    return out


def extract(path):
    """[(commands, expected_lines or None)] per command block of a document."""
    text = open(path, encoding="utf-8").read()
    items = list(blocks(text))
    result = []
    k = 0
    while k < len(items):
        kind, lines, tag = items[k]
        is_cmd = kind == "indented" or (kind == "fenced" and tag in FENCE_SH)
        cmds = commands_of(lines) if is_cmd else []
        if cmds:
            expected, forward = None, None
            if kind == "fenced":
                j = k + 1
                while j < len(items) and (items[j][0] == "blank" or (items[j][0] == "prose" and MARKER.match(items[j][1][0]))):
                    if items[j][0] == "prose":
                        forward = MARKER.match(items[j][1][0]).group(1)
                    j += 1
                if j < len(items) and items[j][0] == "fenced" and items[j][2] == "text":
                    expected = [l.strip() for l in items[j][1] if l.strip()]
            result.append((cmds, expected, forward))
        k += 1
    return result


def skip_reason(cmd):
    words = cmd.split()
    first = words[0]
    if first.startswith("scripts/test"):
        return "scripts/test runs this test"
    if first.startswith("scripts/setup"):
        return "scripts/setup installs packages"
    if first.startswith("scripts/build"):
        return "the tree under test is already built"
    if first.startswith("scripts/fuzz"):
        return "scripts/fuzz makes its own clang build and runs for half an hour"
    if "pip install" in cmd or re.search(r"\bpip\b.*\binstall\b", cmd):
        return "pip install compiles the library again (scripts/test installs the package)"
    if first == "mpirun" or "mpirun" in words:
        return "mpirun"
    if "$" in cmd:
        return "uses shell variables (a scheduler's)"
    for w in words:
        if w.startswith("/models/") and not os.path.exists(w):
            return f"needs {w}, which this machine lacks"
    return None


def scaled(cmd):
    """(command to run, note) for commands README says take minutes."""
    w = shlex.split(cmd)
    if len(w) >= 2 and w[0] == "build/attnum" and "study" in w and "--model" not in w:
        return cmd + " --zoo-tokens 64 --zoo-layers 1", "scaled: --zoo-tokens 64 --zoo-layers 1 (the full zoo study takes minutes)"
    return cmd, None


def scratch_copy(root, build):
    root = os.path.abspath(root)
    d = tempfile.mkdtemp(prefix="attnum_docs_")
    for name in os.listdir(root):
        if name == "results" or name.startswith((".", "build")):
            continue
        os.symlink(os.path.join(root, name), os.path.join(d, name))
    os.symlink(os.path.abspath(build), os.path.join(d, "build"))
    return d


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--list", action="store_true", help="print the commands and exit")
    ap.add_argument("files", nargs="*", default=["README.md", "docs/python.md", "docs/predictor.md"])
    a = ap.parse_args()
    plan = []
    for f in a.files:
        for cmds, expected, forward in extract(os.path.join(a.root, f)):
            plan.append((f, cmds, expected, forward))
    if a.list:
        for f, cmds, expected, forward in plan:
            for c in cmds:
                print(f"{f}: {c}" + (f"   [skip: {skip_reason(c)}]" if skip_reason(c) else ""))
            if expected:
                print(f"{f}:   table of {len(expected)} lines")
        return 0
    here = json.loads(subprocess.run([os.path.join(a.build, "attnum"), "version", "--json"], capture_output=True,
                                     text=True, check=True).stdout)["forward_simd"]
    work = scratch_copy(a.root, a.build)
    failures = 0
    ran = 0
    t_all = time.time()
    try:
        for f, cmds, expected, forward in plan:
            skipping = None
            for n, cmd in enumerate(cmds):
                reason = skipping or skip_reason(cmd)
                if reason:
                    print(f"skip  {f}: {cmd}  ({reason})", flush=True)
                    if not cmd.startswith(("scripts/setup", "scripts/build", "scripts/test", "scripts/fuzz")):
                        skipping = skipping or "follows a skipped command of its block"
                    continue
                run, note = scaled(cmd)
                t0 = time.time()
                p = subprocess.run(["bash", "-c", run], cwd=work, capture_output=True, text=True, timeout=900)
                ran += 1
                dt = time.time() - t0
                status = "ok" if p.returncode == 0 else f"FAIL (exit {p.returncode})"
                print(f"{status:4}  {f}: {run}  [{dt:.0f} s]" + (f"  ({note})" if note else ""), flush=True)
                if p.returncode != 0:
                    failures += 1
                    sys.stdout.write(p.stdout[-4000:] + p.stderr[-4000:] + "\n")
                    break
                if expected and n == len(cmds) - 1:
                    if note:
                        print(f"      table not compared ({note})")
                        continue
                    got = {l.strip() for l in p.stdout.split("\n")}
                    want = expected
                    if forward and forward != here:
                        print(f"      numbers not compared: the table's came from Eigen's {forward} forward GEMMs, "
                              f"this build's are {here}; lines compared with every number masked")
                        got, want = {masked(l) for l in got}, [masked(l) for l in expected]
                    missing = [l for l in want if l not in got]
                    if missing:
                        failures += 1
                        print(f"FAIL  {f}: {len(missing)} of {len(expected)} table lines not in the output, first:\n"
                              f"      {missing[0]}")
                        sys.stdout.write(p.stdout[-4000:] + "\n")
                    else:
                        print(f"      table: {len(expected)} lines match")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"docs: {ran} commands run, {failures} failure(s), {time.time() - t_all:.0f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
