"""warmlake.Client (ctypes over libwarmlake.so) against a real warmlaked:
reads into bytearrays, memoryviews and numpy arrays in place, ranges,
paged listings, errors with their S3 code and request id, batch get with
per-key errors, with batch GET tried and turned off."""
import hashlib
import os

import pytest

from conftest import AK, SK, s3_client
from pyclient import need_lib


@pytest.fixture
def client(server):
    need_lib()
    import warmlake
    c = warmlake.Client(server.endpoint, access_key=AK, secret_key=SK, part_size=5 << 20)
    c.create_bucket("pyb")
    yield c
    c.close()


def test_put_get_in_place(client, server):
    import numpy as np
    import warmlake
    data = os.urandom(12 << 20)  # three parts: a multipart upload, a parallel read
    etag = client.put("pyb", "big", data)
    assert etag.endswith("-3")
    assert s3_client(server.endpoint).get_object(Bucket="pyb", Key="big")["Body"].read() == data
    ba = bytearray(len(data))
    assert client.get_into("pyb", "big", ba) == len(data) and ba == data
    arr = np.zeros(len(data) // 4, dtype=np.float32)  # a numpy array, filled where it is
    assert client.get_into("pyb", "big", arr) == len(data)
    assert arr.tobytes() == data
    mv = memoryview(bytearray(100))
    assert client.get_into("pyb", "big", mv[10:60], offset=1000, length=50) == 50
    assert bytes(mv[10:60]) == data[1000:1050] and bytes(mv[:10]) == bytes(10)
    assert client.get("pyb", "big", 5, 7) == data[5:12]
    small = np.arange(1000, dtype=np.int64)
    client.put("pyb", "np", small)  # a numpy array as the body, no copy made
    assert client.get("pyb", "np") == small.tobytes()
    client.put("pyb", "empty", b"")
    assert client.get("pyb", "empty") == b""
    assert client.stat("pyb", "np")["size"] == 8000
    with pytest.raises(warmlake.WarmlakeError) as e:
        client.get_into("pyb", "big", bytearray(10))
    assert e.value.code == -11  # too large for the buffer
    path = "/tmp/wl-py-%d" % os.getpid()
    try:
        client.get_file("pyb", "big", path)
        with open(path, "rb") as f:
            assert f.read() == data
        client.put_file("pyb", "fromfile", path)
        assert hashlib.sha256(client.get("pyb", "fromfile")).digest() == \
            hashlib.sha256(data).digest()
    finally:
        os.unlink(path)


def test_errors_list_delete(client):
    import warmlake
    with pytest.raises(warmlake.NotFoundError) as e:
        client.get_into("pyb", "missing", bytearray(10))
    assert e.value.http_status == 404 and e.value.s3_code == "NoSuchKey"
    assert e.value.request_id
    with pytest.raises(KeyError):  # a HEAD has no body, so no S3 code: still a NotFoundError
        client.get("pyb", "missing")
    for i in range(25):
        client.put("pyb", "l/%02d" % i, b"x" * i)
    client.put("pyb", "l/sub/a", b"a")
    keys = [o["key"] for o in client.list("pyb", "l/", page_size=7)]
    assert keys == ["l/%02d" % i for i in range(25)] + ["l/sub/a"]
    rolled = list(client.list("pyb", "l/", delimiter="/", page_size=10))
    assert {"prefix": "l/sub/"} in rolled and len(rolled) == 26
    client.copy("pyb", "l/05", "pyb", "l/copy")
    assert client.get("pyb", "l/copy") == b"x" * 5
    client.delete("pyb", "l/copy")
    client.delete("pyb", "l/00")
    assert len(list(client.list("pyb", "l/"))) == 25
    url = client.presign("pyb", "l/03")
    import urllib.request
    assert urllib.request.urlopen(url, timeout=10).read() == b"xxx"


@pytest.mark.parametrize("batch", [True, False])
def test_get_batch(client, server, batch):
    import warmlake
    blobs = {"b/%d" % i: os.urandom(100 + 37 * i) for i in range(30)}
    for k, v in blobs.items():
        client.put("pyb", k, v)
    keys = list(blobs) + ["b/missing"]
    c2 = warmlake.Client(server.endpoint, access_key=AK, secret_key=SK, no_batch=not batch,
                         verify_get=True)
    res = c2.get_batch("pyb", keys, sizes=[len(blobs.get(k, b"")) + 10 for k in keys])
    for k, r in zip(keys, res):
        if k == "b/missing":
            assert isinstance(r, warmlake.NotFoundError)
        else:
            assert bytes(r) == blobs[k]
    # Ranges, into the caller's buffers.
    bufs = [bytearray(8) for _ in range(3)]
    res = c2.get_batch("pyb", ["b/1", "b/2", "b/3"], bufs=bufs,
                       ranges=[(0, 8), (10, 5), (100, 8)])
    assert [bytes(r) for r in res] == [blobs["b/1"][:8], blobs["b/2"][10:15],
                                       blobs["b/3"][100:108]]
    assert bufs[1][:5] == blobs["b/2"][10:15]
    st = c2.stats()
    if batch:
        assert st["batch_requests"] >= 1
    else:
        assert st["batch_requests"] == 0
    assert st["batch_entries"] + st["single_gets"] == 34
    c2.close()


def test_read_ahead(client):
    import warmlake
    blobs = [os.urandom(1000 + i) for i in range(12)]
    for i, b in enumerate(blobs):
        client.put("pyb", "ra/%d" % i, b)
    items = ["ra/%d" % i for i in range(12)]
    items[5] = ("ra/5", 10, 20)
    got = list(client.read_ahead("pyb", items, depth=3, mem_bound=5000))
    want = list(blobs)
    want[5] = blobs[5][10:30]
    assert got == want
    with pytest.raises(warmlake.NotFoundError):
        list(client.read_ahead("pyb", ["ra/0", "ra/none", "ra/1"]))
    assert list(client.read_ahead("pyb", [])) == []
    # If-Match per part: the version asked for, or a refusal from the server.
    etag = client.stat("pyb", "ra/2")["etag"]
    assert list(client.read_ahead("pyb", [("ra/2", 0, 10, etag), ("ra/2", 10, 10, etag)])) == \
        [blobs[2][:10], blobs[2][10:20]]
    with pytest.raises(warmlake.WarmlakeError) as e:
        list(client.read_ahead("pyb", [("ra/2", 0, 10, "0" * 32)]))
    assert e.value.http_status == 412


def test_read_ahead_into_buffers(client):
    """read_ahead(buffers=...): items land in the buffers given, in turn, and come out as
    views of them; the buffers are read into again only after their view was given up."""
    import warmlake
    blobs = [os.urandom(3000 + 17 * i) for i in range(10)]
    for i, b in enumerate(blobs):
        client.put("pyb", "rb/%d" % i, b)
    bufs = [bytearray(4000) for _ in range(3)]
    ids = {id(b) for b in bufs}
    items = ["rb/%d" % i for i in range(10)]
    items[4] = ("rb/4", 100, 50, client.stat("pyb", "rb/4")["etag"])
    seen = []
    for i, v in enumerate(client.read_ahead("pyb", items, depth=8, buffers=bufs)):
        assert isinstance(v, memoryview) and id(v.obj) in ids
        want = blobs[i][100:150] if i == 4 else blobs[i]
        assert bytes(v) == want
        # The views handed out before this one (but the last) were reused for later items.
        seen.append((v.obj, want))
        v.release()
    assert {id(o) for o, _ in seen} == ids
    # More than the buffers hold: WL_ETOOLARGE for that item, when its turn comes.
    with pytest.raises(warmlake.WarmlakeError) as e:
        list(client.read_ahead("pyb", ["rb/0", "rb/9"], buffers=[bytearray(3100)] * 2))
    assert e.value.code == -11
    with pytest.raises(warmlake.WarmlakeError) as e:
        list(client.read_ahead("pyb", [("rb/2", 0, 10, "0" * 32)], buffers=bufs))
    assert e.value.http_status == 412
    with pytest.raises(ValueError):
        list(client.read_ahead("pyb", ["rb/0"], buffers=[bytearray(4000)]))
    assert list(client.read_ahead("pyb", [], buffers=bufs)) == []


def test_get_bytes(client):
    """get / get_bytes / get_batch(as_bytes=True): bytes received straight into the object
    returned, cut when shorter than asked, refused when larger."""
    import warmlake
    data = os.urandom(100000)
    client.put("pyb", "gb", data)
    got = client.get_bytes("pyb", "gb", len(data))
    assert type(got) is bytes and got == data and hash(got) == hash(data)
    assert client.get_bytes("pyb", "gb", len(data) + 5000) == data  # cut to what came
    assert client.get_bytes("pyb", "gb", 9000, offset=10, length=9000) == data[10:9010]
    assert client.get_bytes("pyb", "gb", 10, offset=10, length=10) == data[10:20]  # small
    with pytest.raises(warmlake.WarmlakeError) as e:
        client.get_bytes("pyb", "gb", len(data) - 1)
    assert e.value.code == -11
    assert client.get("pyb", "gb") == data and client.get("pyb", "gb", 99990) == data[99990:]
    # Two reads give two objects: nothing is shared between them.
    a, b = client.get("pyb", "gb"), client.get("pyb", "gb")
    assert a == b and a is not b
    client.put("pyb", "gb2", data[:5000])
    res = client.get_batch("pyb", ["gb", "gb2", "gb-none", "gb"],
                           sizes=[len(data), 6000, 10, 10], as_bytes=True)
    assert type(res[0]) is bytes and res[0] == data
    assert type(res[1]) is bytes and res[1] == data[:5000]
    assert isinstance(res[2], warmlake.NotFoundError)
    assert isinstance(res[3], warmlake.WarmlakeError) and res[3].code == -11
    with pytest.raises(ValueError):
        client.get_batch("pyb", ["gb"], bufs=[bytearray(10)], as_bytes=True)
