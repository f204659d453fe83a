"""The heal scanner (--scrub-interval) on one node: a drive replaced by an
empty one is refilled by the scanner with no heal call, after which two
other drives can go and every object still reads whole (by MD5): current
versions, the noncurrent versions of a versioned bucket, a multipart
object (manifest and parts), and the parts of an upload still in progress,
which then completes."""
import hashlib
import json
import os
import shutil
import time

import pytest
from botocore.exceptions import ClientError

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
    # Versions kept by a versioned bucket (inline and erasure-coded), one under a marker.
    c.create_bucket(Bucket="kept")
    c.put_bucket_versioning(Bucket="kept", VersioningConfiguration={"Status": "Enabled"})
    versions = {}
    for v in range(3):
        for i, size in enumerate([300, 200000]):
            data = os.urandom(size + v)
            r = c.put_object(Bucket="kept", Key="v%d" % i, Body=data)
            versions[("v%d" % i, r["VersionId"])] = md5(data)
    c.delete_object(Bucket="kept", Key="v0")
    # A multipart object, and an upload left open with two parts.
    parts_data = [os.urandom(5 << 20), os.urandom(3 << 20)]

    def upload(key, complete):
        up = c.create_multipart_upload(Bucket="scrubbed", Key=key)["UploadId"]
        parts = [{"PartNumber": n + 1, "ETag": c.upload_part(
            Bucket="scrubbed", Key=key, UploadId=up, PartNumber=n + 1, Body=d)["ETag"]}
            for n, d in enumerate(parts_data)]
        if complete:
            c.complete_multipart_upload(Bucket="scrubbed", Key=key, UploadId=up,
                                        MultipartUpload={"Parts": parts})
        return up, parts
    upload("mp-done", True)
    want["mp-done"] = md5(b"".join(parts_data))
    open_up, open_parts = upload("mp-open", False)
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
    for (k, vid), h in versions.items():
        assert md5(c.get_object(Bucket="kept", Key=k, VersionId=vid)["Body"].read()) == h, (k, vid)
    c.complete_multipart_upload(Bucket="scrubbed", Key="mp-open", UploadId=open_up,
                                MultipartUpload={"Parts": open_parts})
    assert md5(c.get_object(Bucket="scrubbed", Key="mp-open")["Body"].read()) == \
        md5(b"".join(parts_data))
    assert "scrub" not in stats(srv)
    srv.stop()


