"""The real-kernel harness (attnum.gpu, docs/gpu.md): its transforms equal the library's bit for bit,
the torch stand-in writes what `attnum transfer` reads, and each upstream package is called with
the arguments its preset models (fake modules that record the call)."""
import os
import subprocess
import sys
import types

import numpy as np
import pytest

import attnum
from attnum import gpu

torch = pytest.importorskip("torch")


def bf16(x):
    return torch.from_numpy(np.asarray(x, np.float32)).to(torch.bfloat16).float().numpy()


def layer(seed, H=4, Hkv=2, n=40, d=16):
    r = np.random.default_rng(seed)
    q = bf16(r.standard_normal((H, n, d)) * 2)
    k = bf16(r.standard_normal((Hkv, n, d)) + 0.7)
    v = bf16(r.standard_normal((Hkv, n, d)))
    return q, k, v


def capture(path, layers):
    t = {}
    for l, (q, k, v) in enumerate(layers):
        t[f"layers.{l}.q"], t[f"layers.{l}.k"], t[f"layers.{l}.v"] = q, k, v
    gpu.write_safetensors(str(path), t, {"model": "test"}, "BF16")


@pytest.mark.parametrize("cond", ["rotate", "center", "center+rotate"])
def test_transforms_equal_the_library(cond):
    # the fp32 kernel on the library's transformed operands vs on ours, left as given (plain)
    q, k, v = layer(3)
    knobs = ["transform_dtype=bf16"]
    lib = attnum.attend(q, k, v, kernel="fp32", condition=cond, knobs=knobs, measure=False, stages=False).o
    qt, kt = gpu.transform(q, k, cond, gpu.DEFAULT_SEED, "bf16")
    ours = attnum.attend(qt, kt, v, kernel="fp32", condition="plain", knobs=knobs, measure=False, stages=False).o
    assert np.array_equal(lib.view(np.uint32), ours.view(np.uint32))
    assert not np.array_equal(qt if "rotate" in cond else kt, q if "rotate" in cond else k)


def test_round_to_is_one_rounding_from_float64():
    x = np.array([1 + 2 ** -8, 1 + 2 ** -8 + 2 ** -30, 1 + 3 * 2 ** -8, 3.4e38, -1e-40, 65519.0, 65520.0])
    r = gpu.round_to(x, "bf16")
    assert r[0] == 1.0 and r[1] == 1 + 2 ** -7 and r[2] == 1 + 4 * 2 ** -8  # tie even, above tie up, tie even
    assert np.isinf(r[3])
    f = gpu.round_to(x, "fp16")
    assert f[5] == 65504.0 and np.isinf(f[6])


def run_cli(args):
    env = dict(os.environ)
    return subprocess.run([sys.executable, "-m", "attnum.gpu", *args], capture_output=True, text=True, env=env)


def test_torch_sdpa_backend_writes_kernel_outputs(tmp_path, attnum_cli):
    cap = tmp_path / "cap.safetensors"
    layers = [layer(1), layer(2)]
    capture(cap, layers)
    out = tmp_path / "out"
    r = run_cli(["run", "--captures", str(cap), "--kernel", "fa3", "--backend", "torch-sdpa",
                 "--conditions", "plain,rotate,center", "--out", str(out)])
    assert r.returncode == 0, r.stderr
    t, dt, meta = gpu.read_safetensors(str(out / "cap.safetensors"))
    assert sorted(t) == [f"layers.{l}.o.{c}" for l in (0, 1) for c in ("center", "plain", "rotate")]
    assert set(dt.values()) == {"BF16"}
    assert meta["kernel"] == "fa3" and meta["preset"] == "fa3" and meta["backend"] == "torch-sdpa"
    assert meta["torch"] == torch.__version__ and "gpu" in meta and meta["package_version"]
    for l, (q, k, v) in enumerate(layers):
        ref = attnum.reference(q, k, v)
        o = t[f"layers.{l}.o.plain"]
        assert o.shape == q.shape
        assert np.abs(o - ref).max() < 0.03  # bf16 output of an fp32 attention
        # rotation and centering leave exact attention unchanged: the stand-in's outputs agree
        assert np.abs(t[f"layers.{l}.o.rotate"] - ref).max() < 0.05
        assert np.abs(t[f"layers.{l}.o.center"] - ref).max() < 0.05
    # attnum transfer reads the file (the conditions it was given)
    attnum_cli("transfer", "--captures", cap, "--kernel-outputs", out / "cap.safetensors", "--kernel", "fa3",
               "--out", tmp_path / "transfer", "--quiet")
    assert (tmp_path / "transfer" / "transfer_summary.json").exists()


def test_bad_arguments_exit_2(tmp_path):
    r = run_cli(["run", "--captures", str(tmp_path / "missing.safetensors"), "--kernel", "fa3",
                 "--backend", "torch-sdpa", "--out", str(tmp_path / "o")])
    assert r.returncode == 2 and "missing.safetensors" in r.stderr
    cap = tmp_path / "cap.safetensors"
    capture(cap, [layer(1)])
    r = run_cli(["run", "--captures", str(cap), "--kernel", "fa3", "--backend", "torch-sdpa",
                 "--conditions", "plain,tile2", "--out", str(tmp_path / "o")])
    assert r.returncode == 2 and "tile2" in r.stderr
    assert not (tmp_path / "o" / "cap.safetensors").exists()
    r = run_cli(["run", "--captures", str(cap), "--kernel", "sage2pp", "--out", str(tmp_path / "o")])
    if "sageattention" not in sys.modules:
        assert r.returncode == 2 and "sageattention" in r.stderr


