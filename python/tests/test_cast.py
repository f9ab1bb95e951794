"""attnum.cast equals `attnum cast` on every E4M3/E5M2 code and on a sweep of float32 inputs, and
decodes every code to the value its bit fields say (an independent closed form)."""
import math

import numpy as np
import pytest

import attnum


def fp8_value(code, exp_bits, mant_bits, bias, fn):
    """The value of an 8-bit float code from its fields (OCP OFP8); None for NaN."""
    sign = -1.0 if code & 0x80 else 1.0
    e = (code >> mant_bits) & ((1 << exp_bits) - 1)
    m = code & ((1 << mant_bits) - 1)
    if fn and e == (1 << exp_bits) - 1 and m == (1 << mant_bits) - 1:
        return None  # E4M3FN: S.1111.111 is NaN, no Inf
    if not fn and e == (1 << exp_bits) - 1:
        return sign * math.inf if m == 0 else None
    if e == 0:
        return sign * m * 2.0 ** (1 - bias - mant_bits)
    return sign * (1 + m / 2 ** mant_bits) * 2.0 ** (e - bias)


def text(v):
    """A value as the CLI parses it exactly: hex floats, inf, and NaN with its sign."""
    if math.isnan(v):
        return "-nan" if math.copysign(1.0, v) < 0 else "nan"
    return float(v).hex() if math.isfinite(v) else str(v)


def cli_cast(attnum_cli, to, values, *flags):
    rows = attnum_cli("cast", "--to", to, "--json", *flags, *map(text, values), json_out=True)
    codes = [int(r["code"], 16) for r in rows]
    dec = [float(r["decoded"]) for r in rows]  # numbers, or "nan", "inf", "-inf"
    return np.array(codes), np.array(dec)


@pytest.mark.parametrize("to,exp_bits,mant_bits,bias,fn", [("e4m3fn", 4, 3, 7, True), ("e5m2", 5, 2, 15, False)])
def test_every_fp8_code(attnum_cli, to, exp_bits, mant_bits, bias, fn):
    values = [fp8_value(c, exp_bits, mant_bits, bias, fn) for c in range(256)]
    x = np.array([math.nan if v is None else v for v in values])
    codes, decoded = attnum.cast(x, to=to)
    assert codes.dtype == np.uint8 and decoded.dtype == np.float64 and codes.shape == (256,)
    for c, v in enumerate(values):
        if v is None:
            assert math.isnan(decoded[c])
        elif math.isinf(v):  # saturating cast: Inf clamps to the max finite value
            assert decoded[c] == math.copysign(57344.0, v)
        else:
            assert decoded[c] == v, (c, v, decoded[c])
            assert codes[c] == c or v == 0.0, (c, codes[c])
    # Bit for bit the CLI, saturating and not.
    for flags in [(), ("--no-saturate",)]:
        want_codes, want_dec = cli_cast(attnum_cli, to, x, *flags)
        got_codes, got_dec = attnum.cast(x, to=to, saturate=not flags)
        np.testing.assert_array_equal(got_codes, want_codes)
        np.testing.assert_array_equal(got_dec, want_dec)  # NaN == NaN here


@pytest.mark.parametrize("to", ["e4m3fn", "e5m2", "bf16", "fp16", "int8"])
@pytest.mark.parametrize("saturate,scale", [(True, None), (False, None), (True, 0.0625), (False, 3.0)])
def test_float32_sweep_equals_cli(attnum_cli, to, saturate, scale):
    rng = np.random.default_rng(7)
    bits = rng.integers(0, 2 ** 32, 1500, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)
    # Plus values near each format's range and its rounding ties.
    extra = np.concatenate([np.linspace(-600, 600, 301), np.ldexp(np.arange(-40, 20, dtype=np.float64), 0) * 1.0625,
                            2.0 ** np.arange(-26, 18), [0.0, -0.0, np.inf, -np.inf, np.nan, 448, 464, 480, 57344, 61440,
                                                       65504, 65520, 127.5, -128.5]]).astype(np.float32)
    x = np.concatenate([x, extra])
    # Random bits include NaNs of both signs with payloads; the CLI reads "nan"/"-nan" only, so
    # NaNs are the default quiet NaN with their sign (an e5m2 code can depend on the payload).
    x = np.where(np.isnan(x), np.copysign(np.float32(np.nan), x), x).astype(np.float32)
    flags = ([] if saturate else ["--no-saturate"]) + ([] if scale is None else ["--scale", repr(scale)])
    with np.errstate(invalid="ignore"):  # signalling NaNs among the random bits
        wide = x.astype(np.float64)
    want_codes, want_dec = cli_cast(attnum_cli, to, wide, *flags)
    got_codes, got_dec = attnum.cast(x.reshape(-1, 1), to=to, saturate=saturate, scale=scale)
    assert got_codes.shape == (x.size, 1)
    np.testing.assert_array_equal(got_codes.ravel(), want_codes)
    np.testing.assert_array_equal(got_dec.ravel(), want_dec)
    assert got_codes.dtype == (np.uint16 if to in ("bf16", "fp16") else np.uint8)


def test_bf16_matches_bit_truncation_with_rne():
    # Independent: bfloat16 RNE is the top 16 bits of float32 after adding 0x7fff + lsb.
    rng = np.random.default_rng(3)
    x = rng.standard_normal(10000).astype(np.float32) * np.float32(1e3)
    u = x.view(np.uint32).astype(np.uint64)
    want = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    codes, decoded = attnum.cast(x, to="bf16")
    np.testing.assert_array_equal(codes, want)
    np.testing.assert_array_equal(decoded, (want.astype(np.uint32) << 16).view(np.float32).astype(np.float64))