def test_refill_walks_the_replaced_drives_set_first(datadir):
    """A node of two 4+2 sets (twelve drives) with a drive of set 0 replaced: the scanner's
    pass refills it by walking set 0 alone (its log's refill_pass names fewer objects than
    the whole pass), unmarks it, and only then walks set 1. The refill is whole: with two
    more drives of set 0 gone, every object of both sets reads back by MD5 (current,
    noncurrent, multipart, and an upload still open, which then completes)."""
    srv = Server(datadir, drives=12).start()
    c = s3_client(srv.endpoint)
    c.create_bucket(Bucket="two")
    want = {}
    for i in range(32):
        data = os.urandom([0, 1000, 200000, 1500000][i % 4] + i)
        c.put_object(Bucket="two", Key="o%02d" % i, Body=data)
        want[("two", "o%02d" % i, None)] = md5(data)
    c.create_bucket(Bucket="kept")
    c.put_bucket_versioning(Bucket="kept", VersioningConfiguration={"Status": "Enabled"})
    for i in range(8):
        for v in range(2):
            data = os.urandom(70000 * (i % 2) + 300 + v)
            r = c.put_object(Bucket="kept", Key="v%d" % i, Body=data)
            want[("kept", "v%d" % i, r["VersionId"])] = md5(data)
    parts_data = [os.urandom(5 << 20), os.urandom(1 << 20)]
    uploads = {}
    for key in ("mp%d" % i for i in range(4)):
        up = c.create_multipart_upload(Bucket="two", Key=key)["UploadId"]
        uploads[key] = (up, [{"PartNumber": n + 1, "ETag": c.upload_part(
            Bucket="two", Key=key, UploadId=up, PartNumber=n + 1, Body=d)["ETag"]}
            for n, d in enumerate(parts_data)])
    for key in ("mp0", "mp1"):
        c.complete_multipart_upload(Bucket="two", Key=key, UploadId=uploads[key][0],
                                    MultipartUpload={"Parts": uploads[key][1]})
        want[("two", key, None)] = md5(b"".join(parts_data))
    srv.stop()
    shutil.rmtree(os.path.join(datadir, "drive2"))  # set 0's third store
    srv.extra = ["--scrub-interval", "1", "--scrub-rate", "512M"]
    srv.start()
    wait_for(lambda: stats(srv)["scrub"]["passes"] >= 1, "a scanner pass")
    st = stats(srv)
    assert st["scrub"]["failed"] == 0, st["scrub"]
    assert [d["refilling"] for d in st["drives"]] == [0] * 12, st["drives"]
    log = srv.read_log()
    refill = [ln for ln in log.splitlines() if "event=refill_pass" in ln]
    whole = [ln for ln in log.splitlines() if "event=scrub_pass" in ln]
    assert len(refill) == 1 and whole, log[-3000:]

    def field(line, name):
        return int(line.split(" %s=" % name)[1].split()[0], 0)
    assert field(refill[0], "sets") == 1 and field(refill[0], "failed") == 0, refill[0]
    assert field(refill[0], "blocks_fixed") > 0, refill[0]
    assert 0 < field(refill[0], "objects") < field(whole[0], "objects"), (refill[0], whole[0])
    assert log.index("event=refill_pass") < log.index("event=scrub_pass")
    # Nothing was rebuilt after the drive was unmarked (set 1 lost nothing); the heads the
    # whole pass fixed beyond the refill's are the bucket records it heals before either.
    assert field(whole[0], "blocks_fixed") == field(refill[0], "blocks_fixed"), whole[0]
    assert field(whole[0], "heads_fixed") - field(refill[0], "heads_fixed") <= 2, whole[0]
    srv.stop()
    for d in (3, 4):
        shutil.rmtree(os.path.join(datadir, "drive%d" % d))
    srv.extra = ["--scrub-interval", "0"]
    srv.start()
    c = s3_client(srv.endpoint)
    for (b, k, vid), h in want.items():
        kw = {"VersionId": vid} if vid else {}
        assert md5(c.get_object(Bucket=b, Key=k, **kw)["Body"].read()) == h, (b, k, vid)
    for key in ("mp2", "mp3"):
        c.complete_multipart_upload(Bucket="two", Key=key, UploadId=uploads[key][0],
                                    MultipartUpload={"Parts": uploads[key][1]})
        assert md5(c.get_object(Bucket="two", Key=key)["Body"].read()) == \
            md5(b"".join(parts_data)), key
    srv.stop()


