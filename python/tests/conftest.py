"""Shared helpers of the Python tests: the CLI built beside the module (ATTNUM_BINARY, set by
ctest; default build/attnum) and the repository's data/ folder."""
import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BINARY = os.environ.get("ATTNUM_BINARY", str(ROOT / "build" / "attnum"))
DATA = Path(os.environ.get("ATTNUM_DATA_DIR", str(ROOT / "data")))
# A book from a Debian package that scripts/setup installs (Sherlock Holmes, one of the default texts).
BOOK = "/usr/share/gocode/src/github.com/pierrec/lz4/testdata/pg1661.txt"


def comparable(name, data):
    """A result file's bytes for comparing two runs: meta.json without its `run` block (the time,
    command line and machine of the run), summary.json without its `timings`, complete.json with
    the names of the files it covers but not their sizes and hashes (the files themselves are
    compared), every other file as it is."""
    if name not in ("meta.json", "summary.json", "complete.json"):
        return data
    doc = json.loads(data)
    if isinstance(doc, dict):
        if name == "meta.json":
            doc.pop("run", None)
        elif name == "summary.json":
            doc.pop("timings", None)
        elif isinstance(doc.get("files"), dict):
            doc["files"] = sorted(doc["files"])
    return json.dumps(doc, sort_keys=True).encode()


def cli(*args, json_out=False):
    """Runs the attnum CLI; returns stdout (parsed as JSON with json_out). Fails on exit != 0."""
    r = subprocess.run([BINARY, *map(str, args)], capture_output=True, text=True)
    assert r.returncode == 0, f"attnum {' '.join(map(str, args))}: exit {r.returncode}\n{r.stderr}"
    return json.loads(r.stdout) if json_out else r.stdout


@pytest.fixture(scope="session")
def attnum_cli():
    assert Path(BINARY).exists(), f"{BINARY}: the CLI is not built (scripts/build)"
    return cli
