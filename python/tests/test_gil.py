"""The GIL is released while the library computes: a second Python thread makes progress
during a long attnum.attend call."""
import threading
import time

import numpy as np

import attnum


def test_a_second_thread_runs_during_attend():
    rng = np.random.default_rng(0)
    q = rng.standard_normal((8, 512, 128), dtype=np.float32)
    k = rng.standard_normal((8, 512, 128), dtype=np.float32)
    attnum.set_threads(1)
    done = {}

    def work():
        t0 = time.perf_counter()
        done["r"] = attnum.attend(q, k, k, kernel="sage2pp-sm89", stages=True)
        done["s"] = time.perf_counter() - t0

    ticks = 0
    t = threading.Thread(target=work)
    t.start()
    while t.is_alive():
        ticks += 1
        time.sleep(0.001)
    t.join()
    attnum.set_threads(0)
    assert done["r"].rel_err.shape == (8,)
    # With the GIL held for the whole call this loop would run once or twice; released, it ticks
    # about once per millisecond of the call (at least a quarter of that on a loaded machine).
    assert done["s"] > 0.2, f"the call took {done['s']:.3f} s: too short to show anything"
    assert ticks > 0.25 * done["s"] * 1000 / 2, (ticks, done["s"])
