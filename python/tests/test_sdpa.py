"""attend in PyTorch's conventions: [B, H, S, D] batches, softmax_scale, the causal default,
rotations as arrays, the CLI's warnings as Python warnings, lazy stages, a short repr, torch in /
torch out for every field, bfloat16 as torch.bfloat16 or uint16 bit patterns, and errors that
name Python parameters."""
import inspect
import math
import warnings

import numpy as np
import pytest

import attnum

torch = pytest.importorskip("torch")


def qkv(seed=0, n_head=4, n_head_kv=2, n=32, d=64, bf16=True):
    rng = np.random.default_rng(seed)
    arrs = [rng.standard_normal((h, n, d), dtype=np.float32) for h in (n_head, n_head_kv, n_head_kv)]
    if bf16:  # values a bf16 transform keeps (no warning)
        arrs = [torch.from_numpy(a).to(torch.bfloat16).float().numpy() for a in arrs]
    return arrs


def test_batch_is_independent_sequences():
    parts = [qkv(s) for s in range(3)]
    q, k, v = (np.stack([p[i] for p in parts]) for i in range(3))
    r = attnum.attend(q, k, v, kernel="sage2pp-sm89", condition="rotate", stages=True)
    assert r.o.shape == q.shape and r.rel_err.shape == (3, 4) and r.stages["p_cast"].shape == (3, 4)
    for b, (qb, kb, vb) in enumerate(parts):
        one = attnum.attend(qb, kb, vb, kernel="sage2pp-sm89", condition="rotate", stages=True)
        np.testing.assert_array_equal(r.o[b].view(np.uint32), one.o.view(np.uint32))
        np.testing.assert_array_equal(r.rel_err[b], one.rel_err)
        np.testing.assert_array_equal(r.stages["p_cast"][b], one.stages["p_cast"])
    assert len(r.rows()) == 12
    with pytest.raises(ValueError, match=r"batch sizes 3, 2, 3 differ"):
        attnum.attend(q, k[:2].copy(), v)


def test_softmax_scale_and_causal_default():
    q, k, v = qkv(1)
    sig = inspect.signature(attnum.attend).parameters
    assert sig["causal"].default is True and sig["softmax_scale"].default is None and sig["stages"].default is None
    assert "causal=True" in attnum.attend.__doc__
    base = attnum.attend(q, k, v, kernel="fa3", stages=False)
    same = attnum.attend(q, k, v, kernel="fa3", stages=False, softmax_scale=1 / math.sqrt(64))
    np.testing.assert_array_equal(base.o, same.o)
    with pytest.raises(ValueError, match=r"softmax_scale=0.5: .*1/sqrt\(d_head\) = 0.125"):
        attnum.attend(q, k, v, softmax_scale=0.5)
    # causal=False is PyTorch's is_causal=False: the fp64 reference it measures against is non-causal.
    nc = attnum.attend(q, k, v, kernel="fp32", causal=False, stages=False)
    ref = attnum.reference(q, k, v, causal=False)
    err = np.linalg.norm(nc.o[0] - ref[0]) / np.linalg.norm(ref[0])
    assert err == pytest.approx(nc.rel_err[0], rel=1e-6)


def test_rotation_as_array(tmp_path):
    q, k, v = qkv(2, d=80)
    rng = np.random.default_rng(5)
    r_mat, _ = np.linalg.qr(rng.standard_normal((80, 80)))
    np.save(tmp_path / "r.npy", r_mat)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", attnum.AttnumWarning)
        a = attnum.attend(q, k, v, kernel="fa3", condition="rotate", rotation=r_mat, stages=False)
        b = attnum.attend(q, k, v, kernel="fa3", condition="rotate", rotation=str(tmp_path / "r.npy"), stages=False)
        t = attnum.attend(q, k, v, kernel="fa3", condition="rotate", rotation=torch.from_numpy(r_mat), stages=False)
    np.testing.assert_array_equal(a.o, b.o)
    np.testing.assert_array_equal(a.o, t.o)
    np.testing.assert_array_equal(attnum.predict(q, k, v, condition="rotate", rotation=r_mat),
                                  attnum.predict(q, k, v, condition="rotate", rotation=str(tmp_path / "r.npy")))
    # d = 80 has no Hadamard transform: the message names the Python parameter, not a CLI flag.
    with pytest.raises(ValueError) as e:
        attnum.attend(q, k, v, kernel="fa3", condition="rotate")
    assert "rotation=<[d, d] array>" in str(e.value) and "--" not in str(e.value), str(e.value)
    with pytest.raises(ValueError, match=r"not orthogonal"):
        attnum.attend(q, k, v, condition="rotate", rotation=np.ones((80, 80)))


