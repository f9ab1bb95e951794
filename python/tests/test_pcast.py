"""attnum.pcast returns the CLI's numbers (`attnum pcast theory|dp --json`) as arrays, and the
closed form equals Phi(Delta + delta_k - 10 ln 2 - ln S) computed here."""
import math

import numpy as np

import attnum


def test_theory_equals_cli(attnum_cli):
    rows = attnum_cli("pcast", "theory", "--delta", "0:12:2", "--scale", "1,256,448", "--n-tok", "512",
                      "--block", "64", "--json", json_out=True)
    t = attnum.pcast.theory(np.arange(0, 13, 2.0), [1, 256, 448], n_tok=512, block=64)
    assert set(t) == {"delta", "scale", "delta_k", "underflow_fraction", "underflow_exact", "delta_c"}
    assert all(a.dtype == np.float64 and a.shape == (len(rows),) for a in t.values())
    for i, r in enumerate(rows):
        for key in t:
            assert t[key][i] == r[key], (i, key, t[key][i], r[key])


def test_closed_forms():
    dk = attnum.pcast.delta_k(4)
    assert abs(dk - 1.0293753730) < 1e-9
    assert abs(attnum.pcast.delta_k(1)) < 1e-12
    for delta, s in [(0, 1), (4, 256), (9.5, 448)]:
        want = 0.5 * (1 + math.erf((delta + dk - 10 * math.log(2) - math.log(s)) / math.sqrt(2)))
        assert abs(attnum.pcast.underflow_closed_form(delta, s, 4) - want) < 1e-12
    assert abs(attnum.pcast.delta_c(256, 4) - (10 * math.log(2) + math.log(256) - dk)) < 1e-12
    fwd = attnum.pcast.underflow_exact(10, 256, n_tok=1024, block=128, order="forward")
    rev = attnum.pcast.underflow_exact(10, 256, n_tok=1024, block=128, order="reverse")
    assert 0 <= rev < fwd <= 1


def test_dp_equals_cli(attnum_cli):
    rows = attnum_cli("pcast", "dp", "--scale", "1,2,100,256,448,512", "--json", json_out=True)
    got = attnum.pcast.dp([1, 2, 100, 256, 448, 512])
    np.testing.assert_array_equal(got, [r["dp"] for r in rows])
    b = attnum.pcast.reverse_bound(4096, 256)
    assert b["n_tok"] == 4096 and 0 <= b["p_underflow"] <= 1