def test_refill_cut_short_by_kill9_is_resumed(datadir):
    """A refill (the scanner's pass over a replaced drive, its rebuilt blocks written
    without waiting and each object's head once its blocks are durable) cut short by
    kill -9 once the drive took some of them: the drive stays marked, the next start's
    pass finishes it and clears the mark, and then two other drives can go: every object
    (erasure-coded of one and several stripes, inline, multipart) reads back by MD5. The
    kill waits for progress, not for time: the pass is paced (--scrub-rate) to last
    far longer than the kill takes, and the mark left behind shows it was cut short."""
    srv = Server(datadir).start()
    c = s3_client(srv.endpoint)
    c.create_bucket(Bucket="cut")
    want = {}
    for i in range(24):
        data = os.urandom([3000, 400000, 1 << 20, 5 * 1048576 + 11][i % 4] + i)
        c.put_object(Bucket="cut", Key="o%02d" % i, Body=data)
        want["o%02d" % i] = md5(data)
    parts = [os.urandom(5 << 20), os.urandom(1 << 20)]
    up = c.create_multipart_upload(Bucket="cut", Key="mp")["UploadId"]
    etags = [{"PartNumber": n + 1, "ETag": c.upload_part(
        Bucket="cut", Key="mp", UploadId=up, PartNumber=n + 1, Body=d)["ETag"]}
        for n, d in enumerate(parts)]
    c.complete_multipart_upload(Bucket="cut", Key="mp", UploadId=up,
                                MultipartUpload={"Parts": etags})
    want["mp"] = md5(b"".join(parts))
    srv.stop()
    shutil.rmtree(os.path.join(datadir, "drive2"))
    # About 4 MB of objects verified per second: the pass takes some 15 s.
    srv.extra = ["--scrub-interval", "1", "--scrub-rate", "4M"]
    srv.start()

    def some_refilled():
        st = stats(srv)
        return st["scrub"]["objects"] >= 6 and st["drives"][2]["user_bytes"] > 0
    wait_for(some_refilled, "part of the refill")
    srv.kill9()
    assert os.path.exists(os.path.join(datadir, "drive2", "refilling")), "the pass was not cut"
    srv.extra = ["--scrub-interval", "1", "--scrub-rate", "512M"]
    srv.start()
    wait_for(lambda: stats(srv)["scrub"]["passes"] >= 1, "a scanner pass")
    st = stats(srv)
    assert st["scrub"]["failed"] == 0, st["scrub"]
    assert [d["refilling"] for d in st["drives"]] == [0] * 6, st["drives"]
    assert not os.path.exists(os.path.join(datadir, "drive2", "refilling"))
    srv.stop()
    for d in (3, 4):
        shutil.rmtree(os.path.join(datadir, "drive%d" % d))
    srv.extra = ["--scrub-interval", "0"]
    srv.start()
    c = s3_client(srv.endpoint)
    for k, h in want.items():
        assert md5(c.get_object(Bucket="cut", Key=k)["Body"].read()) == h, k
    srv.stop()


def test_every_drive_replaced_in_turn(datadir):
    """Each of the six drives replaced by an empty one in turn, the scanner's pass between:
    every copy of everything has been lost once, so only what the scanner puts back is
    left: the bucket's records and configurations (CORS, lifecycle), current and noncurrent
    versions, all read back by hash."""
    srv = Server(datadir).start()
    c = s3_client(srv.endpoint)
    c.create_bucket(Bucket="turns")
    c.put_bucket_versioning(Bucket="turns", VersioningConfiguration={"Status": "Enabled"})
    cors = {"CORSRules": [{"AllowedMethods": ["GET"], "AllowedOrigins": ["https://a.example"]}]}
    c.put_bucket_cors(Bucket="turns", CORSConfiguration=cors)
    lc = {"Rules": [{"ID": "old", "Status": "Enabled", "Filter": {"Prefix": "tmp/"},
                     "Expiration": {"Days": 30}}]}
    c.put_bucket_lifecycle_configuration(Bucket="turns", LifecycleConfiguration=lc)
    want = {}
    for v in range(2):
        for i, size in enumerate([100, 150000]):
            data = os.urandom(size + v)
            r = c.put_object(Bucket="turns", Key="k%d" % i, Body=data)
            want[("k%d" % i, r["VersionId"])] = md5(data)
    srv.stop()
    srv.extra = ["--scrub-interval", "1", "--scrub-rate", "512M"]
    for d in range(6):
        shutil.rmtree(os.path.join(datadir, "drive%d" % d))
        srv.start()
        wait_for(lambda: stats(srv)["scrub"]["passes"] >= 1, "a scanner pass")
        assert stats(srv)["scrub"]["failed"] == 0, stats(srv)["scrub"]
        srv.stop()
    srv.extra = ["--scrub-interval", "0"]
    srv.start()
    try:
        c = s3_client(srv.endpoint)
        for (k, vid), h in want.items():
            assert md5(c.get_object(Bucket="turns", Key=k, VersionId=vid)["Body"].read()) == h
        assert c.get_bucket_cors(Bucket="turns")["CORSRules"][0]["AllowedOrigins"] == \
            ["https://a.example"]
        assert c.get_bucket_lifecycle_configuration(Bucket="turns")["Rules"][0]["ID"] == "old"
        assert c.get_bucket_versioning(Bucket="turns")["Status"] == "Enabled"
    finally:
        srv.stop()


