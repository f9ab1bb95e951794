"""attnum.loss in this process: the CLI's files byte for byte, tables as dicts of NumPy arrays,
reference logits saved once and reused with the same numbers bit for bit, and bad requests
refused with the Python parameter names before any work."""
import json

import numpy as np
import pytest

import attnum
from conftest import DATA, cli, comparable

MODEL = DATA / "stories260K.bin"
ARGS = dict(kernels="fa3,sage1", conditions="plain,rotate,center", tokens=64, windows=2)
FLAGS = ["--kernel", "fa3,sage1", "--conditions", "plain,rotate,center", "--tokens", "64", "--windows", "2"]
FILES = ["loss.json", "loss.csv", "loss_paired.json", "loss_paired.csv", "complete.json"]


def test_loss_files_equal_the_cli(tmp_path):
    r = attnum.loss(MODEL, **ARGS, out=tmp_path / "py", quiet=True)
    cli("--quiet", "loss", "--model", MODEL, *FLAGS, "--out", tmp_path / "cli")
    for name in FILES:
        assert comparable(name, r.files[name]) == comparable(name, (tmp_path / "cli" / name).read_bytes()), name
    # Tables: one row per kernel and condition, the paired differences between conditions.
    rows = json.loads((tmp_path / "cli" / "loss.json").read_text())
    assert list(r.rows["kernel"]) == [x["kernel"] for x in rows] and len(rows) == 6
    assert r.rows["ppl_ratio"].dtype == np.float64 and r.rows["ppl_ratio"].tolist() == [x["ppl_ratio"] for x in rows]
    assert set(r.paired["condition_a"]) == {"rotate", "center"} and len(r.paired["delta_ce"]) == 4
    assert "LossResult(" in repr(r) and "6 rows" in repr(r)
    # A temporary folder (out=None) gives the same rows.
    t = attnum.loss(MODEL, **ARGS, quiet=True)
    assert t.out is None and t.files["loss.json"] == r.files["loss.json"]


def test_saved_reference_gives_the_same_numbers_bit_for_bit(tmp_path):
    ref = tmp_path / "ref.safetensors"
    computed = attnum.loss(MODEL, **ARGS, quiet=True)
    saved = attnum.loss(MODEL, **ARGS, save_reference=ref, quiet=True)
    reused = attnum.loss(MODEL, **ARGS, reference_file=ref, quiet=True)
    for name in ("loss.json", "loss_paired.json"):
        assert saved.files[name] == computed.files[name] == reused.files[name], name
    # The CLI reads the file Python saved: the same rows again.
    got = cli("--quiet", "loss", "--model", MODEL, *FLAGS, "--reference-file", ref, "--json", json_out=True)
    assert got == json.loads(computed.files["loss.json"])
    # One window of the two: the file serves any subset of its windows.
    one = attnum.loss(MODEL, **dict(ARGS, windows=1), reference_file=ref, quiet=True)
    assert one.files["loss.json"] == attnum.loss(MODEL, **dict(ARGS, windows=1), quiet=True).files["loss.json"]
    # Another run's reference is refused, naming the field and the parameter.
    with pytest.raises(ValueError, match=r"reference_file .*reference bf16 -> this run fp64"):
        attnum.loss(MODEL, **ARGS, reference="fp64", reference_file=ref, quiet=True)
    with pytest.raises(ValueError, match=r"n_tokens 64 -> this run 32"):
        attnum.loss(MODEL, **dict(ARGS, tokens=32), reference_file=ref, quiet=True)
    with pytest.raises(ValueError, match=r"save_reference or reference_file, not both"):
        attnum.loss(MODEL, **ARGS, save_reference=tmp_path / "b", reference_file=ref, quiet=True)


def test_refused_before_any_work(tmp_path):
    with pytest.raises(ValueError, match=r"'rotate' is given twice"):
        attnum.loss(MODEL, conditions="plain,rotate,rotate", out=tmp_path / "l", quiet=True)
    with pytest.raises(ValueError, match=r"did you mean 'rotate'"):
        attnum.loss(MODEL, conditions="plain,rotat", out=tmp_path / "l", quiet=True)
    with pytest.raises(ValueError, match=r"texts or token_ids, not both"):
        attnum.loss(MODEL, texts=[MODEL], token_ids=[MODEL], out=tmp_path / "l", quiet=True)
    with pytest.raises(ValueError, match=r"windows must be positive"):
        attnum.loss(MODEL, windows=0, out=tmp_path / "l", quiet=True)
    assert not (tmp_path / "l").exists()
