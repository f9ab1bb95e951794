"""P-cast theory (docs/pcast.md): closed forms for the probability cast P -> E4M3(P*S) under
attention sinks, as `attnum pcast theory|dp|bound` computes them, returning NumPy arrays."""
from __future__ import annotations

from typing import Dict, Sequence, Union

import numpy as _np

from . import _core

Numbers = Union[float, Sequence[float], _np.ndarray]


def _list(x: Numbers, what: str) -> list:
    a = _np.atleast_1d(_np.asarray(x, dtype=_np.float64))
    if a.ndim != 1:
        raise ValueError(f"pcast: {what}: expected a number or a 1-D sequence, got shape {a.shape}")
    return a.tolist()


def theory(deltas: Numbers = (0, 2, 4, 6, 8, 10, 12), scales: Numbers = (1, 256, 448), n_tok: int = 4096,
           block: int = 128, k_sink: int = 4) -> Dict[str, _np.ndarray]:
    """Returns the theory table (deltas outer, scales inner) as {field: float64 array}: delta,
    scale, delta_k, underflow_fraction (the paper's closed form F), underflow_exact (forward
    order, the row shape given), delta_c."""
    return dict(_core.pcast_theory(_list(deltas, "deltas"), _list(scales, "scales"), int(n_tok), int(block),
                                   int(k_sink)))


def dp(scales: Numbers) -> _np.ndarray:
    """Returns dp(S), the largest E4M3 grid step over [0, S] divided by S, per scale (float64)."""
    return _core.pcast_dp(_list(scales, "scales"))


def delta_k(k_sink: int) -> float:
    """Returns E[max of k_sink iid standard normals]."""
    return _core.pcast_delta_k(int(k_sink))


def delta_c(scale: float, k_sink: int = 4) -> float:
    """Returns Delta_c = 10 ln 2 + ln S - delta_k, where half the non-sink P underflow."""
    return _core.pcast_delta_c(float(scale), int(k_sink))


def underflow_closed_form(delta: float, scale: float, k_sink: int = 4) -> float:
    """Returns the paper's F(Delta, S) = Phi(Delta + delta_k - 10 ln 2 - ln S)."""
    return _core.pcast_underflow_closed_form(float(delta), float(scale), int(k_sink))


def underflow_exact(delta: float, scale: float, n_tok: int = 4096, block: int = 128, k_sink: int = 4,
                    order: str = "forward") -> float:
    """Returns the exact expected underflow fraction of non-sink P (order forward or reverse)."""
    return _core.pcast_underflow_exact(float(delta), float(scale), int(n_tok), int(block), int(k_sink), order)


def reverse_bound(n_tok: int, scale: float = 256) -> Dict[str, float]:
    """Returns the reverse-order underflow bound for N keys (the paper's theorem) as a dict."""
    return dict(_core.pcast_reverse_bound(int(n_tok), float(scale)))
