"""Inputs: torch tensors in and out; wrong rank, dtype, layout and non-finite values raise
ValueError with a message naming the operand and what was expected; bad names raise ValueError
with the library's (the CLI's) message; nothing aborts the interpreter."""
import numpy as np
import pytest

import attnum

torch = pytest.importorskip("torch")  # python3-torch is installed by scripts/setup


def qkv(seed=0, n_head=4, n_head_kv=2, n=32, d=64):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n_head, n, d), dtype=np.float32),
            rng.standard_normal((n_head_kv, n, d), dtype=np.float32),
            rng.standard_normal((n_head_kv, n, d), dtype=np.float32))


def test_torch_tensors_in_and_out():
    q, k, v = qkv()
    want = attnum.attend(q, k, v, kernel="fa3", stages=False)
    r = attnum.attend(torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(v), kernel="fa3", stages=False)
    assert isinstance(r.o, torch.Tensor) and r.o.dtype == torch.float32 and tuple(r.o.shape) == q.shape
    np.testing.assert_array_equal(r.o.numpy().view(np.uint32), want.o.view(np.uint32))
    np.testing.assert_array_equal(r.rel_err, want.rel_err)
    ref = attnum.reference(torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(v))
    assert isinstance(ref, torch.Tensor) and ref.dtype == torch.float64
    np.testing.assert_array_equal(ref.numpy(), attnum.reference(q, k, v))


def test_torch_bfloat16_is_converted_exactly():
    q, k, v = qkv(1)
    tq, tk, tv = (torch.from_numpy(a).to(torch.bfloat16) for a in (q, k, v))
    r = attnum.attend(tq, tk, tv, kernel="sage2pp-sm89", stages=False)
    want = attnum.attend(tq.float().numpy(), tk.float().numpy(), tv.float().numpy(), kernel="sage2pp-sm89",
                         stages=False)
    np.testing.assert_array_equal(r.o.numpy(), want.o)
    pred = attnum.predict(tq, tk, tv, kernel="fa3")
    assert pred.shape == (4,)
    codes, decoded = attnum.cast(torch.tensor([0.3, -1e-3, 500.0]), to="e4m3fn")
    np.testing.assert_array_equal(codes, attnum.cast(np.array([0.3, -1e-3, 500.0], dtype=np.float32), to="e4m3fn")[0])


def test_float32_arrays_are_not_copied():
    # The output must not depend on a copy: a view of a larger contiguous buffer works in place.
    q, k, v = qkv(2)
    big = np.concatenate([q, q])
    r1 = attnum.attend(big[:4], k, v, kernel="fa3", stages=False)
    r2 = attnum.attend(q, k, v, kernel="fa3", stages=False)
    np.testing.assert_array_equal(r1.o, r2.o)