def test_replaced_drive_is_listed_last(datadir):
    """An empty drive in a failed one's place holds none of the heads the set
    expects of it: small objects keep their heads and bytes on three stores
    of six (m+1), and a listing merges four (k). Until the scanner has refilled
    it, the drive is marked (DRIVE/refilling, `refilling` in the stats) and
    listings take it last: every key is listed, with no scanner at all. Once a
    scanner pass (started at once when a node finds a replaced drive) ends
    with nothing left to fix, the mark goes."""
    srv = Server(datadir, extra=["--scrub-interval", "0"]).start()
    c = s3_client(srv.endpoint)
    c.create_bucket(Bucket="relist")
    want = {}
    for i in range(48):
        data = os.urandom(500 + i)
        c.put_object(Bucket="relist", Key="s%02d" % i, Body=data)
        want["s%02d" % i] = md5(data)
    big = os.urandom(700000)
    c.put_object(Bucket="relist", Key="big", Body=big)
    want["big"] = md5(big)
    srv.stop()
    shutil.rmtree(os.path.join(datadir, "drive0"))
    srv.start()  # no scanner: the drive stays empty

    def listed():
        keys, token = [], None
        while True:
            kw = {"Bucket": "relist", "MaxKeys": 10}
            if token:
                kw["ContinuationToken"] = token
            r = c.list_objects_v2(**kw)
            keys += [o["Key"] for o in r.get("Contents", [])]
            if not r.get("IsTruncated"):
                return keys
            token = r["NextContinuationToken"]

    c = s3_client(srv.endpoint)
    assert listed() == sorted(want)
    drives = stats(srv)["drives"]
    assert [d["refilling"] for d in drives] == [1, 0, 0, 0, 0, 0], drives
    assert os.path.exists(os.path.join(datadir, "drive0", "refilling"))
    for k, h in want.items():
        assert md5(c.get_object(Bucket="relist", Key=k)["Body"].read()) == h, k
    srv.stop()
    # With the scanner on (a week between passes): the mark makes it start now.
    srv.extra = ["--scrub-interval", "604800", "--scrub-rate", "512M"]
    srv.start()
    wait_for(lambda: stats(srv)["scrub"]["passes"] >= 1, "a scanner pass")
    drives = stats(srv)["drives"]
    assert [d["refilling"] for d in drives] == [0] * 6, drives
    assert drives[0]["live_bytes"] > 0, drives[0]
    assert not os.path.exists(os.path.join(datadir, "drive0", "refilling"))
    c = s3_client(srv.endpoint)
    assert listed() == sorted(want)
    srv.stop()



class Retrying(Server):
    """A node whose first refill retry comes a second after a pass fell short."""
    def env(self):
        return dict(super().env(), WARMLAKE_REFILL_RETRY_S="1")


def refill_falling_short(datadir, drives, objects):
    """A node of `drives` drives (4+2 sets) with `objects` objects of 300 KB, drives 0-2
    (three of set 0: its objects past repair) replaced, running until its scanner passed
    three times: the node, running."""
    srv = Retrying(datadir, drives=drives, extra=["--scrub-interval", "0"]).start()
    c = s3_client(srv.endpoint)
    c.create_bucket(Bucket="short")
    for i in range(objects):
        c.put_object(Bucket="short", Key="o%d" % i, Body=os.urandom(300000))
    srv.stop()
    for d in (0, 1, 2):
        shutil.rmtree(os.path.join(datadir, "drive%d" % d))
    srv.extra = ["--scrub-interval", "604800", "--scrub-rate", "512M"]
    srv.start()
    wait_for(lambda: stats(srv)["scrub"]["passes"] >= 3, "passes tried again", timeout=90)
    return srv