def test_warnings_as_the_cli_prints_them():
    q, k, v = qkv(3, bf16=False)  # fp32 values a bf16 transform rounds
    with pytest.warns(attnum.AttnumWarning, match=r"q/k hold values that are not bf16.*knobs=\{'transform_dtype': 'fp32'\}"):
        attnum.attend(q, k, v, kernel="fa3", condition="rotate", stages=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        attnum.attend(q, k, v, kernel="fa3", condition="plain", stages=False)  # plain: nothing rounded
        attnum.attend(q, k, v, kernel="fa3", condition="rotate", knobs={"transform_dtype": "fp32"}, stages=False)
        qb, kb, vb = qkv(3)
        attnum.attend(qb, kb, vb, kernel="fa3", condition="rotate", stages=False)


def test_stages_lazy_by_default_and_short_repr():
    q, k, v = qkv(4)
    lazy = attnum.attend(q, k, v, kernel="sage2pp-sm89")
    now = attnum.attend(q, k, v, kernel="sage2pp-sm89", stages=True)
    assert lazy._stages is None  # not computed by the call
    q[:] = 0  # the operands as they were at the call are what the stages use
    assert set(lazy.stages) == set(now.stages)
    assert lazy.rows()[0]["stage_rel_err"] == now.rows()[0]["stage_rel_err"]
    for s in now.stages:
        np.testing.assert_array_equal(lazy.stages[s], now.stages[s])
    assert attnum.attend(*qkv(4), stages=False).stages == {}
    text = repr(now)
    assert "\n" not in text and len(text) < 200, text
    assert text.startswith("AttendResult(kernel='sage2pp-sm89', condition='plain', o float32[4x32x64], 4 heads")


def test_torch_out_for_every_field_and_bf16_bits():
    q, k, v = qkv(5)
    tq, tk, tv = (torch.from_numpy(a).to(torch.bfloat16) for a in (q, k, v))
    r = attnum.attend(tq, tk, tv, kernel="fa3", stages=True)
    for f in ("o", "rel_err", "log_err", "cosine", "max_row_err", "kv_head", "p_count", "p_underflow",
              "p_saturated", "nan_flagged"):
        assert isinstance(getattr(r, f), torch.Tensor), f
    assert all(isinstance(a, torch.Tensor) for a in r.stages.values())
    assert isinstance(attnum.attend(tq, tk, tv, kernel="fa3").stages["all"], torch.Tensor)  # lazy too
    assert isinstance(attnum.predict(tq, tk, tv), torch.Tensor)
    codes, decoded = attnum.cast(torch.tensor([0.3, 500.0]), to="e4m3fn")
    assert isinstance(codes, torch.Tensor) and codes.dtype == torch.uint8 and decoded.dtype == torch.float64
    codes16, _ = attnum.cast(torch.tensor([1.5, -2.0]), to="bf16")
    assert isinstance(codes16, torch.Tensor)
    np.testing.assert_array_equal(codes16.numpy().view(np.uint16), attnum.cast(np.array([1.5, -2.0]), to="bf16")[0])
    # Raw bf16 bit patterns (uint16) are the same values as the bf16 tensors.
    bits = [t.view(torch.int16).numpy().view(np.uint16) for t in (tq, tk, tv)]
    b = attnum.attend(*bits, kernel="fa3", stages=False)
    np.testing.assert_array_equal(b.o, r.o.numpy())
    np.testing.assert_array_equal(b.rel_err, r.rel_err.numpy())


def test_errors_name_python_parameters():
    q, k, v = qkv(6)
    with pytest.raises(ValueError) as e:
        attnum.attend(q, k, v, condition="rotate", rotation="bogus")
    assert "rotation 'bogus'" in str(e.value) and "--rotation" not in str(e.value)
    with pytest.raises(ValueError, match=r"unknown condition 'rotat': did you mean 'rotate'\?"):
        attnum.attend(q, k, v, condition="rotat")
    with pytest.raises(ValueError, match=r"did you mean 'transform_dtype'\?"):
        attnum.attend(q, k, v, knobs={"transform_dtpe": "fp32"})
