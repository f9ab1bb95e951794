"""bench/numpy_fa3.py, the NumPy baseline of `attnum`'s speed target, does FA3's work:
its output agrees with attnum's fa3 far more closely than either agrees with fp64 attention, and
its E4M3 and bf16 roundings equal the library's casts bit for bit."""
import importlib.util

import numpy as np
import pytest

import attnum
from conftest import ROOT

spec = importlib.util.spec_from_file_location("numpy_fa3", ROOT / "bench" / "numpy_fa3.py")
numpy_fa3 = importlib.util.module_from_spec(spec)
spec.loader.exec_module(numpy_fa3)


def test_roundings_equal_the_library_casts():
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.standard_normal(4000).astype(np.float32) * s for s in (1e-3, 1, 100, 1000)])
    x = np.concatenate([x, np.float32([0, -0.0, 448, 464, 480, -500, 2.0 ** -9, 2.0 ** -10, 3 * 2.0 ** -11])])
    np.testing.assert_array_equal(numpy_fa3.e4m3(x), attnum.cast(x, to="e4m3fn")[1].astype(np.float32))
    np.testing.assert_array_equal(numpy_fa3.bf16(x), attnum.cast(x, to="bf16")[1].astype(np.float32))


@pytest.mark.parametrize("n", [96, 300])
def test_output_is_fa3s(n):
    rng = np.random.default_rng(n)
    q, k, v = (numpy_fa3.bf16(rng.standard_normal((1, n, 64), dtype=np.float32)) for _ in range(3))
    ours = numpy_fa3.numpy_fa3_head(q[0], k[0], v[0], bm=128, bn=160)  # FA3's tile for d 64
    r = attnum.attend(q, k, v, kernel="fa3", stages=False)
    ref = attnum.reference(q, k, v)[0]
    err = np.linalg.norm(ours - ref) / np.linalg.norm(ref)
    gap = np.linalg.norm(ours - r.o[0]) / np.linalg.norm(ref)
    assert err > 1e-3
    assert abs(err - r.rel_err[0]) < 0.02 * r.rel_err[0]
    assert gap < 0.01 * err
