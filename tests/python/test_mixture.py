# SPDX-License-Identifier: Apache-2.0
# podfeed.Source mixtures through the Python package: shares per batch and
# _source, the report's sources, resume through state_dict() bit for bit,
# and every bad argument a ValueError or TypeError naming it.
import zlib

import numpy as np
import pytest

import podfeed
from conftest import TOKENS, run, tool

S = podfeed.Source


@pytest.fixture(scope="module")
def two(data, tmp_path_factory):
    """A second source: the same records in 2 shards of smaller frames."""
    out = tmp_path_factory.mktemp("second") / "z"
    run(tool("tools/shardtool"), "convert", "--out", out, "--shards", 2, "--frame-size", "32K",
        data / "plain")
    return data / "indexed", out


def mix(two, **kw):
    a, b = two
    return [S(a, weight=3, name="web"), S(b, weight=1, name="code")]


def crc_of(batch):
    crc = 0
    for c in range(batch.cores):
        for name, view in batch.core(c).items():
            crc = zlib.crc32(view.tobytes(), crc)
    return crc


def test_shares_per_batch_and_source_feature(two):
    with podfeed.Loader(mix(two), TOKENS, 8, cores=2, shuffle=True, seed=3,
                        source_feature=True, max_steps=40) as loader:
        steps = 0
        for b in loader:
            s = np.asarray(b["_source"]).reshape(-1)
            assert s.dtype == np.int32
            assert sorted(np.bincount(s, minlength=2).tolist()) == [4, 12]
            steps += 1
        report = loader.report()
        d = loader.report("dict")
    assert steps == 40
    assert "source      web: share 0.750 of 0.750" in report
    assert "source      code: share 0.250 of 0.250" in report
    assert [(s["name"], s["records"]) for s in d["sources"]] == [("web", 480), ("code", 160)]


def test_resume_from_state_dict_is_bit_for_bit(two):
    kw = dict(cores=2, shuffle="global", seed=5, epochs=2, source_feature=True)
    with podfeed.Loader(mix(two), TOKENS, 4, **kw) as loader:
        ref = [crc_of(b) for b in loader]
    with podfeed.Loader(mix(two), TOKENS, 4, max_steps=37, **kw) as loader:
        first = [crc_of(b) for b in loader]
        state = loader.state_dict()
    assert state["global_step"] == 37
    with podfeed.Loader(mix(two), TOKENS, 4, state=state, **kw) as loader:
        rest = [crc_of(b) for b in loader]
    assert first + rest == ref


@pytest.mark.parametrize("kwargs,exc,name", [
    (dict(weight=0), ValueError, "weight"),
    (dict(weight=-2.5), ValueError, "weight"),
    (dict(weight=float("nan")), ValueError, "weight"),
    (dict(weight=float("inf")), ValueError, "weight"),
    (dict(weight="1"), TypeError, "weight"),
    (dict(weight=True), TypeError, "weight"),
    (dict(name=3), TypeError, "name"),
    (dict(name=""), ValueError, "name"),
])
def test_bad_sources(two, kwargs, exc, name):
    with pytest.raises(exc, match=f"^{name}"):
        S(two[0], **kwargs)


def test_bad_mixtures(two):
    a, b = two
    with pytest.raises(ValueError, match="two sources are named 'x'"):
        podfeed.Loader([S(a, name="x"), S(b, name="x")], TOKENS, 4)
    with pytest.raises(TypeError, match="^paths"):
        podfeed.Loader([S(a), str(b)], TOKENS, 4)
    with pytest.raises(ValueError, match="^mix: "):
        podfeed.Loader(mix(two), TOKENS, 4, mix="zipf")
    with pytest.raises(ValueError, match="^mix_stop"):
        podfeed.Loader(mix(two), TOKENS, 4, mix_stop="last")
    with pytest.raises(ValueError, match="^mix"):
        podfeed.Loader(a, TOKENS, 4, mix="sample")
    # A feature the sources' schema lacks: a ValueError naming it and the
    # source.
    with pytest.raises(ValueError, match="source 'web'.*nope"):
        podfeed.Loader(mix(two), TOKENS + ",nope:int64[1]", 4)
    # A source that matches nothing names itself.
    with pytest.raises(podfeed.Error, match="source 'none'"):
        podfeed.Loader([S(a, name="web"), S(str(b) + "-missing", name="none")], TOKENS, 4)


