"""bench/random_checkpoint.py: the random-weight Qwen2.5-shaped checkpoints of the large-model
measurements (docs/scaleout.md)."""
import importlib.util
import json
import math
import struct
import subprocess
import sys

import numpy as np
import pytest

from conftest import BOOK, ROOT, cli

SCRIPT = ROOT / "bench" / "random_checkpoint.py"


def module():
    spec = importlib.util.spec_from_file_location("random_checkpoint", SCRIPT)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


@pytest.mark.parametrize("shape,params", [
    # The parameter counts of Qwen2.5-0.5B, -1.5B and -7B as their model cards and safetensors
    # metadata state them: the shapes are the released models' own.
    ("0.5b", 494_032_768), ("1.5b", 1_543_714_304), ("7b", 7_615_616_512)])
def test_shapes_are_the_released_models(shape, params):
    m = module()
    assert sum(math.prod(s) for _, s in m.tensor_shapes(m.config(shape, 0))) == params


def test_a_written_checkpoint_loads_and_runs(tmp_path):
    out = tmp_path / "ckpt"
    r = subprocess.run([sys.executable, SCRIPT, "--shape", "0.5b", "--layers", "1", "--shards", "2", out],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    index = json.loads((out / "model.safetensors.index.json").read_text())
    files = sorted(set(index["weight_map"].values()))
    assert len(files) == 2
    stored = 0
    for f in files:  # every tensor BF16, back to back, the index's total the shards' bytes
        data = (out / f).read_bytes()
        n = struct.unpack("<Q", data[:8])[0]
        header = json.loads(data[8:8 + n])
        ends = sorted(t["data_offsets"] for t in header.values())
        assert all(t["dtype"] == "BF16" for t in header.values())
        assert ends[0][0] == 0 and all(a[1] == b[0] for a, b in zip(ends, ends[1:]))
        assert ends[-1][1] == len(data) - 8 - n
        stored += ends[-1][1]
    assert stored == index["metadata"]["total_size"]
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["num_hidden_layers"] == 1 and cfg["hidden_size"] == 896
    rows = cli("loss", "--model", out, "--text", BOOK, "--tokens", "16", "--conditions", "plain", "--kernel", "fa3",
               "--json", json_out=True)
    assert len(rows) == 1 and np.isfinite(rows[0]["ppl_ratio"]), rows


def test_refuses_a_folder_in_use(tmp_path):
    (tmp_path / "keep.txt").write_text("mine")
    r = subprocess.run([sys.executable, SCRIPT, "--shape", "0.5b", "--layers", "1", tmp_path],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "not empty" in r.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]
