# SPDX-License-Identifier: Apache-2.0
# The paths a Loader is given (issue 25): the shell-glob form of a convert
# directory (its manifest among the shards), the same shard twice, a
# directory that holds nothing, a FIFO.  Each refusal is an exception
# carrying the path (.file) and the reason (.cause).
import glob
import os
import shutil

import pytest

import podfeed
from conftest import TOKENS


def records(paths, **kw):
    with podfeed.Loader(paths, TOKENS, 1, shuffle=False, **kw) as loader:
        return sum(1 for _ in loader)


def test_the_glob_of_a_convert_directory_is_its_shards(data):
    # sorted(glob("D/*")) names podfeed.manifest too: it is their manifest.
    paths = sorted(glob.glob(str(data / "indexed" / "*")))
    assert any(p.endswith("podfeed.manifest") for p in paths)
    assert records(paths) == 2000
    # Named alone, the manifest is the dataset.
    assert records([data / "indexed" / "podfeed.manifest"]) == 2000
    # The pattern itself, expanded by podfeed as the shell would.
    assert records(str(data / "indexed" / "*")) == 2000
    with podfeed.Loader(str(data / "indexed" / "*"), TOKENS, 1, shuffle=False) as loader:
        assert "1 file (the manifest) opened to plan" in loader.report()


def test_a_manifest_beside_a_shard_it_does_not_list(data, tmp_path):
    d = tmp_path / "d"
    shutil.copytree(data / "indexed", d)
    extra = d / "extra.tfrecord"
    shutil.copy(sorted((data / "plain").iterdir())[0], extra)
    with pytest.raises(podfeed.ConfigError) as e:
        podfeed.Loader(sorted(glob.glob(str(d / "*"))), TOKENS, 8)
    assert e.value.file == str(extra)
    assert "does not list it" in e.value.cause and str(d / "podfeed.manifest") in e.value.cause


def test_the_same_shard_twice_is_refused(data):
    shard = str(sorted((data / "indexed").glob("*.zst"))[0])
    for paths in ([shard, shard], [data / "indexed", data / "indexed"],
                  [shard, "./" + os.path.relpath(shard)]):
        with pytest.raises(podfeed.ConfigError) as e:
            podfeed.Loader(paths, TOKENS, 8)
        assert "named twice" in e.value.cause, e.value
        # the shard, or the directory, as one of its names gave it
        assert os.path.realpath(e.value.file).startswith(os.path.realpath(data / "indexed"))
        assert str(e.value).startswith("paths:"), str(e.value)


def test_an_empty_directory_among_shards(data, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(podfeed.FileError) as e:
        podfeed.Loader(sorted(glob.glob(str(data / "indexed" / "*.zst"))) + [empty], TOKENS, 8)
    assert e.value.file == str(empty) and "holds no shards" in e.value.cause


def test_a_symlink_loop_in_a_directory(data, tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    for p in (data / "indexed").glob("*.zst"):
        shutil.copy(p, d)
    os.symlink("loop", d / "loop")
    with pytest.raises(podfeed.Error) as e:
        podfeed.Loader(d, TOKENS, 8)
    assert e.value.file == str(d / "loop") and "cannot stat" in e.value.cause


def test_a_fifo_is_refused_not_waited_on(data, tmp_path):
    # open(2) of a FIFO with no writer would wait forever: pytest's own
    # run would hang here (the meson test's timeout) before the fix.
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(podfeed.ConfigError) as e:
        podfeed.Loader([data / "indexed", fifo], TOKENS, 8)
    assert e.value.file == str(fifo) and "FIFO" in e.value.cause


@pytest.mark.parametrize("io_backend", ["uring", "pread"])
def test_a_shard_the_manifest_names_replaced_by_a_fifo(data, tmp_path, io_backend):
    # The manifest names its shards without a stat of each; the engine
    # stats each before opening it, so a FIFO is refused by name at its
    # turn instead of an open that waits for a writer forever.
    d = tmp_path / "d"
    shutil.copytree(data / "indexed", d)
    shard = sorted(d.glob("*.zst"))[1]
    shard.unlink()
    os.mkfifo(shard)
    with podfeed.Loader(d / "podfeed.manifest", TOKENS, 8, shuffle=False,
                        io_backend=io_backend) as loader:
        with pytest.raises(podfeed.Error) as e:
            for _ in loader:
                pass
    assert e.value.file == str(shard), e.value
    assert "is a FIFO, not a regular file" in e.value.cause, e.value


def test_names_that_are_not_utf8(data, tmp_path):
    """A file or directory whose name's bytes are not UTF-8 (a Latin-1
    upload) loads, named as str (os.listdir()'s surrogate escapes) or as
    bytes, in a mixture's sources too; an error names it with its bytes
    (the exception's .file is os.fsdecode() of them)."""
    d = os.path.join(os.fsencode(tmp_path), b"caf\xe9")
    os.mkdir(d)
    for f in sorted((data / "plain").iterdir()):
        shutil.copy(f, os.path.join(d, b"\xff" + os.fsencode(f.name)))
    want = records(data / "plain")
    assert records(d) == want
    assert records(os.fsdecode(d)) == want
    assert records([os.path.join(os.fsdecode(d), n) for n in os.listdir(os.fsdecode(d))]) == want
    with podfeed.Loader([podfeed.Source(os.fsdecode(d), 1.0), podfeed.Source(d, 1.0)],
                        TOKENS, 4, shuffle=False) as loader:
        assert sum(1 for _ in loader) > 0
    missing = os.path.join(d, b"gone\xfe.tfrecord")
    with pytest.raises(podfeed.FileError) as e:
        podfeed.Loader(missing, TOKENS, 1)
    assert e.value.file == os.fsdecode(missing)
    assert "gone\\xfe.tfrecord: cannot open" in str(e.value)   # its bytes escaped
    with pytest.raises(ValueError, match="NUL"):
        podfeed.Loader(["a\0b"], TOKENS, 1)