def test_refill_pass_that_falls_short_is_tried_again_soon(datadir):
    """A scanner pass over a replaced drive that leaves failures (here objects past repair:
    three of six drives replaced) kept the drive marked refilling, read last, until the next
    interval, a week by default (a cluster probe). It is tried again within minutes, twice as
    late each time (WARMLAKE_REFILL_RETRY_S shortens the first wait for this test)."""
    srv = refill_falling_short(datadir, drives=6, objects=4)
    st = stats(srv)
    assert st["scrub"]["failed"] > 0, st["scrub"]
    assert [d["refilling"] for d in st["drives"]][:3] == [1, 1, 1], st["drives"]
    srv.stop()



def test_refill_part_that_falls_short_ends_the_pass(datadir):
    """Two 4+2 sets on one node, three drives of set 0 replaced (its objects past repair):
    each pass's refill part falls short, so the pass ends there, the drives stay marked, and
    it is tried again within seconds (WARMLAKE_REFILL_RETRY_S), not after a walk of set 1,
    which at the scrub rate could take hours. Set 1's objects are never walked by these
    passes (each pass names only the refill part's objects)."""
    srv = refill_falling_short(datadir, drives=12, objects=16)
    st = stats(srv)
    assert [d["refilling"] for d in st["drives"]] == [1, 1, 1] + [0] * 9, st["drives"]
    log = srv.read_log()
    srv.stop()

    def objects(line):
        return int(line.split(" objects=")[1].split()[0])
    refills = [ln for ln in log.splitlines() if "event=refill_pass " in ln]
    passes = [ln for ln in log.splitlines() if "event=scrub_pass " in ln]
    assert len(refills) >= 3 and len(passes) >= 3, log[-3000:]
    for r, p in zip(refills, passes):
        assert " failed=0" not in r, r
        assert objects(p) == objects(r) > 0, (r, p)
    assert "event=refill_pass_short" in log

def test_heal_rewrites_a_rotten_inline_copy(datadir):
    """A small object's copies are its data: bytes rotten in one copy are found by a heal
    and the copy rewritten, so that the other copies can go later. Its head's metadata
    still read fine, so a heal used to pass it by (reads kept failing over to another
    copy), and losing the other copies then lost the object."""
    import glob
    srv = Server(datadir, extra=["--scrub-interval", "0"]).start()
    try:
        c = s3_client(srv.endpoint)
        c.create_bucket(Bucket="rot")
        data = os.urandom(5000)
        c.put_object(Bucket="rot", Key="small", Body=data)
        srv.stop()
        snippet = data[1000:1400]

        def copies():  # drive dir -> [(path, offset)] of the bytes' records
            found = {}
            for path in glob.glob(os.path.join(srv.data, "drive*", "segments", "*.seg")):
                with open(path, "rb") as f:
                    content = f.read()
                i = content.find(snippet)
                while i >= 0:
                    found.setdefault(path.split("/segments/")[0], []).append((path, i))
                    i = content.find(snippet, i + 1)
            return found

        def rot(where):
            for path, off in where:
                with open(path, "r+b") as f:
                    f.seek(off + 10)
                    b = f.read(8)
                    f.seek(off + 10)
                    f.write(bytes(x ^ 0xFF for x in b))
        before = copies()
        assert len(before) == 3, before  # m+1 whole copies, on three drives
        first = sorted(before)[0]
        rot(before[first])
        srv.start()
        c = s3_client(srv.endpoint)
        assert md5(c.get_object(Bucket="rot", Key="small")["Body"].read()) == md5(data)
        st, body, _ = signed_request(srv.port, "POST", "/_warmlake/heal?bucket=rot")
        assert st == 200, body
        assert json.loads(body)["heads_fixed"] >= 1, body
        srv.stop()
        # The other two copies rot too: the rewritten one still holds the object.
        now = copies()
        for d in now:
            if d != first:
                rot(now[d])
        srv.start()
        c = s3_client(srv.endpoint)
        assert md5(c.get_object(Bucket="rot", Key="small")["Body"].read()) == md5(data)
    finally:
        srv.stop()