def test_a_mixture_of_a_dataset_with_itself(two):
    a, _ = two
    with podfeed.Loader([S(a, weight=1, name="x"), S(a, weight=1, name="y")], TOKENS, 4,
                        shuffle=True, source_feature=True, max_steps=5) as loader:
        assert sum(1 for _ in loader) == 5
        assert "source      y" in loader.report()


def test_tokens_weigh_only_a_packed_mixture(two):
    with pytest.raises(ValueError, match="^mix_unit: 'tokens' weighs a packed mixture's"):
        podfeed.Loader(mix(two), "tokens:int32[64]", 4, mix_unit="tokens")
    with pytest.raises(ValueError, match="^mix_unit: only for a mixture"):
        podfeed.Loader(str(two[0]), "tokens:int32[*]", 4, pack_length=64,
                       mix_unit="tokens")


def test_an_image_feature_in_a_mixture(tmp_path):
    """Two sources of one image shard: each row's image is the plain
    loader's image of the same record (eval: no draw), the shape the
    plain loader's, _source beside it."""
    shard = tmp_path / "images.tfrecord.zst"
    run(tool("tests/python/image_ref"), "shard", shard, 60)
    feats = {"image/encoded": podfeed.Image(16, 24, augment="eval"),
             "image/class/label": "int64"}
    ref = {}
    with podfeed.Loader(shard, feats, 4) as loader:
        for b in loader:
            for img, label in zip(b["image/encoded"][0], b["image/class/label"][0]):
                ref[int(label[0])] = img.copy()
    assert len(ref) == 60
    seen = 0
    with podfeed.Loader([S(shard, weight=1, name="a"), S(shard, weight=2, name="b")], feats,
                        3, cores=2, shuffle=True, seed=7, source_feature=True,
                        max_steps=6) as loader:
        for b in loader:
            imgs = b["image/encoded"]
            assert imgs.shape == (2, 3, 16, 24, 3) and imgs.dtype == np.uint8
            assert sorted(np.asarray(b["_source"]).reshape(-1).tolist()) == [0, 0, 1, 1, 1, 1]
            for c in range(2):
                for img, label in zip(imgs[c], b["image/class/label"][c]):
                    assert np.array_equal(img, ref[int(label[0])])
                    seen += 1
    assert seen == 36


def test_elastic_resume_two_hosts_to_one(two):
    """Both hosts' state_dict()s resume the mixture on one host: no row of
    the epochs in progress is delivered twice (the loss bound and the
    bit-for-bit resume inside the bridge are C's,
    tests/loader/mix/test_loader_mixture_elastic.c)."""
    kw = dict(shuffle=True, seed=4, source_feature=True)
    a, b = two
    srcs = [S(a, weight=1, name="web"), S(b, weight=1, name="code")]

    def rows(batch):
        toks = np.asarray(batch["tokens"]).reshape(-1, 64)
        src = np.asarray(batch["_source"]).reshape(-1)
        return [(int(s_), t.tobytes()) for s_, t in zip(src, toks)]

    states, seen = [], []
    for h in range(2):
        with podfeed.Loader(srcs, TOKENS, 4, host_index=h, num_hosts=2, max_steps=6,
                            **kw) as loader:
            for batch in loader:
                seen += rows(batch)
            states.append(loader.state_dict())
    with podfeed.Loader(srcs, TOKENS, 4, num_hosts=1, state=states, max_steps=20,
                        **kw) as loader:
        steps = 0
        for batch in loader:
            seen += rows(batch)
            steps += 1
        assert loader.state_dict()["global_step"] == 26
    assert steps == 20
    assert len(seen) == 2 * 6 * 4 + 20 * 4
    assert len(set(seen)) == len(seen)
    with pytest.raises(ValueError, match="needs the state of each old host once"):
        podfeed.Loader(srcs, TOKENS, 4, num_hosts=1, state=states[:1], **kw)


