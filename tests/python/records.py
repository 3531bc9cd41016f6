# SPDX-License-Identifier: Apache-2.0
"""TFRecord files of tf.train.Example records written here, byte by byte
(the wire format by hand: no TensorFlow, no protobuf package), for tests
whose records must say who they are: each token of a text source names its
source, its record and its position (token = source * 10**8 + record *
1000 + position), so that a delivered batch can be checked against the
records it must hold."""
import random
import struct
import subprocess

_CRC = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    _CRC.append(_c)


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = _CRC[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked_crc(data):
    c = crc32c(data)
    return ((c >> 15 | c << 17) + 0xA282EAD8) & 0xFFFFFFFF


def _varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field(num, payload):
    """A length-delimited field."""
    return _varint(num << 3 | 2) + _varint(len(payload)) + payload


def example(features):
    """A tf.train.Example of int64 features: {name: [int, ...]}."""
    entries = b""
    for name, values in features.items():
        packed = b"".join(_varint(v & (2**64 - 1)) for v in values)
        feature = _field(3, _field(1, packed))          # Feature.int64_list
        entries += _field(1, _field(1, name.encode()) + _field(2, feature))
    return _field(1, entries)                            # Example.features


def write_tfrecord(path, records):
    with open(path, "wb") as f:
        for r in records:
            head = struct.pack("<Q", len(r))
            f.write(head + struct.pack("<I", masked_crc(head)) + r +
                    struct.pack("<I", masked_crc(r)))


def token(source, record, position):
    return source * 10**8 + record * 1000 + position


def who(tok):
    """(source, record, position) of a token."""
    return tok // 10**8, tok // 1000 % 10**5, tok % 1000


def text_source(shardtool, out, source, records, mean, shards, seed=1, most=900):
    """A text source of `records` records of log-normal lengths (mean
    tokens, 1..most), their tokens naming themselves; plain TFRecords in
    OUT-raw, converted by shardtool into indexed shards in OUT (small
    frames: many a shard).  @return OUT and each record's length."""
    rnd = random.Random(seed * 7919 + source)
    raw = out.parent / (out.name + "-raw")
    raw.mkdir(parents=True, exist_ok=True)
    lengths = [max(1, min(most, int(rnd.lognormvariate(0, 0.8) * mean)))
               for _ in range(records)]
    per = -(-records // shards)
    for s in range(shards):
        recs = [example({"tokens": [token(source, r, p) for p in range(lengths[r])]})
                for r in range(s * per, min(records, (s + 1) * per))]
        write_tfrecord(raw / f"part-{s:05d}.tfrecord", recs)
    subprocess.run([str(shardtool), "convert", "--out", str(out), "--frame-size", "16K",
                    str(raw)], check=True, capture_output=True)
    return out, lengths