def put_cut_by_kill9(srv, bucket, key, live):
    """A 64 MiB PUT of which 24 MiB are sent, then the node is killed (SIGKILL) once the blocks
    of what was sent are on the drives (stripes of 4 MiB: at least 16 MiB of data, 24 MiB
    with parity): blocks that no head names."""
    import hashlib as _h
    import http.client
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials
    from conftest import AK, SK
    before = live()
    size, sent = 64 << 20, 24 << 20
    path = "/%s/%s" % (bucket, key)
    req = AWSRequest(method="PUT", url="http://127.0.0.1:%d%s" % (srv.port, path), data=b"",
                     headers={"x-amz-content-sha256": "UNSIGNED-PAYLOAD"})

    class Signer(S3SigV4Auth):
        def payload(self, request):
            return "UNSIGNED-PAYLOAD"
    Signer(Credentials(AK, SK), "s3", "us-east-1").add_auth(req)
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
    conn.putrequest("PUT", path, skip_host=True, skip_accept_encoding=True)
    conn.putheader("Host", "127.0.0.1:%d" % srv.port)
    for k, v in req.headers.items():
        conn.putheader(k, v)
    conn.putheader("Content-Length", str(size))
    conn.endheaders()
    chunk = _h.sha256(b"x").digest() * (1 << 15)  # 1 MiB
    for _ in range(sent >> 20):
        conn.send(chunk)
    wait_for(lambda: live() - before >= 24 << 20, "the cut PUT's blocks on the drives", 60)
    srv.kill9()
    conn.close()


