"""Drive I/O errors seen from the client: a node runs with a shim
(tests/tools/faultfs.c, LD_PRELOAD) that fails chosen pwrite/fdatasync calls
on chosen drives' segment files. Whatever fails, the client gets a clean
answer (success only when the object is durable on enough drives, else a
5xx), a drive whose write or flush failed turns read-only and says so, and
after a restart without faults every acknowledged object reads back whole."""
import hashlib
import json
import os
import shutil
import time

import pytest
from botocore.exceptions import ClientError

from conftest import BUILD, Server, s3_client, signed_request

SHIM = os.path.join(BUILD, "tests", "libwl_faultfs.so")


def sha(b):
    return hashlib.sha256(b).hexdigest()


def faulty_server(datadir, rule):
    env = dict(os.environ, WL_FAULT=rule, LD_PRELOAD=SHIM)
    # Under ASan the shim comes before the sanitizer runtime in the load order.
    env["ASAN_OPTIONS"] = (env.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0").lstrip(":")
    s = Server(datadir)
    old = dict(os.environ)
    os.environ.update(env)
    try:
        return s.start()
    finally:
        os.environ.clear()
        os.environ.update(old)


def drive_stats(server):
    st, body, _ = signed_request(server.port, "GET", "/_warmlake/stats")
    assert st == 200
    return json.loads(body)["drives"]


def put_many(c, n, sizes, tag, tried=None):
    """PUT n objects; returns {key: sha} of those acknowledged and the error codes of the rest
    (tried, when given, gets {key: sha} of every PUT sent)."""
    acked, errors = {}, []
    for i in range(n):
        body = os.urandom(sizes[i % len(sizes)])
        key = "%s-%03d" % (tag, i)
        if tried is not None:
            tried[key] = sha(body)
        try:
            c.put_object(Bucket="flt", Key=key, Body=body)
            acked[key] = sha(body)
        except ClientError as e:
            errors.append((e.response["ResponseMetadata"]["HTTPStatusCode"],
                           e.response["Error"]["Code"]))
    return acked, errors


def check_all(c, acked):
    for key, h in acked.items():
        assert sha(c.get_object(Bucket="flt", Key=key)["Body"].read()) == h, key


def restart_clean(s, datadir):
    s.stop()
    return Server(datadir).start()


@pytest.fixture
def need_shim():
    if not os.path.exists(SHIM):
        pytest.skip("tests/tools/faultfs not built")


SIZES = [1000, 300_000, 2 << 20]


@pytest.mark.parametrize("rule", [
    "fdatasync:drive1/segments/:2:EIO",
    "pwrite:drive2/segments/:3:EIO",
    "pwrite:drive3/segments/:1:short",
])
def test_one_failing_drive_loses_nothing(datadir, need_shim, rule):
    s = faulty_server(datadir, rule)
    try:
        c = s3_client(s.endpoint, retry=False)
        c.create_bucket(Bucket="flt")
        acked, errors = put_many(c, 24, SIZES, "a")
        # One drive of 4+2 failing costs no PUT.
        assert errors == [] and len(acked) == 24
        bad = int(rule.split(":")[1][5])
        st = drive_stats(s)
        assert st[bad]["readonly"] == 1
        assert sum(d["readonly"] for d in st) == 1
        check_all(c, acked)
        with open(s.log) as f:
            assert "drive_readonly" in f.read()
    finally:
        s = restart_clean(s, datadir)
    try:
        check_all(s3_client(s.endpoint), acked)
    finally:
        s.stop()


def test_more_failing_drives_than_parity_fail_cleanly(datadir, need_shim):
    rule = ",".join("pwrite:drive%d/segments/:6:EIO" % d for d in (0, 1, 2))
    s = faulty_server(datadir, rule)
    try:
        c = s3_client(s.endpoint, retry=False)
        c.create_bucket(Bucket="flt")
        tried = {}
        acked, errors = put_many(c, 30, SIZES, "b", tried)
        assert errors, "three of six drives failing must fail PUTs"
        for status, code in errors:
            assert status == 503 and code == "ServiceUnavailable", (status, code)
        check_all(c, acked)
        # A failed PUT leaves nothing visible that does not read whole: a drive that failed
        # while its commit was undone may keep a head of it, and then the object stays,
        # whole (a 5xx leaves the outcome open, as in S3); nothing else is listed.
        listed = {o["Key"] for o in c.list_objects_v2(Bucket="flt").get("Contents", [])}
        assert set(acked) <= listed <= set(tried)
        check_all(c, {k: tried[k] for k in listed})
    finally:
        s = restart_clean(s, datadir)
    try:
        check_all(s3_client(s.endpoint), acked)
    finally:
        s.stop()


def test_full_drives_answer_507(datadir, need_shim):
    rule = ",".join("pwrite:drive%d/segments/:8:ENOSPC" % d for d in range(6))
    s = faulty_server(datadir, rule)
    try:
        c = s3_client(s.endpoint, retry=False)
        c.create_bucket(Bucket="flt")
        acked, errors = put_many(c, 30, SIZES, "c")
        assert errors
        for status, code in errors:
            assert (status, code) in ((507, "InsufficientStorage"), (503, "ServiceUnavailable"))
        check_all(c, acked)
    finally:
        s = restart_clean(s, datadir)
    try:
        check_all(s3_client(s.endpoint), acked)
    finally:
        s.stop()


def test_index_file_system_full_at_open_keeps_the_index(datadir, need_shim):
    """A drive whose index cannot be opened for want of space (RocksDB writes a new MANIFEST
    and OPTIONS file at every open) is not taken for a corrupt one: the index stays where it
    is (no copy set aside, nothing rebuilt, no further space taken), the node says why and
    serves without that drive; once there is room it starts on that same index and every
    object reads back. Before: the index was set aside as corrupt at each try (a fill probe:
    4 MiB each, on a file system already full) and rebuilt from the segments."""
    s = Server(datadir).start()
    c = s3_client(s.endpoint)
    c.create_bucket(Bucket="flt")
    acked, errors = put_many(c, 12, [1000, 300_000], "i")
    assert not errors
    s.stop()
    env = dict(os.environ, WL_FAULT="write:drive0/index/:0:ENOSPC", LD_PRELOAD=SHIM)
    env["ASAN_OPTIONS"] = (env.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0").lstrip(":")
    full = Server(datadir)
    full.env = lambda: dict(Server.env(full), **{k: env[k] for k in (
        "WL_FAULT", "LD_PRELOAD", "ASAN_OPTIONS")})
    full.start()
    try:
        log = full.read_log()
        assert "event=index_no_space" in log, log[-2000:]
        assert "event=drive_failed path=%s/drive0 err=NOSPC" % datadir in log
        check_all(s3_client(full.endpoint), acked)
    finally:
        full.stop()
    assert "index_set_aside" not in full.read_log()
    assert not [d for d in os.listdir(os.path.join(datadir, "drive0")) if "corrupt" in d]
    s = Server(datadir).start()
    try:
        c = s3_client(s.endpoint)
        check_all(c, acked)
    finally:
        s.stop()


def flip_drive_file(datadir, d):
    """A bit flipped in drive d's geometry file (DRIVE): its open is refused."""
    path = os.path.join(datadir, "drive%d" % d, "DRIVE")
    with open(path, "rb") as f:
        good = f.read()
    at = good.index(b"segment_size=") + len(b"segment_size=")
    with open(path, "wb") as f:
        f.write(good[:at] + bytes([good[at] ^ 0x01]) + good[at + 1:])
    return path, good


def replace_drives(datadir, *drives):
    """Drives lost and replaced by empty ones (the node stopped): refilled at its next start."""
    for d in drives:
        shutil.rmtree(os.path.join(datadir, "drive%d" % d))
        os.mkdir(os.path.join(datadir, "drive%d" % d))


def wait_refilled(s, timeout=120):
    """Until no drive is marked refilling (the scanner's pass after a start made them whole)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if not any(d.get("refilling") for d in drive_stats(s)):
            return
        time.sleep(0.5)
    raise AssertionError("still refilling: %s" % drive_stats(s))


def test_a_drive_that_does_not_open_is_served_as_failed(datadir):
    """One drive of 4+2 that cannot be opened (a bit flipped in its geometry file) no longer
    stops the node: it serves every object, takes new ones on the other five drives, says
    which drive failed and heals without it. Mended, the drive is marked refilling at the next start and gets
    what it missed: with two other drives wiped after that, every object still reads back
    (an object written while it was failed would be one block short without its refill).
    Before: the node did not start ("cannot open drive"), though 4+2 may lose two."""
    s = Server(datadir).start()
    c = s3_client(s.endpoint)
    c.create_bucket(Bucket="flt")
    sizes = [0, 1000, 300_000, 2 << 20]
    acked, errors = put_many(c, 12, sizes, "a")
    assert not errors
    s.stop()
    path, good = flip_drive_file(datadir, 2)
    s = Server(datadir).start()
    try:
        log = s.read_log()
        assert "event=drive_failed path=%s/drive2" % datadir in log, log[-2000:]
        st = {d["index"]: d for d in drive_stats(s)}
        assert st[2]["health"] == "failed" and all(st[i]["health"] == "up" for i in (0, 1, 3, 4, 5))
        c = s3_client(s.endpoint, retry=False)
        check_all(c, acked)
        more, errors = put_many(c, 12, sizes, "b")
        assert not errors
        acked.update(more)
        c.delete_object(Bucket="flt", Key="a-000")
        del acked["a-000"]
        listed = [o["Key"] for o in c.list_objects_v2(Bucket="flt")["Contents"]]
        assert listed == sorted(acked)
        check_all(c, acked)
        with open(os.path.join(datadir, "missed")) as f:
            assert f.read().split() == ["2"]
        # Healing goes on without it: a bucket heal walks every other drive, whole.
        code, text, _ = signed_request(s.port, "POST", "/_warmlake/heal?bucket=flt")
        assert code == 200, text
        rep = json.loads(text)
        assert rep["failed"] == 0 and rep["objects"] >= len(acked), rep
    finally:
        s.stop()
    with open(path, "wb") as f:
        f.write(good)
    s = Server(datadir).start()
    try:
        assert "event=drive_back path=%s/drive2" % datadir in s.read_log()
        assert not os.path.exists(os.path.join(datadir, "missed"))
        wait_refilled(s)
        check_all(s3_client(s.endpoint), acked)
    finally:
        s.stop()
    replace_drives(datadir, 0, 1)
    s = Server(datadir).start()
    try:
        c = s3_client(s.endpoint)
        check_all(c, acked)
        assert sorted(o["Key"] for o in c.list_objects_v2(Bucket="flt")["Contents"]) == \
            sorted(acked)
    finally:
        s.stop()


def test_more_drives_that_do_not_open_than_parity_stop_the_start(datadir):
    """Three drives of 4+2 that cannot be opened: the set could not be read, so the node does
    not start, and says which drives and why; mended, it starts and every object reads back.
    Another process holding the data directory stops a start too, even for one drive."""
    s = Server(datadir).start()
    c = s3_client(s.endpoint)
    c.create_bucket(Bucket="flt")
    acked, errors = put_many(c, 6, [1000, 300_000], "c")
    assert not errors
    s.stop()
    flipped = [flip_drive_file(datadir, d) for d in (1, 3, 4)]
    bad = Server(datadir).launch()
    assert bad.proc.wait(timeout=60) != 0
    bad.proc.stdout.close()
    bad.reap()
    log = bad.read_log()
    assert "3 drives of set 0 did not open, and a set may do without 2 at most" in log, log[-2000:]
    for d in (1, 3, 4):
        assert "cannot open drive %s/drive%d" % (datadir, d) in log
    assert not os.path.exists(os.path.join(datadir, "missed"))
    for path, good in flipped:
        with open(path, "wb") as f:
            f.write(good)
    s = Server(datadir).start()
    try:
        check_all(s3_client(s.endpoint), acked)
        second = Server(datadir).launch()
        assert second.proc.wait(timeout=60) != 0
        second.proc.stdout.close()
        second.proc = None
        assert "another process has this drive open" in second.read_log()
        check_all(s3_client(s.endpoint), acked)
    finally:
        s.stop()


POWERCUT = os.path.join(BUILD, "tests", "libwl_powercut.so")


def powercut_server(datadir, seed):
    """A node whose drives' segment files see a power cut's disk at a SIGKILL
    (tests/tools/powercut.c): writes no flush covered are lost."""
    env = dict(os.environ, LD_PRELOAD=POWERCUT, WL_POWERCUT="/segments/",
               WL_POWERCUT_SEED=str(seed))
    env["ASAN_OPTIONS"] = (env.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0").lstrip(":")
    old = dict(os.environ)
    os.environ.update(env)
    try:
        return Server(datadir).start()
    finally:
        os.environ.clear()
        os.environ.update(old)


def test_power_cut_loses_nothing_acknowledged(datadir):
    """Four writers PUT small (inline), medium and erasure-coded objects over a few keys
    each (overwrites), and the node is SIGKILLed after a random number of acknowledgements,
    with a disk that loses every write no flush covered (powercut shim). Restarted without
    it, every key reads back as its last acknowledged PUT made it, or as the PUT in flight
    at the cut; never older, never torn. A PUT in ten is a multipart upload. Eight rounds on
    the same drives."""
    import random
    import threading
    if not os.path.exists(POWERCUT):
        pytest.skip("tests/tools/powercut not built")
    rnd = random.Random(4242)
    sizes = [1, 3000, 70_000, 200_000, (1 << 20) + 3, 3 << 20]
    acked, pending = {}, {}  # key -> sha
    lock = threading.Lock()
    total = 0
    for rnd_i in range(8):
        s = powercut_server(datadir, rnd_i + 1)
        c = s3_client(s.endpoint, retry=False)
        if rnd_i == 0:
            c.create_bucket(Bucket="pwr")
        stop = threading.Event()
        kill_after = rnd.randrange(15, 70)
        count = [0]

        def writer(t, seed):
            r = random.Random(seed)
            cl = s3_client(s.endpoint, retry=False)
            for _ in range(400):  # bounded; the kill ends it first
                if stop.is_set():
                    return
                key = "t%d/k%d" % (t, r.randrange(6))
                mpu = r.randrange(10) == 0
                body = os.urandom((5 << 20) + r.choice(sizes) if mpu else r.choice(sizes))
                h = sha(body)
                with lock:
                    if key in pending:
                        continue
                    pending[key] = h
                try:
                    if mpu:  # two parts: its manifest, record and parts under the cut too
                        uid = cl.create_multipart_upload(Bucket="pwr", Key=key)["UploadId"]
                        parts = []
                        for n, piece in ((1, body[:5 << 20]), (2, body[5 << 20:])):
                            e = cl.upload_part(Bucket="pwr", Key=key, UploadId=uid,
                                               PartNumber=n, Body=piece)["ETag"]
                            parts.append({"PartNumber": n, "ETag": e})
                        cl.complete_multipart_upload(Bucket="pwr", Key=key, UploadId=uid,
                                                     MultipartUpload={"Parts": parts})
                    else:
                        cl.put_object(Bucket="pwr", Key=key, Body=body)
                except Exception:
                    return  # the cut: what was in flight stays pending
                with lock:
                    acked[key] = h
                    del pending[key]
                    count[0] += 1
                    if count[0] == kill_after:
                        s.proc.kill()  # SIGKILL: the power goes
                        stop.set()

        th = [threading.Thread(target=writer, args=(t, rnd_i * 10 + t)) for t in range(4)]
        for x in th:
            x.start()
        for x in th:
            x.join(timeout=300)
        assert not any(x.is_alive() for x in th)
        stop.set()
        s.kill9()
        total += count[0]
        s = Server(datadir).start()
        try:
            c = s3_client(s.endpoint)
            for key in sorted(set(acked) | set(pending)):
                try:
                    got = sha(c.get_object(Bucket="pwr", Key=key)["Body"].read())
                except ClientError as e:
                    got = e.response["Error"]["Code"]
                # A key whose first PUT was the one in flight: absent is its acknowledged state.
                want = {acked.get(key, "NoSuchKey"), pending.get(key)} - {None}
                assert got in want, (rnd_i, key, got, acked.get(key), pending.get(key))
                acked[key] = got  # the PUT in flight either landed or never will
            pending.clear()
        finally:
            s.stop()
    assert total >= 8 * 15
