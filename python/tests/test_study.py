"""attnum.capture, load_capture, heads and study in this process: the same files as the CLI, byte
for byte, tables as dicts of NumPy arrays, writers that reproduce the files, bad combinations
refused before any work."""
import numpy as np
import pytest

import attnum
from conftest import BOOK, DATA, cli, comparable

ZOO = dict(zoo=True, layers=1, texts=2, n_tok=64)
ZOO_FLAGS = ["--zoo", "--layers", "1", "--texts", "2", "--n-tok", "64"]


def test_heads_files_equal_the_cli(tmp_path):
    r = attnum.heads(**ZOO, kernels=["fa3", "sage1"], out=tmp_path / "py", quiet=True)
    cli("heads", "--quiet", *ZOO_FLAGS, "--kernel", "fa3,sage1", "--out", tmp_path / "cli")
    names = ["rows.csv", "rows.jsonl", "heads.csv", "heads.jsonl", "summary.json", "meta.json", "zoo_heads.csv"]
    for name in names:
        assert comparable(name, r.files[name]) == comparable(name, (tmp_path / "cli" / name).read_bytes()), name
    assert r.summary == cli("heads", "--quiet", *ZOO_FLAGS, "--kernel", "fa3,sage1", "--json", json_out=True)
    # Tables: dicts of arrays, one entry per line of the JSONL files.
    n_rows = len((tmp_path / "cli" / "rows.jsonl").read_text().splitlines())
    assert len(r.rows["rel_err"]) == n_rows and r.rows["rel_err"].dtype == np.float64
    assert set(r.heads["kernel"]) == {"fa3", "sage1"}
    # The writers give the CLI's bytes; a temporary folder (out=None) the same files.
    r.to_csv(tmp_path / "csv")
    r.to_json(tmp_path / "json")
    for name in names:
        sub = "csv" if name.endswith(".csv") else "json"
        assert comparable(name, (tmp_path / sub / name).read_bytes()) == comparable(name, (tmp_path / "cli" / name).read_bytes()), name
    t = attnum.heads(**ZOO, kernels="fa3,sage1", quiet=True)
    assert t.out is None and t.files["rows.csv"] == r.files["rows.csv"]
    assert "StudyResult(" in repr(t)


def test_heads_predictor_version_v2_equals_the_cli(tmp_path):
    # predictor_version="v2" is the CLI's --predictor-version v2: the same files, v2's string
    # recorded; a bad name is refused like the CLI's.
    r = attnum.heads(**ZOO, kernels="sage2pp-sm89", predictor_version="v2", out=tmp_path / "py", quiet=True)
    cli("heads", "--quiet", *ZOO_FLAGS, "--kernel", "sage2pp-sm89", "--predictor-version", "v2", "--out",
        tmp_path / "cli")
    for name in ["rows.csv", "heads.jsonl", "summary.json", "meta.json"]:
        assert comparable(name, r.files[name]) == comparable(name, (tmp_path / "cli" / name).read_bytes()), name
    assert {s["predictor_version"] for s in r.summary} == {"rn3-shared-rounding-2026.12"}
    with pytest.raises(ValueError, match=r"--predictor-version|predictor_version"):
        attnum.heads(**ZOO, predictor_version="v9", quiet=True)


def test_capture_and_load_capture_equal_the_cli(tmp_path):
    caps = attnum.capture(DATA / "stories260K.bin", [BOOK], out=tmp_path / "py", tokens=64, quiet=True)
    paths = cli("--quiet", "capture", "--model", DATA / "stories260K.bin", "--text", BOOK, "--tokens", "64",
                "--out", tmp_path / "cli").split()
    assert len(caps) == len(paths) == 1
    assert open(caps[0].path, "rb").read() == open(paths[0], "rb").read()
    c = attnum.load_capture(paths[0])
    assert c.n_layer == 5 and c.layers[1]["q"].shape == (8, 64, 8) and c.layers[1]["k"].shape == (4, 64, 8)
    assert c.layers[1]["q"].dtype == np.float32 and c.dtypes["layers.1.q"] == "BF16"
    assert "model" in c.metadata or c.metadata
    # One layer: Python's attend on the loaded tensors = the CLI's attend on FILE:TENSOR.
    got = attnum.attend(c.layers[1]["q"], c.layers[1]["k"], c.layers[1]["v"], kernel="fa3", stages=False)
    want = cli("attend", "--q", f"{paths[0]}:layers.1.q", "--k", f"{paths[0]}:layers.1.k", "--v",
               f"{paths[0]}:layers.1.v", "--kernel", "fa3", "--json", json_out=True)
    assert [w["rel_err"] for w in want] == got.rel_err.tolist()
    with pytest.raises(ValueError, match=r"no such|cannot|expected"):
        attnum.load_capture(tmp_path / "missing.safetensors")


def test_refused_before_any_work(tmp_path):
    for conditions, msg in (("plain,rotate,rotate", r"conditions: 'rotate' is given twice"),
                            (["plain"], r"conditions plain: the study compares each transform with plain"),
                            ("plain,rotat", r"did you mean 'rotate'")):
        with pytest.raises(ValueError, match=msg):
            attnum.heads(**ZOO, conditions=conditions, out=tmp_path / "h", quiet=True)
        with pytest.raises(ValueError, match=msg):
            attnum.study(conditions=conditions, out=tmp_path / "s", quiet=True)
    assert not (tmp_path / "h").exists() and not (tmp_path / "s").exists()
    with pytest.raises(ValueError, match=r"exactly one of zoo=True or captures"):
        attnum.heads(quiet=True)
    with pytest.raises(ValueError, match=r"texts=0: expected a count >= 1"):
        attnum.heads(zoo=True, texts=0, quiet=True)



def test_study_runs_to_completion_and_equals_the_cli(tmp_path):
    # The whole pipeline in this process on a real checkpoint (captures, heads, predictor, loss,
    # P-cast; no report: its assets come from the build tree), small enough for a unit test.
    text = BOOK  # 64-token windows through the book's body until about 3,072 labels
    args = dict(kernels="fa3", conditions="plain,rotate", tokens=64, report=False)
    r = attnum.study(DATA / "stories260K.bin", [text], **args, out=tmp_path / "py", quiet=True)
    cli("study", "--quiet", "--model", DATA / "stories260K.bin", "--text", text, "--kernels", "fa3",
        "--conditions", "plain,rotate", "--tokens", "64", "--no-report", "--out", tmp_path / "cli")
    cli_files = {p.relative_to(tmp_path / "cli").as_posix(): p.read_bytes()
                 for p in (tmp_path / "cli").rglob("*") if p.is_file()}
    assert "summary.json" in r.files and any(k.startswith("loss/") for k in r.files), sorted(r.files)
    # The files name their own folder (capture paths): the two runs' folders differ by design.
    here, there = str(tmp_path / "py").encode(), str(tmp_path / "cli").encode()
    for name, data in r.files.items():
        assert name in cli_files, name
        base = name.rsplit("/", 1)[-1]
        assert comparable(base, data.replace(here, there)) == comparable(base, cli_files[name]), name
    assert r.summary["loss"] if "loss" in r.summary else r.summary
    # The step times: the linear layers' part of the loss forwards, within the loss step's time.
    t = r.summary["timings"]
    assert {"capture_s", "heads_s", "loss_s", "loss_linear_s", "pcast_s", "total_s"} <= set(t), t
    assert 0 < t["loss_linear_s"] <= t["loss_s"] <= t["total_s"], t
