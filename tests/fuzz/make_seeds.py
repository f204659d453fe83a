#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets whose inputs carry checksums
(a fuzzer cannot guess a valid crc32c). Run from the repo root; idempotent."""
import os
import struct


def crc32c(data, crc=0):
    crc ^= 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def layout(k, m, block, size):
    b = struct.pack("<IBBBBIIQI", 0x4C45574C, 1, k, m, 0, block, 0, size, 0)
    return b + struct.pack("<I", crc32c(b))


def record(typ, bucket, key, ver, seq, meta, payload):
    """A segment record (storage/rec.h) with valid header and chunk crcs."""
    chunks = [payload[i:i + 65536] for i in range(0, len(payload), 65536)]
    hlen = 48 + len(bucket) + len(key) + len(ver) + len(meta) + 4 * len(chunks)
    fixed = struct.pack("<IHBBIIQQHHHHI", 0x31524C57, 1, typ, 0, hlen, 0, seq, len(payload),
                        len(bucket), len(key), len(ver), 0, len(meta))
    body = bucket + key + ver + meta + b"".join(struct.pack("<I", crc32c(c)) for c in chunks)
    crc = crc32c(fixed + b"\0\0\0\0" + body)
    return fixed + struct.pack("<I", crc) + body + payload


def write(name, i, data):
    d = os.path.join("tests/fuzz/corpus", name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed-%02d" % i), "wb") as f:
        f.write(data)


if __name__ == "__main__":
    assert crc32c(b"123456789") == 0xE3069283
    cases = [(4, 2, 256, 3000), (1, 0, 64, 1), (8, 3, 1024, 0), (16, 4, 4096, 70000),
             (6, 3, 128, 1000), (4, 2, 2560, 10240)]
    for i, (k, m, b, s) in enumerate(cases):
        lay = layout(k, m, b if s else 0, s)
        write("ers_layout", i, lay + bytes(range(256)) * 4 + bytes([i * 3]))
    recs = [record(1, b"bkt", b"key", b"", 1, b"meta", b"hello"),
            record(2, b"b", b"", b"v1", 99, b"", b""),
            record(1, b"bucket", b"a/b/c", b"", 7, b"", bytes(range(256)) * 300)]
    for i, r in enumerate(recs):
        write("rec", i, r)
