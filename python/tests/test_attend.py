"""attnum.attend equals `attnum attend` bit for bit (output, per-head metrics, stage attribution)
for every preset; attnum.reference equals an independent NumPy fp64 attention."""
import json
import math
import subprocess
import warnings

import numpy as np
import pytest

import attnum

CONDITIONS = ["plain", "rotate", "center", "center+rotate"]


def layer(seed, n_head=4, n_head_kv=2, n_tok=48, d=64, n_kv=None):
    rng = np.random.default_rng(seed)
    n_kv = n_tok if n_kv is None else n_kv
    q = rng.standard_normal((n_head, n_tok, d), dtype=np.float32)
    k = rng.standard_normal((n_head_kv, n_kv, d), dtype=np.float32) * np.float32(1.5)
    k[:, :, 3] += np.float32(6)  # an outlier channel: centering and rotation change something
    v = rng.standard_normal((n_head_kv, n_kv, d), dtype=np.float32)
    return q, k, v


def numpy_reference(q, k, v, causal):
    n_head, n_q, d = q.shape
    group = n_head // k.shape[0]
    n_kv = k.shape[1]
    out = np.zeros(q.shape)
    for h in range(n_head):
        s = q[h].astype(np.float64) @ k[h // group].astype(np.float64).T / math.sqrt(d)
        if causal:
            i, j = np.indices(s.shape)
            s[j > i + n_kv - n_q] = -np.inf
        p = np.exp(s - s.max(axis=1, keepdims=True))
        out[h] = (p / p.sum(axis=1, keepdims=True)) @ v[h // group].astype(np.float64)
    return out


@pytest.mark.parametrize("preset", attnum._core.preset_names())
def test_every_preset_equals_cli(attnum_cli, tmp_path, preset):
    names = attnum._core.preset_names()
    i = names.index(preset)
    condition = CONDITIONS[i % 4]
    causal = i % 3 != 2
    q, k, v = layer(100 + i)
    for name, a in (("q", q), ("k", k), ("v", v)):
        np.save(tmp_path / f"{name}.npy", a)
    args = ["attend", "--q", tmp_path / "q.npy", "--k", tmp_path / "k.npy", "--v", tmp_path / "v.npy",
            "--kernel", preset, "--condition", condition, "--json", "--stages", "--out", tmp_path / "o.npy"]
    if not causal:
        args.append("--no-causal")
    rows = attnum_cli(*args, json_out=True)
    want_o = np.load(tmp_path / "o.npy")
    r = attnum.attend(q, k, v, kernel=preset, condition=condition, causal=causal)
    assert r.o.dtype == np.float32 and r.o.shape == q.shape
    np.testing.assert_array_equal(r.o.view(np.uint32), want_o.view(np.uint32))
    assert r.condition == condition and r.kernel["name"] == preset
    got = r.rows()
    assert len(got) == len(rows) == q.shape[0]
    for g, w in zip(got, rows):
        for key in ("head", "kv_head", "kernel", "condition", "p_count", "p_underflow", "p_saturated", "nan_flagged"):
            assert g[key] == w[key], (key, g[key], w[key])
        for key in ("rel_err", "log_err", "cosine", "max_row_err"):
            assert g[key] == w[key], (key, g[key], w[key])  # JSON keeps doubles exact
        assert set(g["stage_rel_err"]) == set(w["stage_rel_err"])
        for st, val in w["stage_rel_err"].items():
            assert g["stage_rel_err"][st] == val, (st, g["stage_rel_err"][st], val)
    assert [int(x) for x in r.kv_head] == [h // 2 for h in range(4)]


def test_knobs_and_rotation_seed_equal_cli(attnum_cli, tmp_path):
    q, k, v = layer(5, n_head=2, n_head_kv=1, n_tok=40)
    for name, a in (("q", q), ("k", k), ("v", v)):
        np.save(tmp_path / f"{name}.npy", a[0] if name == "q" else a)
    # 2-D q: one head; the output comes back 2-D like the CLI's.
    rows = attnum_cli("attend", "--q", tmp_path / "q.npy", "--k", tmp_path / "k.npy", "--v", tmp_path / "v.npy",
                      "--kernel", "fa3", "--knob", "p_mode=multiply", "--knob", "p_scale=448", "--knob", "reverse=false", "--condition", "rotate",
                      "--seed", "77", "--json", "--out", tmp_path / "o.npy", json_out=True)
    r = attnum.attend(q[0], k, v, kernel="fa3", knobs={"p_mode": "multiply", "p_scale": 448, "reverse": False}, condition="rotate",
                      rotation=77, stages=False)
    assert r.o.shape == q[0].shape and r.stages == {}
    np.testing.assert_array_equal(r.o.view(np.uint32), np.load(tmp_path / "o.npy").view(np.uint32))
    assert r.rel_err[0] == rows[0]["rel_err"]
    assert r.kernel["p_scale"] == 448 and r.kernel["reverse"] is False
    # The seed matters (else the test above could not fail for a wrong seed).
    other = attnum.attend(q[0], k, v, kernel="fa3", knobs=["p_mode=multiply", "p_scale=448", "reverse=false"], condition="rotate",
                          rotation="random-hadamard:78", stages=False)
    assert not np.array_equal(other.o, r.o)


@pytest.mark.parametrize("causal", [True, False])
def test_reference_equals_numpy(causal):
    q, k, v = layer(9, n_tok=24, n_kv=40, d=32)
    got = attnum.reference(q, k, v, causal=causal)
    assert got.dtype == np.float64 and got.shape == q.shape
    np.testing.assert_allclose(got, numpy_reference(q, k, v, causal), rtol=0, atol=1e-12)


def test_exact_kernel_equals_reference_and_errors_are_measured():
    q, k, v = layer(11)
    ref = attnum.reference(q, k, v)
    r = attnum.attend(q, k, v, kernel="fp32", stages=False)
    assert np.all(r.rel_err < 1e-6)
    r8 = attnum.attend(q, k, v, kernel="fa3")
    # rel_err is what it says: ||O - O_ref|| / ||O_ref|| per head.
    want = np.linalg.norm((r8.o - ref).reshape(4, -1), axis=1) / np.linalg.norm(ref.reshape(4, -1), axis=1)
    np.testing.assert_allclose(r8.rel_err, want, rtol=1e-12)
    assert np.all(r8.rel_err > 1e-3)
    assert set(r8.stages) >= {"qk_cast", "p_cast", "all"}
    np.testing.assert_array_equal(r8.stages["all"], r8.rel_err)


def test_predict_tracks_the_observed_error():
    # Heads with increasingly strong shared keys: the predictor's expected rel_err follows the
    # measured one (no fitted parameter; the same computation as the head study's).
    rng = np.random.default_rng(21)
    n_head, n, d = 8, 64, 64
    q = rng.standard_normal((n_head, n, d), dtype=np.float32)
    k = rng.standard_normal((n_head, n, d), dtype=np.float32)
    v = rng.standard_normal((n_head, n, d), dtype=np.float32)
    for h in range(n_head):
        k[h] += np.float32(0.5 * h) * rng.standard_normal(d).astype(np.float32)
    for kernel in ("fa3", "sage2pp-sm89"):
        pred = attnum.predict(q, k, v, kernel=kernel, condition="plain")
        obs = attnum.attend(q, k, v, kernel=kernel, stages=False).rel_err
        assert pred.shape == (n_head,) and np.all(np.isfinite(pred)) and np.all(pred > 0)
        ratio = pred / obs
        assert np.all((ratio > 0.33) & (ratio < 3)), (kernel, ratio)
    rot = attnum.predict(q, k, v, kernel="fa3", condition="rotate")
    assert not np.array_equal(rot, attnum.predict(q, k, v, kernel="fa3", condition="plain"))


def test_threads_do_not_change_bits():
    q, k, v = layer(13, n_head=8, n_head_kv=2, n_tok=96)
    attnum.set_threads(1)
    one = attnum.attend(q, k, v, kernel="sage2pp-sm89", condition="center+rotate", stages=False)
    attnum.set_threads(2)
    assert attnum.threads() == 2
    two = attnum.attend(q, k, v, kernel="sage2pp-sm89", condition="center+rotate", stages=False)
    attnum.set_threads(0)
    np.testing.assert_array_equal(one.o.view(np.uint32), two.o.view(np.uint32))
    np.testing.assert_array_equal(one.rel_err, two.rel_err)


@pytest.mark.parametrize("kernel", ["fa3", "sage2pp-sm89", "bf16"])
def test_measure_false_runs_only_the_kernel(kernel):
    q, k, v = layer(21, n_head=4, n_head_kv=2, n_tok=80)
    full = attnum.attend(q, k, v, kernel=kernel, condition="rotate")
    bare = attnum.attend(q, k, v, kernel=kernel, condition="rotate", measure=False)
    np.testing.assert_array_equal(full.o.view(np.uint32), bare.o.view(np.uint32))
    for name in ("p_count", "p_underflow", "p_saturated", "nan_flagged"):
        np.testing.assert_array_equal(getattr(full, name), getattr(bare, name))
    assert np.all(np.isfinite(full.rel_err)) and full.stages
    for name in ("rel_err", "log_err", "cosine", "max_row_err"):
        assert np.all(np.isnan(getattr(bare, name))), name
    assert bare.stages == {}


def test_kernels_are_the_cli_json(attnum_cli):
    want = attnum_cli("kernels", "--json", json_out=True)
    got = attnum.kernels()
    assert got == want
    assert {"fa3", "sage2pp-sm89", "generic"} <= {x["name"] for x in got}
    assert attnum.kernel("fa3", {"p_mode": "multiply", "p_scale": 448})["p_scale"] == 448


def _huge_scores(n=8, d=16):
    # The shape of the CLI test NonFiniteWeightsRefusedAndNonFiniteOutputsFlagged: |q.k / sqrt(d)| * log2 e
    # reaches about 8e10, beyond the 2^31 the kernels' fp32 softmax can take.
    i = np.arange(n * d)
    q = (np.where(i % 3 == 0, -1.2e10, 1.2e10) * (1 + i % 5)).astype(np.float32).reshape(1, n, d)
    k = ((i % 7 - 3) * 0.5).astype(np.float32).reshape(1, n, d)
    v = ((i % 5 - 2) * 0.25).astype(np.float32).reshape(1, n, d)
    return q, k, v


def _exp2_arg_max(q, k):
    # max over rows of |row max of q.k / sqrt(d)| * log2 e, causal, in fp64 (plain NumPy)
    s = q[0].astype(np.float64) @ k[0].astype(np.float64).T / math.sqrt(q.shape[-1])
    s[np.triu_indices(s.shape[0], 1)] = -np.inf
    return float(np.max(np.abs(s.max(axis=1))) * math.log2(math.e))


@pytest.mark.parametrize("kernel", ["fa3", "fp32"])
def test_large_scores_warn_with_the_cli_text(tmp_path, kernel):
    from conftest import BINARY

    q, k, v = _huge_scores()
    for name, a in (("q", q), ("k", k), ("v", v)):
        np.save(tmp_path / f"{name}.npy", a)
    p = subprocess.run([BINARY, "attend", "--q", tmp_path / "q.npy", "--k", tmp_path / "k.npy", "--v",
                        tmp_path / "v.npy", "--kernel", kernel, "--json"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    cli_warnings = [l[len("warning: "):] for l in p.stderr.splitlines() if l.startswith("warning: ")]
    assert len(cli_warnings) == 1 and "beyond 2^31" in cli_warnings[0], p.stderr
    rows = json.loads(p.stdout)
    assert rows[0]["exp2_arg_max"] == pytest.approx(_exp2_arg_max(q, k), rel=1e-12)
    with pytest.warns(attnum.AttnumWarning) as rec:
        attnum.attend(q, k, v, kernel=kernel, stages=False)
    assert [str(w.message) for w in rec] == cli_warnings  # the same text, and only it (as the CLI)
    with pytest.warns(attnum.AttnumWarning) as rec:
        attnum.attend(q[None], k[None], v[None], kernel=kernel, stages=False)  # batched [1, h, t, d]
    assert [str(w.message) for w in rec] == cli_warnings
    # Scores below 2^31: no warning; measure=False (no reference, so no exp2_arg_max): none either.
    with warnings.catch_warnings():
        warnings.simplefilter("error", attnum.AttnumWarning)
        attnum.attend(q * np.float32(1e-4), k, v, kernel=kernel, stages=False)
        if kernel == "fa3":
            attnum.attend(q, k, v, kernel=kernel, stages=False, measure=False)