class Recorder:
    def __init__(self):
        self.calls = []


def fake_modules(monkeypatch, rec):
    def fa3(q, k, v, **kw):
        rec.calls.append(("fa3", (q, k, v), kw))
        return (torch.zeros(q.shape, dtype=torch.bfloat16), None)

    def sage(name):
        def f(q, k, v, **kw):
            rec.calls.append((name, (q, k, v), kw))
            return torch.zeros(q.shape, dtype=q.dtype)
        return f

    def fi(q, k, v, **kw):
        rec.calls.append(("flashinfer", (q, k, v), kw))
        return torch.zeros(q.shape, dtype=torch.bfloat16)

    mods = {
        "flash_attn_interface": types.SimpleNamespace(flash_attn_func=fa3, __version__="3.0.0b1-fake"),
        "sageattention": types.SimpleNamespace(sageattn_qk_int8_pv_fp8_cuda=sage("sage2pp"),
                                               sageattn_qk_int8_pv_fp8_cuda_sm90=sage("sage2-sm90"),
                                               __version__="2.2.0-fake"),
        "flashinfer": types.SimpleNamespace(single_prefill_with_kv_cache=fi, __version__="0.2.8-fake"),
    }
    for name, m in mods.items():
        m.__name__ = name
        monkeypatch.setitem(sys.modules, name, m)
    # torch here has no float8 dtype: the cast is checked through the values handed to it
    monkeypatch.setattr(gpu, "_fp8", lambda x, torch_: x)


@pytest.mark.parametrize("kernel", ["fa3", "sage2pp", "sage2-sm90", "flashinfer"])
def test_upstream_calls_have_the_presets_arguments(tmp_path, monkeypatch, kernel):
    rec = Recorder()
    fake_modules(monkeypatch, rec)
    cap = tmp_path / "cap.safetensors"
    q, k, v = layer(5)
    capture(cap, [(q, k, v)])
    paths = gpu.run([str(cap)], kernel, ["plain", "center+rotate"], str(tmp_path / "out"), "auto", device="cpu")
    t, _, meta = gpu.read_safetensors(paths[0])
    assert sorted(t) == ["layers.0.o.center+rotate", "layers.0.o.plain"]
    assert meta["package_version"].endswith("-fake") and meta["preset"] == gpu.KERNELS[kernel][0]
    assert len(rec.calls) == 2
    name, (a, b, c), kw = rec.calls[0]
    H, n, d = q.shape
    Hkv = k.shape[0]
    if kernel == "fa3":
        assert kw["causal"] is True
        assert a.shape == (1, n, H, d) and b.shape == (1, n, Hkv, d)
        for x8, s, x in ((a, kw["q_descale"], q), (b, kw["k_descale"], k), (c, kw["v_descale"], v)):
            assert tuple(s.shape) == (1, Hkv) and s.dtype == torch.float32
            assert float(x8.abs().max()) <= 448.0
        # Q: one scale per kv group (its g query heads), amax / 448
        g = H // Hkv
        for j in range(Hkv):
            assert float(kw["q_descale"][0, j]) == pytest.approx(np.abs(q[j * g:(j + 1) * g]).max() / 448, rel=1e-6)
            assert float(kw["k_descale"][0, j]) == pytest.approx(np.abs(k[j]).max() / 448, rel=1e-6)
        back = (a[0].permute(1, 0, 2).reshape(Hkv, g, n, d) * kw["q_descale"].reshape(Hkv, 1, 1, 1)).reshape(H, n, d)
        assert np.allclose(back.numpy(), q, rtol=1e-6, atol=0)
    elif kernel in ("sage2pp", "sage2-sm90"):
        assert kw["tensor_layout"] == "HND" and kw["is_causal"] is True and kw["qk_quant_gran"] == "per_thread"
        assert kw["smooth_k"] is True
        assert kw["pv_accum_dtype"] == ("fp32+fp16" if kernel == "sage2pp" else "fp32+fp32")
        assert a.dtype == torch.bfloat16 and a.shape == (1, H, n, d)
        assert np.array_equal(a[0].float().numpy(), q)  # plain: the capture as given
    else:
        assert kw["causal"] is True and kw["o_dtype"] == torch.bfloat16
        assert a.shape == (n, H, d) and tuple(kw["scale_q"].shape) == (H,) and tuple(kw["scale_k"].shape) == (Hkv,)
        for h in range(H):
            assert float(kw["scale_q"][h]) == pytest.approx(np.abs(q[h]).max() / 448, rel=1e-6)
    # the second call gets the transformed operands (center+rotate), in the capture's dtype
    _, (a2, b2, _), _ = rec.calls[1]
    qt, kt = gpu.transform(q, k, "center+rotate", gpu.DEFAULT_SEED, "bf16")
    if kernel in ("sage2pp", "sage2-sm90"):
        assert np.array_equal(a2[0].float().numpy(), qt) and np.array_equal(b2[0].float().numpy(), kt)
