"""The heal scanner (--scrub-interval) on one node: a drive replaced by an
empty one is refilled by the scanner with no heal call, after which two
other drives can go and every object still reads whole (by MD5)."""
import hashlib
import json
import os
import shutil
import time

from conftest import Server, s3_client, signed_request


def md5(b):
    return hashlib.md5(b).hexdigest()


def stats(srv):
    status, text, _ = signed_request(srv.port, "GET", "/_warmlake/stats")
    assert status == 200, text
    return json.loads(text)


def wait_for(pred, what, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return
        time.sleep(0.2)
    raise AssertionError("timed out waiting for " + what)


def test_scanner_refills_a_replaced_drive(datadir):
    srv = Server(datadir).start()
    c = s3_client(srv.endpoint)
    c.create_bucket(Bucket="scrubbed")
    want = {}
    for i, size in enumerate([0, 1000, 70000, 300000, 2500000, 9 * 1048576 + 7]):
        data = os.urandom(size)
        c.put_object(Bucket="scrubbed", Key="o%d" % i, Body=data)
        want["o%d" % i] = md5(data)
    srv.stop()
    # Drive 2 is replaced by an empty one.
    shutil.rmtree(os.path.join(datadir, "drive2"))
    srv.extra = ["--scrub-interval", "1", "--scrub-rate", "512M"]
    srv.start()
    wait_for(lambda: stats(srv)["scrub"]["passes"] >= 1, "a scanner pass")
    st = stats(srv)["scrub"]
    assert st["blocks_fixed"] > 0 and st["heads_fixed"] >= len(want), st
    assert st["failed"] == 0, st
    srv.stop()
    # Two more drives lost: the refilled one must stand in for one of them.
    for d in (3, 4):
        shutil.rmtree(os.path.join(datadir, "drive%d" % d))
    srv.extra = ["--scrub-interval", "0"]
    srv.start()
    c = s3_client(srv.endpoint)
    for k, h in want.items():
        assert md5(c.get_object(Bucket="scrubbed", Key=k)["Body"].read()) == h, k
    assert "scrub" not in stats(srv)
    srv.stop()