@pytest.mark.parametrize("fn", [attnum.attend, attnum.reference, attnum.predict])
def test_bad_arrays_raise_value_error(fn):
    q, k, v = qkv(3)
    if fn is attnum.attend:  # attend also takes [batch, n_head, n_tok, d_head] (test_sdpa.py)
        with pytest.raises(ValueError, match=r"k: expected shape .*\[batch, n_head, n_tok, d_head\], got 3 dims"):
            fn(q[None], k, v)
        with pytest.raises(ValueError, match=r"q: expected shape .* got 5 dims"):
            fn(q[None, None], k, v)
    else:
        with pytest.raises(ValueError, match=r"q: expected shape \[n_tok, d_head\] or \[n_head, n_tok, d_head\], got 4 dims"):
            fn(q[None], k, v)
    with pytest.raises(ValueError, match=r"k: expected shape .* got 1 dims"):
        fn(q, k.ravel(), v)
    with pytest.raises(ValueError, match=r"q: dtype float64: expected float32"):
        fn(q.astype(np.float64), k, v)
    with pytest.raises(ValueError, match=r"v: dtype int32: expected float32"):
        fn(q, k, v.astype(np.int32))
    with pytest.raises(ValueError, match=r"k: expected a C-contiguous array"):
        fn(q, np.asfortranarray(k), v)
    with pytest.raises(ValueError, match=r"q: expected a C-contiguous array"):
        fn(np.ascontiguousarray(np.concatenate([q, q], axis=2))[:, :, ::2], k, v)
    bad = q.copy()
    bad[1, 5, 7] = np.nan
    with pytest.raises(ValueError, match=r"q: element \[1, 5, 7\] is not finite \(nan\)"):
        fn(bad, k, v)
    bad = v.copy()
    bad[0, 0, 0] = -np.inf
    with pytest.raises(ValueError, match=r"v: element \[0, 0, 0\] is not finite"):
        fn(q, k, bad)
    bad = q[1].copy()  # two dims: the index is [t, c] (attend: the library refuses, the message is this one)
    bad[5, 7] = np.inf
    with pytest.raises(ValueError, match=r"q: element \[5, 7\] is not finite \(inf\)"):
        fn(bad, k[0], v[0])
    with pytest.raises(ValueError, match=r"q has 3 heads, not a multiple of k's 2 \(GQA\)"):
        fn(q[:3].copy(), k, v)
    with pytest.raises(ValueError, match=r"d_head of q \(32\) and k \(64\) differ"):
        fn(np.ascontiguousarray(q[:, :, :32]), k, v)
    with pytest.raises(ValueError, match=r"shapes differ"):
        fn(q, k, v[:1].copy())
    with pytest.raises(ValueError, match=r"expected a numpy array or a torch tensor, got list"):
        fn(q.tolist(), k, v)
    with pytest.raises(ValueError, match=r"torch.float64: expected torch.float32"):
        fn(torch.from_numpy(q).double(), k, v)
    with pytest.raises(ValueError, match=r"expected a contiguous tensor"):
        fn(torch.from_numpy(q).to(torch.bfloat16).transpose(1, 2), k, v)


def test_bad_names_raise_the_library_message(tmp_path):
    import subprocess
    from conftest import BINARY
    q, k, v = qkv(4)
    with pytest.raises(ValueError, match=r"nope") as e:
        attnum.attend(q, k, v, kernel="nope")
    # The same text as the CLI prints after "error: " for the same request.
    for name, a in (("q", q), ("k", k), ("v", v)):
        np.save(tmp_path / f"{name}.npy", a)
    r = subprocess.run([BINARY, "attend", "--q", tmp_path / "q.npy", "--k", tmp_path / "k.npy",
                        "--v", tmp_path / "v.npy", "--kernel", "nope"], capture_output=True, text=True)
    assert r.returncode == 2 and f"error: {e.value}" in r.stderr, (str(e.value), r.stderr)
    with pytest.raises(ValueError, match=r"sideways"):
        attnum.attend(q, k, v, condition="sideways")
    with pytest.raises(ValueError, match=r"no_such_knob"):
        attnum.attend(q, k, v, knobs={"no_such_knob": 1})
    with pytest.raises(ValueError, match=r"rotation 'hadamard-ish'"):
        attnum.attend(q, k, v, condition="rotate", rotation="hadamard-ish")
    with pytest.raises(ValueError, match=r"e9m9"):
        attnum.cast([1.0], to="e9m9")
    with pytest.raises(ValueError, match=r"scale -1: expected a positive finite number"):
        attnum.cast([1.0], to="e4m3fn", scale=-1.0)
    with pytest.raises(ValueError, match=r"identity"):
        attnum.cast([1.0], to="fp32")
    with pytest.raises(ValueError, match=r"the predictor needs the same count"):
        attnum.predict(q[:, :16].copy(), k, v)
    with pytest.raises(ValueError, match=r"set_threads: -1"):
        attnum.set_threads(-1)
    with pytest.raises(ValueError, match=r"k_sink 0"):
        attnum.pcast.theory(k_sink=0)