def test_reaper_frees_the_blocks_of_a_put_cut_short(datadir):
    """A node killed (SIGKILL) in the middle of a large PUT leaves the blocks it had written
    and no head naming them. After a restart the scanner's reaper finds them (named by no
    version on any drive), waits out its grace, and deletes them: the drives' live bytes go
    down by about what they were. Every acknowledged object, current, noncurrent and
    multipart, and an upload still open, read back whole afterwards (by MD5)."""
    srv = Server(datadir).start()
    c = s3_client(srv.endpoint)
    c.create_bucket(Bucket="reap")
    want = {}
    for i, size in enumerate([1000, 300000, 5 << 20]):
        data = os.urandom(size)
        c.put_object(Bucket="reap", Key="o%d" % i, Body=data)
        want[("o%d" % i, None)] = md5(data)
    c.create_bucket(Bucket="reapv")
    c.put_bucket_versioning(Bucket="reapv", VersioningConfiguration={"Status": "Enabled"})
    for v in range(2):
        data = os.urandom(200000 + v)
        vid = c.put_object(Bucket="reapv", Key="v", Body=data)["VersionId"]
        want[("v", vid)] = md5(data)
    parts = [os.urandom(5 << 20), os.urandom(1 << 20)]
    up = c.create_multipart_upload(Bucket="reap", Key="mp")["UploadId"]
    etags = [c.upload_part(Bucket="reap", Key="mp", UploadId=up, PartNumber=n + 1,
                           Body=d)["ETag"] for n, d in enumerate(parts)]
    c.complete_multipart_upload(Bucket="reap", Key="mp", UploadId=up, MultipartUpload={
        "Parts": [{"PartNumber": n + 1, "ETag": e} for n, e in enumerate(etags)]})
    want[("mp", None)] = md5(b"".join(parts))
    open_up = c.create_multipart_upload(Bucket="reap", Key="open")["UploadId"]
    open_part = os.urandom(5 << 20)
    open_etag = c.upload_part(Bucket="reap", Key="open", UploadId=open_up, PartNumber=1,
                              Body=open_part)["ETag"]

    def live():
        return sum(d["live_bytes"] for d in stats(srv)["drives"])
    before = live()
    put_cut_by_kill9(srv, "reap", "cut", live)
    srv.extra = ["--scrub-interval", "1", "--reap-grace", "2"]
    srv.start()
    c = s3_client(srv.endpoint)
    orphaned = live() - before
    assert orphaned >= 24 << 20, orphaned
    wait_for(lambda: stats(srv)["scrub"]["reaped_groups"] >= 6, "the reaper", 120)
    st = stats(srv)["scrub"]
    assert st["reaped_bytes"] >= 24 << 20, st
    assert live() - before < 1 << 20, (live(), before)
    with pytest.raises(ClientError):
        c.head_object(Bucket="reap", Key="cut")
    for (key, vid), h in want.items():
        bucket = "reapv" if key == "v" else "reap"
        kw = {"VersionId": vid} if vid else {}
        assert md5(c.get_object(Bucket=bucket, Key=key, **kw)["Body"].read()) == h, key
    c.complete_multipart_upload(Bucket="reap", Key="open", UploadId=open_up, MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": open_etag}]})
    assert md5(c.get_object(Bucket="reap", Key="open")["Body"].read()) == md5(open_part)
    srv.stop()



def test_a_deleted_buckets_leftovers_are_purged(datadir):
    """A bucket emptied and deleted keeps what no listing shows: here the blocks of a PUT cut
    short by a SIGKILL (no head names them) and its objects' tombstones. The reaper walks
    live buckets only, so they stayed for good (a soak probe: 13-20 MiB per drive after
    every bucket was emptied and deleted). The scanner's pass purges a deleted bucket's
    records once the reaper's grace has passed: the drives' live bytes go back to what they
    were before the bucket, and another bucket's objects stay whole."""
    srv = Server(datadir).start()
    c = s3_client(srv.endpoint)

    def live():
        return sum(d["live_bytes"] for d in stats(srv)["drives"])
    c.create_bucket(Bucket="keep")
    kept = os.urandom(300000)
    c.put_object(Bucket="keep", Key="k", Body=kept)
    before = live()
    c.create_bucket(Bucket="gone")
    for i, size in enumerate([0, 1000, 300000, 2 << 20]):
        c.put_object(Bucket="gone", Key="o%d" % i, Body=os.urandom(size))
    put_cut_by_kill9(srv, "gone", "cut", live)
    srv.start()  # (no scanner pass for a week: the default interval)
    c = s3_client(srv.endpoint)
    for i in range(4):
        c.delete_object(Bucket="gone", Key="o%d" % i)
    c.delete_bucket(Bucket="gone")
    left = live() - before
    assert left >= 24 << 20, left  # the cut PUT's blocks: a listing never shows them
    srv.stop()
    srv.extra = ["--scrub-interval", "1", "--reap-grace", "2"]
    srv.start()
    wait_for(lambda: stats(srv)["scrub"]["purged_buckets"] >= 1, "the purge", 120)
    st = stats(srv)["scrub"]
    assert st["purged_bytes"] >= 24 << 20, st
    assert live() - before < 64 << 10, (live(), before)
    c = s3_client(srv.endpoint)
    assert md5(c.get_object(Bucket="keep", Key="k")["Body"].read()) == md5(kept)
    c.create_bucket(Bucket="gone")  # a new incarnation: empty, and writable
    assert "Contents" not in c.list_objects_v2(Bucket="gone")
    c.put_object(Bucket="gone", Key="o0", Body=b"again")
    assert c.get_object(Bucket="gone", Key="o0")["Body"].read() == b"again"
    srv.stop()


def live_records(datadir, drives=6):
    """{(bucket, key, version)}: what a stopped node's drives hold, from `wl-drive dump` (the
    newest record of each id that is data, not a drive's delete)."""
    from conftest import BUILD
    import subprocess
    newest = {}
    for d in range(drives):
        out = subprocess.run([os.path.join(BUILD, "storage", "wl-drive"), "dump",
                              os.path.join(datadir, "drive%d" % d)],
                             capture_output=True, check=True, timeout=60).stdout
        for line in out.split(b"\n"):
            f = dict(x.split(b"=", 1) for x in line.split(b" ") if b"=" in x)
            if b"seq" not in f:
                continue
            i = (d, f[b"bucket"], f[b"key"], f[b"version"], f[b"shard"])
            if int(f[b"seq"]) > newest.get(i, (0, b""))[0]:
                newest[i] = (int(f[b"seq"]), f[b"type"])
    return {(i[1], i[2], i[3]) for i, (seq, kind) in newest.items() if kind == b"data"}


def test_nothing_of_a_deleted_bucket_stays_after_a_kill(datadir, monkeypatch):
    """A bucket's objects deleted, the bucket deleted, the node killed (SIGKILL) at once: the
    tombstones of those deletes and of the bucket's record go a minute on, by the heal thread
    of the node that made them, so the kill kept them for good, with the blocks of a PUT cut
    short. Now the purge takes everything under the bucket's name, and the scanner's walk of
    the internal buckets drops the old tombstones of its record and of the purge's own note
    (a review). Afterwards no record of the bucket is left on any drive."""
    monkeypatch.setenv("WARMLAKE_HEAD_DROP_DELAY_S", "1")
    srv = Server(datadir).start()
    c = s3_client(srv.endpoint)

    def live():
        return sum(d["live_bytes"] for d in stats(srv)["drives"])
    c.create_bucket(Bucket="keep")
    c.put_object(Bucket="keep", Key="k", Body=b"kept")
    c.create_bucket(Bucket="gone")
    for i, size in enumerate([0, 1000, 300000]):
        c.put_object(Bucket="gone", Key="o%d" % i, Body=os.urandom(size))
    put_cut_by_kill9(srv, "gone", "cut", live)
    srv.start()
    c = s3_client(srv.endpoint)
    for i in range(3):
        c.delete_object(Bucket="gone", Key="o%d" % i)
    c.delete_bucket(Bucket="gone")
    srv.kill9()  # the tombstones' drops, due in a second, go with it
    left = [r for r in live_records(datadir) if r[0].startswith(b"gone\x04") or r[1] == b"gone"]
    assert left, "nothing left to purge: the test cannot fail"
    srv.extra = ["--scrub-interval", "1", "--reap-grace", "2"]
    srv.start()
    wait_for(lambda: stats(srv)["scrub"]["purged_buckets"] >= 1, "the purge", 120)
    # Old enough (twice the drop delay) and on every store: the next passes drop them.
    time.sleep(4)
    passes = stats(srv)["scrub"]["passes"]
    wait_for(lambda: stats(srv)["scrub"]["passes"] >= passes + 2, "two more passes", 60)
    srv.stop()
    left = [r for r in live_records(datadir)
            if r[0].startswith(b"gone\x04") or r[1].startswith(b"gone")]
    assert not left, left
    srv.start()
    assert s3_client(srv.endpoint).get_object(Bucket="keep", Key="k")["Body"].read() == b"kept"
    srv.stop()


def test_bucket_settings_change_while_a_replaced_drive_is_refilled(datadir):
    """Bucket settings change while a replaced drive is refilled: the scanner heals every
    bucket's record first in a pass (before it walks any bucket's objects), and settings
    rewrite the record on the stores that hold it. With the records sparse (whole on their
    m+1 copies, as this session's first build had them), one that lost a copy could not be
    rewritten until healed, and each was healed only with its own bucket: the buckets that
    sort after a large one answered 503 for its whole refill. Here eight buckets sort after
    one whose objects take the pass seconds at a low rate."""
    srv = Server(datadir).start()
    c = s3_client(srv.endpoint)
    names = ["cfg-%d" % i for i in range(8)]
    for b in names:
        c.create_bucket(Bucket=b)
    c.create_bucket(Bucket="aaa-bulk")
    for i in range(12):
        c.put_object(Bucket="aaa-bulk", Key="o%d" % i, Body=os.urandom(1 << 20))
    srv.stop()
    shutil.rmtree(os.path.join(datadir, "drive2"))
    srv.extra = ["--scrub-interval", "1", "--scrub-rate", "1M"]
    srv.start()
    wait_for(lambda: stats(srv)["scrub"]["objects"] >= 1, "the pass to reach the objects")
    c = s3_client(srv.endpoint, retry=False)
    for b in names:
        c.put_bucket_tagging(Bucket=b, Tagging={"TagSet": [{"Key": "t", "Value": b}]})
    # Still within the pass (12 MiB at 1 MB/s): the records did not wait for the objects.
    assert stats(srv)["scrub"]["passes"] == 0
    for b in names:
        assert c.get_bucket_tagging(Bucket=b)["TagSet"] == [{"Key": "t", "Value": b}]
    srv.stop()