def test_report_names_each_source_s_region(two, monkeypatch):
    """Without a region table the sources' regions come from
    $PODFEED_REGION and the mounts: local shards are the host's region."""
    monkeypatch.setenv("PODFEED_REGION", "us-east1")
    with podfeed.Loader(mix(two), TOKENS, 4, max_steps=3) as loader:
        for _ in loader:
            pass
        d = loader.report("dict")
        text = loader.report()
    assert [(s["name"], s["region"], s["cross_region"]) for s in d["sources"]] == \
        [("web", "us-east1", False), ("code", "us-east1", False)]
    assert "region us-east1" in text


def test_a_small_source_mixed_in_on_4_hosts(two, tmp_path):
    """A fine-tuning set of 50 records at 10% of 32 rows on 4 hosts (one
    global batch of its share of 8 host batches would need 104 records):
    its batches are fitted to its records, so every host runs the same
    steps, and each of its epochs (12 records a host, 2 of the 50
    dropped) holds no record twice across the hosts."""
    small = tmp_path / "small"
    run(tool("tools/shardtool"), "synth", "--kind", "tokens", "--records", 50, "--shards", 1,
        "--out", small, "--seed", 2)
    srcs = [S(two[0], weight=0.9, name="web"), S(small, weight=0.1, name="ft")]
    hosts = []
    for h in range(4):
        rows = []
        with podfeed.Loader(srcs, TOKENS, 32, host_index=h, num_hosts=4, shuffle=True, seed=1,
                            source_feature=True, max_steps=30) as loader:
            for b in loader:
                src = np.asarray(b["_source"]).reshape(-1)
                toks = np.asarray(b["tokens"]).reshape(-1, 64)
                rows += [t.tobytes() for s_, t in zip(src, toks) if s_ == 1]
            d = loader.report("dict")
        assert [s["name"] for s in d["sources"]] == ["web", "ft"]
        hosts.append(rows)
    assert len({len(r) for r in hosts}) == 1 and len(hosts[0]) >= 4 * 12
    for e in range(len(hosts[0]) // 12):
        epoch = [r for rows in hosts for r in rows[e * 12:(e + 1) * 12]]
        assert len(set(epoch)) == 48, f"epoch {e} of the small source repeats a record"


def test_sampled_hosts_in_different_epochs_resume_on_another_host_count(two, tmp_path):
    """mix="sample": each host draws its own rows, so after 8 steps the 4
    old hosts are in different epochs of a 50-record source (12 records a
    host an epoch); their state_dict()s resume on 2 hosts (a bridge for
    each epoch, C's tests/loader/mix/test_loader_mixture_small.c holds the bounds):
    equal steps, and no row of the large source, inside its first epoch
    throughout, delivered twice."""
    small = tmp_path / "small"
    run(tool("tools/shardtool"), "synth", "--kind", "tokens", "--records", 50, "--shards", 1,
        "--out", small, "--seed", 2)
    srcs = [S(two[0], weight=0.9, name="web"), S(small, weight=0.1, name="ft")]
    kw = dict(shuffle=True, seed=1, source_feature=True, mix="sample", epochs=3)

    def web_rows(batch):
        src = np.asarray(batch["_source"]).reshape(-1)
        toks = np.asarray(batch["tokens"]).reshape(-1, 64)
        return [t.tobytes() for s_, t in zip(src, toks) if s_ == 0]

    states, seen, epochs = [], [], set()
    for h in range(4):
        with podfeed.Loader(srcs, TOKENS, 32, host_index=h, num_hosts=4, max_steps=8,
                            **kw) as loader:
            for b in loader:
                seen += web_rows(b)
            states.append(loader.state_dict())
            epochs.add(loader.report("dict")["sources"][1]["epochs_started"])
    assert len(epochs) > 1, "the old hosts are in one epoch of the small source"
    steps = []
    for h in range(2):
        with podfeed.Loader(srcs, TOKENS, 32, host_index=h, num_hosts=2, state=states,
                            max_steps=10, **kw) as loader:
            n = 0
            for b in loader:
                seen += web_rows(b)
                n += 1
            steps.append(n)
    assert steps == [10, 10]
    assert len(set(seen)) == len(seen)
