# SPDX-License-Identifier: Apache-2.0
# Loader(frame_cache=...): the global shuffle's cache of decompressed
# frames from Python.  Batches never depend on it; what it did shows in
# metrics(); bad values name the argument.
import zlib

import pytest

import podfeed
from conftest import TOKENS


def run(data, frame_cache, **kw):
    """(crc of every batch, metrics) of two epochs of the global shuffle in
    windows small enough that a frame is cut into several slices."""
    crcs = []
    with podfeed.Loader(data / "indexed", TOKENS, 8, cores=2, shuffle="global",
                        shuffle_window=256, seed=11, epochs=2, threads=2,
                        frame_cache=frame_cache, **kw) as loader:
        for batch in loader:
            crc = 0
            for c in range(batch.cores):
                for view in batch.core(c).values():
                    crc = zlib.crc32(view.tobytes(), crc)
            crcs.append(crc)
            batch.release()
        return crcs, loader.metrics()


def test_batches_are_the_same_with_any_cache_and_the_metrics_say_what_it_did(data):
    auto, m_auto = run(data, None)
    off, m_off = run(data, 0)
    three, m_three = run(data, 3)
    assert auto == off == three and len(auto) > 50
    # off: every slice reads its frame, nothing kept
    assert m_off["frame_cache_loads"] == m_off["frame_cache_hits"] == 0
    assert m_off["frame_cache_entries"] == 0
    # auto: frames read into it and slices served from it
    assert m_auto["frame_cache_loads"] > 0 and m_auto["frame_cache_hits"] > 0
    assert m_auto["frame_cache_entries"] > 3
    # three frames: no more are held, and the rest is replaced or bypassed
    assert m_three["frame_cache_entries"] == 3
    assert m_three["frame_cache_evictions"] + m_three["frame_cache_bypassed"] > 0
    # the cache decompresses less than reading every slice's frame
    assert m_auto["bytes_decompressed"] < m_off["bytes_decompressed"]


@pytest.mark.parametrize("value, exc, says", [
    (-1, ValueError, "frame_cache: -1 is out of range"),
    (2**32 - 1, ValueError, "frame_cache"),
    ("3", TypeError, "frame_cache: expected an int"),
    (True, TypeError, "frame_cache: expected an int"),
    (1.5, TypeError, "frame_cache: expected an int"),
])
def test_bad_frame_cache_values_name_the_argument(data, value, exc, says):
    with pytest.raises(exc, match=says):
        podfeed.Loader(data / "indexed", TOKENS, 8, shuffle="global", frame_cache=value)


def test_a_cache_the_budget_cannot_hold_is_refused(data):
    with pytest.raises(podfeed.ConfigError, match="frame_cache: .*frame cache's 100000 frames"):
        podfeed.Loader(data / "indexed", TOKENS, 8, shuffle="global", shuffle_window=256,
                       memory_mib=16, frame_cache=100000)
