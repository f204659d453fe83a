"""A cluster of real warmlaked processes on loopback: three nodes of two
file-backed drives each, one 4+2 erasure set spanning them (cluster/map.h),
the drives of other nodes reached over proto/. Objects written through any
node are read back through every node and checked by hash; a node killed
with SIGKILL (two of six shards: m) costs no acknowledged object, and
writes go on without it; nodes with another secret, another cluster id or
no place in the map are refused."""
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time

import pytest
from botocore.exceptions import ClientError

from conftest import (AK, AK2, BUILD, CLUSTER_SECRET, SK, SK2, STARTED, WARMLAKED, Node,
                      free_ports, s3_client, signed_request, start_all, stop_all, three_nodes,
                      write_map)

SECRET = CLUSTER_SECRET


def wait_listening(addr, timeout=60):
    """Until a TCP connect to host:port succeeds."""
    host, port = addr.rsplit(":", 1)
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection((host, int(port)), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)



@pytest.fixture
def cluster_k(datadir):
    """Three nodes whose writes need k stores (four of six): they go on with a node away."""
    nodes = three_nodes(datadir, extra=["--write-quorum", "4"])
    yield nodes
    stop_all(nodes)


def md5(b):
    return hashlib.md5(b).hexdigest()


def body(n, seed):
    out, x = bytearray(), seed
    while len(out) < n:
        x = hashlib.sha256(x.to_bytes(8, "little") + b"wl").digest()
        out += x * 64
        x = int.from_bytes(x[:8], "little")
    return bytes(out[:n])


SIZES = [0, 1, 1000, 65536, 65537, 300000, 1500000, 4 * 1048576 + 3]


def test_objects_written_anywhere_read_everywhere(cluster):
    c = [n.s3() for n in cluster]
    c[0].create_bucket(Bucket="lake")
    want = {}
    for i, size in enumerate(SIZES):
        data = body(size, i + 1)
        key = "obj/%d" % size
        c[i % 3].put_object(Bucket="lake", Key=key, Body=data)
        want[key] = md5(data)
    # A multipart upload through one node, completed through another.
    part = body(5 * 1048576, 99)
    mpu = c[1].create_multipart_upload(Bucket="lake", Key="mpu")
    etags = []
    for pn in (1, 2):
        r = c[pn].upload_part(Bucket="lake", Key="mpu", UploadId=mpu["UploadId"], PartNumber=pn,
                              Body=part)
        etags.append({"PartNumber": pn, "ETag": r["ETag"]})
    c[2].complete_multipart_upload(Bucket="lake", Key="mpu", UploadId=mpu["UploadId"],
                                   MultipartUpload={"Parts": etags})
    want["mpu"] = md5(part + part)
    for cl in c:
        for key, h in want.items():
            assert md5(cl.get_object(Bucket="lake", Key=key)["Body"].read()) == h, key
        listed = sorted(o["Key"] for o in cl.list_objects_v2(Bucket="lake")["Contents"])
        assert listed == sorted(want)
    # Overwrite and delete through one node: every node sees it.
    c[2].put_object(Bucket="lake", Key="obj/1", Body=b"new")
    c[0].delete_object(Bucket="lake", Key="obj/1000")
    for cl in c:
        assert cl.get_object(Bucket="lake", Key="obj/1")["Body"].read() == b"new"
        with pytest.raises(ClientError) as e:
            cl.head_object(Bucket="lake", Key="obj/1000")
        assert e.value.response["Error"]["Code"] == "404"


def test_node_killed_loses_nothing_acknowledged(cluster_k):
    n1, n2, n3 = cluster = cluster_k
    c1 = n1.s3()
    c1.create_bucket(Bucket="lake")
    want = {}
    for i, size in enumerate(SIZES):
        data = body(size, 100 + i)
        c1.put_object(Bucket="lake", Key="before/%d" % i, Body=data)
        want["before/%d" % i] = md5(data)
    n3.stop(signal.SIGKILL)  # two of the six shards of every object
    c2 = n2.s3()
    for key, h in want.items():
        assert md5(c2.get_object(Bucket="lake", Key=key)["Body"].read()) == h, key
    # Writes go on with four stores of six (k): acknowledged, then read back.
    for i, size in enumerate(SIZES):
        data = body(size, 200 + i)
        c2.put_object(Bucket="lake", Key="during/%d" % i, Body=data)
        want["during/%d" % i] = md5(data)
    for key, h in want.items():
        assert md5(c1.get_object(Bucket="lake", Key=key)["Body"].read()) == h, key
    # A second node lost: more shards than parity; reads fail, never with wrong bytes.
    n2.stop(signal.SIGKILL)
    with pytest.raises(ClientError) as e:
        c1.get_object(Bucket="lake", Key="before/6")["Body"].read()
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] >= 500
    # Both back: everything acknowledged is there, through every node, once each node has
    # met them again (n1 reconnects to the restarted peers on its own schedule: until then
    # it reads around them, and with two nodes away that is 503, as above).
    start_all([n2, n3])
    for n in cluster:
        cl = n.s3()

        def reads():
            # A key written before the kills (shards on all three nodes) and one written while
            # n3 was away (on n1 and n2 only, 4 MiB: erasure-coded): the second needs n2
            # itself. A node that had met n3 again but not yet n2 read the first and answered
            # the second 503 (a CI run).
            try:
                for key in ("before/6", "during/%d" % (len(SIZES) - 1)):
                    cl.get_object(Bucket="lake", Key=key)["Body"].read()
                return True
            except ClientError as e:
                assert e.response["ResponseMetadata"]["HTTPStatusCode"] == 503, e.response
                return False
        wait_for(reads, n.id + " to read through its restarted peers")
        for key, h in want.items():
            assert md5(cl.get_object(Bucket="lake", Key=key)["Body"].read()) == h, (n.id, key)


def test_racing_writers_on_two_nodes(cluster):
    """PUTs of one key racing through two nodes end with one winner on every node
    (whole, by hash); conditional creates racing through them have exactly one winner;
    in a versioned bucket every acknowledged PUT is a version."""
    import threading
    n1, n2, n3 = cluster
    clients = [n1.s3(), n2.s3()]
    clients[0].create_bucket(Bucket="race")
    clients[0].create_bucket(Bucket="vrace")
    clients[0].put_bucket_versioning(Bucket="vrace",
                                     VersioningConfiguration={"Status": "Enabled"})
    written, acked, errors = {}, {"race": [], "vrace": []}, []

    def writer(c, wid, bucket):
        cl = s3_client(c.meta.endpoint_url)
        for i in range(8):
            data = body(70000 if (wid + i) % 2 else 3000, 1000 * wid + i)
            written[md5(data)] = data
            try:
                r = cl.put_object(Bucket=bucket, Key="k", Body=data)
                acked[bucket].append((md5(data), r.get("VersionId")))
            except ClientError as e:  # a writer may give up (SlowDown) under contention
                if e.response["ResponseMetadata"]["HTTPStatusCode"] != 503:
                    errors.append(e)

    for bucket in ("race", "vrace"):
        ts = [threading.Thread(target=writer, args=(clients[w % 2], w, bucket)) for w in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    assert not errors, errors
    # One winner, the same through every node, and it is one of the writes, whole.
    got = {md5(n.s3().get_object(Bucket="race", Key="k")["Body"].read()) for n in cluster}
    assert len(got) == 1 and got.pop() in written
    # Every acknowledged versioned PUT is a version, with its bytes. A PUT answered 503
    # may have taken effect (its heads stood on k stores, short of the write quorum): then
    # it is a version too, whole, one of the bodies sent.
    vs = clients[1].list_object_versions(Bucket="vrace")["Versions"]
    listed = {v["VersionId"] for v in vs}
    assert len(listed) == len(vs)
    missing = {vid for _, vid in acked["vrace"]} - listed
    if missing:  # (seen once in a CI-like run, 0 in 130 alone): lost, or only not listed?
        seen = {}
        for vid in sorted(missing):
            for i, n in enumerate(cluster):
                try:
                    seen[(vid, i)] = md5(n.s3().get_object(Bucket="vrace", Key="k",
                                                           VersionId=vid)["Body"].read())
                except ClientError as e:
                    seen[(vid, i)] = e.response["Error"]["Code"]
        again = {v["VersionId"] for v in
                 clients[0].list_object_versions(Bucket="vrace")["Versions"]}
        assert not missing, (sorted(missing), seen, sorted(listed), sorted(again))
    assert sum(v["IsLatest"] for v in vs) == 1
    for h, vid in acked["vrace"]:
        r = clients[0].get_object(Bucket="vrace", Key="k", VersionId=vid)
        assert md5(r["Body"].read()) == h
    for vid in listed - {vid for _, vid in acked["vrace"]}:
        r = clients[0].get_object(Bucket="vrace", Key="k", VersionId=vid)
        assert md5(r["Body"].read()) in written
    # If-None-Match: * racing through two nodes: exactly one create wins.
    for round_ in range(6):
        key = "cond-%d" % round_
        results = []

        def create(node, data):
            # Raw, signed: Debian's boto3 has no IfNoneMatch parameter.
            status, _, _ = signed_request(node.port, "PUT", "/race/" + key, data,
                                          {"If-None-Match": "*"})
            if status == 200:
                results.append(md5(data))
            elif status not in (409, 412, 503):
                errors.append(status)
        datas = [body(5000, 77 + round_), body(5001, 99 + round_)]
        ts = [threading.Thread(target=create, args=(n, d)) for n, d in zip((n1, n2), datas)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert not errors, errors
        assert len(results) <= 1
        if results:
            for n in cluster:
                assert md5(n.s3().get_object(Bucket="race", Key=key)["Body"].read()) == results[0]


def test_racing_bucket_creates_one_owner(cluster):
    """Two users create one bucket name at once through two nodes: one owns it,
    the other gets BucketAlreadyExists, and every node says the same."""
    import threading
    n1, n2, n3 = cluster
    for round_ in range(5):
        name = "contested-%d" % round_
        out = {}

        def create(node, ak, sk):
            try:
                s3_client(node.endpoint, ak, sk).create_bucket(Bucket=name)
                out[ak] = 200
            except ClientError as e:
                out[ak] = e.response["Error"]["Code"]
        ts = [threading.Thread(target=create, args=a) for a in ((n1, AK, SK), (n2, AK2, SK2))]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert sorted(out.values(), key=str) == [200, "BucketAlreadyExists"], out
        owner = AK if out[AK] == 200 else AK2
        secret = SK if owner == AK else SK2
        for n in cluster:  # the owner writes and reads through any node; the other is refused
            c = s3_client(n.endpoint, owner, secret)
            c.put_object(Bucket=name, Key="k", Body=b"mine")
            assert c.get_object(Bucket=name, Key="k")["Body"].read() == b"mine"
            other = s3_client(n.endpoint, AK2 if owner == AK else AK, SK2 if owner == AK else SK)
            with pytest.raises(ClientError):
                other.get_object(Bucket=name, Key="k")


def race(fns):
    """Run the callables at once (a barrier), each's result or its S3 error code."""
    import threading
    barrier, out = threading.Barrier(len(fns)), [None] * len(fns)

    def run(i):
        barrier.wait()
        try:
            out[i] = fns[i]()
        except ClientError as e:
            out[i] = e.response["Error"]["Code"]
    ts = [threading.Thread(target=run, args=(i,)) for i in range(len(fns))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return out


def finals_of(clients, bucket, key):
    """What each node reads of the key: the set of body MD5s and error codes (one when they
    agree)."""
    finals = set()
    for c in clients:
        try:
            finals.add(md5(c.get_object(Bucket=bucket, Key=key)["Body"].read()))
        except ClientError as e:
            finals.add(e.response["Error"]["Code"])
    return finals


def test_racing_if_match_overwrites_of_a_small_object(cluster):
    """If-Match PUTs of an inline object through different nodes at once: one wins, the
    others get 412, and the key is never lost. Both writers used to overwrite some of the
    object's copies, fall short, and undo without a copy of it to put back: the key was
    gone (404 on every node) in a quarter of the rounds."""
    n1, n2, n3 = cluster
    clients = [n.s3() for n in cluster]
    clients[0].create_bucket(Bucket="imrace")
    lost = []
    for r in range(20):
        key, base = "k%d" % r, body(100 + r, r)
        etag = clients[2].put_object(Bucket="imrace", Key=key, Body=base)["ETag"]
        bodies = [body(100 + r, 100000 + 1000 * r + j) for j in range(2)]  # not base's
        # (Raw: Debian's boto3 predates IfMatch on PutObject.)
        out = race([lambda j=j: {200: "ok", 412: "PreconditionFailed", 404: "NoSuchKey"}.get(
            signed_request(cluster[j].port, "PUT", "/imrace/" + key, bodies[j],
                           headers={"If-Match": etag})[0], "other") for j in range(2)])
        finals = finals_of(clients, "imrace", key)
        won = [j for j in range(2) if out[j] == "ok"]
        if len(finals) != 1 or "NoSuchKey" in finals:
            lost.append((key, out, finals))
            continue
        # One winner whose body is there, or (both refused or slowed) the old body.
        want = {md5(bodies[won[0]])} if len(won) == 1 else {md5(base)}
        assert len(won) <= 1 and finals == want, (key, out, finals)
    assert not lost, lost


def test_tagging_racing_a_put_through_another_node(cluster):
    """PutObjectTagging through one node while a PUT replaces the object through another:
    the acknowledged PUT's body is what every node returns. The tag rewrite of the old
    version used to come out newer than the PUT and bring the old bytes back (about one
    round in twelve). PutObjectAcl the same way, every other round."""
    n1, n2, n3 = cluster
    c1, c2, c3 = (n.s3() for n in cluster)
    c1.create_bucket(Bucket="tagrace")
    for r in range(60):
        key, old, new = "t%d" % r, body(100 + r, 7000 + r), body(100 + r, 8000 + r)
        c3.put_object(Bucket="tagrace", Key=key, Body=old)
        if r % 2:
            meta = lambda: c2.put_object_acl(Bucket="tagrace", Key=key, ACL="public-read") and "acl"
        else:
            meta = lambda: c2.put_object_tagging(Bucket="tagrace", Key=key, Tagging={
                "TagSet": [{"Key": "r", "Value": str(r)}]}) and "tagged"
        out = race([lambda: c1.put_object(Bucket="tagrace", Key=key, Body=new)["ETag"], meta])
        # The key exists all along: never NoSuchKey (a small version's bytes, gone with
        # the overwrite, made the rewrite answer 404: 2 rounds in 30 for the ACL).
        assert out[1] in ("tagged", "acl", "SlowDown", "ServiceUnavailable"), (key, out)
        if out[0] in ("SlowDown", "ServiceUnavailable"):
            continue
        for c in (c1, c2, c3):
            got = c.get_object(Bucket="tagrace", Key=key)["Body"].read()
            assert md5(got) == md5(new), (key, out, "old" if got == old else "other")


def test_deleting_the_current_version_racing_a_put(cluster):
    """DELETE ?versionId= of the current version through one node while a PUT goes
    through another: the PUT's version ends current everywhere, and the deleted one is
    gone. The promotion of the next older version used to come out newer than the PUT
    and make it current over the acknowledged write (9 rounds in 40); then the deleted
    version came back as noncurrent, kept by the PUT's lost first attempt (every run)."""
    n1, n2, n3 = cluster
    c1, c2, c3 = (n.s3() for n in cluster)
    c1.create_bucket(Bucket="promo")
    c1.put_bucket_versioning(Bucket="promo", VersioningConfiguration={"Status": "Enabled"})
    for r in range(30):
        key = "p%d" % r
        c3.put_object(Bucket="promo", Key=key, Body=body(100, 9000 + r))
        gone = c3.put_object(Bucket="promo", Key=key, Body=body(100, 9500 + r))["VersionId"]
        new = body(100, 9900 + r)
        out = race([lambda: c1.put_object(Bucket="promo", Key=key, Body=new)["VersionId"],
                    lambda: c2.delete_object(Bucket="promo", Key=key, VersionId=gone) and "deleted"])
        if out[0] in ("SlowDown", "ServiceUnavailable"):
            continue
        for c in (c1, c2, c3):
            got = c.get_object(Bucket="promo", Key=key)
            assert md5(got["Body"].read()) == md5(new) and got["VersionId"] == out[0], (key, out)
            vids = [v["VersionId"] for v in c.list_object_versions(
                Bucket="promo", Prefix=key).get("Versions", []) if v["Key"] == key]
            assert out[0] in vids and (out[1] != "deleted" or gone not in vids), (key, out, vids)


def test_delete_by_id_with_a_node_down_is_refused_not_undone(cluster):
    """DELETE ?versionId= of noncurrent versions with a node down (two stores of six: the
    tombstones could reach four, short of the write quorum of five) is refused with 503, not
    answered as done; each version then reads whole or as deleted, never with other bytes, and
    once the node is back the retried deletes go through and stay done through every node.
    Answered 204, such a delete came undone when the node came back (a probe: 11-29 a run on
    a cluster where the tombstone reached fewer than k stores)."""
    n1, n2, n3 = cluster
    c1 = n1.s3()
    c1.create_bucket(Bucket="retire")
    c1.put_bucket_versioning(Bucket="retire", VersioningConfiguration={"Status": "Enabled"})
    old = {}
    for i, size in enumerate((1, 5000, 300000)):  # inline copies, and erasure-coded
        key = "k%d" % i
        data = body(size, 7100 + i)
        old[key] = (c1.put_object(Bucket="retire", Key=key, Body=data)["VersionId"], md5(data))
        c1.put_object(Bucket="retire", Key=key, Body=b"current")
    n3.stop(signal.SIGKILL)
    c2 = n2.s3()
    for key, (vid, _) in old.items():
        with pytest.raises(ClientError) as e:
            c2.delete_object(Bucket="retire", Key=key, VersionId=vid)
        assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503, e.value.response
    start_all([n3])
    for n in cluster:
        c = n.s3()

        def answered():
            try:
                for key, (vid, h) in old.items():
                    try:
                        got = c.get_object(Bucket="retire", Key=key, VersionId=vid)["Body"].read()
                        assert md5(got) == h, (n.id, key)
                    except ClientError as e:
                        if e.response["ResponseMetadata"]["HTTPStatusCode"] != 404:
                            raise
                return True
            except ClientError as e:
                assert e.response["ResponseMetadata"]["HTTPStatusCode"] == 503, e.response
                return False
        wait_for(answered, n.id + " to answer for every version through its restarted peer")
    # A read needs k stores, a delete its write quorum: n2 may see n3 as up for reads (they
    # went through) a moment before its health says so for writes (the run of stop 40 saw
    # one 503 here). Refused deletes change nothing (above): retried until taken.
    for key, (vid, _) in old.items():
        def deleted():
            try:
                c2.delete_object(Bucket="retire", Key=key, VersionId=vid)
                return True
            except ClientError as e:
                assert e.response["ResponseMetadata"]["HTTPStatusCode"] == 503, e.response
                return False
        wait_for(deleted, "the delete of %s through n2 to be taken" % key)
    for n in cluster:
        c = n.s3()
        for key, (vid, _) in old.items():
            with pytest.raises(ClientError) as e:
                c.get_object(Bucket="retire", Key=key, VersionId=vid)
            assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404, (n.id, key)
            assert c.get_object(Bucket="retire", Key=key)["Body"].read() == b"current"
        vids = [v["VersionId"] for v in c.list_object_versions(Bucket="retire").get("Versions", [])]
        assert not set(v for v, _ in old.values()) & set(vids), (n.id, vids)


def test_deleting_two_adjacent_versions_at_once(cluster):
    """DELETE ?versionId= of the current version through one node and of the version
    below it through another, at once: both are gone everywhere and the oldest version is
    current. The deleted lower version used to stay current (promoted by the first delete
    after the second had retired it, its blocks dropped: 11 rounds in 30 erasure-coded),
    or, small, the current one stayed after its acknowledged delete (its successor's bytes
    gone, the promotion answered "no such version": about half the rounds)."""
    c1, c2, c3 = (n.s3() for n in cluster)
    c1.create_bucket(Bucket="adj")
    c1.put_bucket_versioning(Bucket="adj", VersioningConfiguration={"Status": "Enabled"})
    for r in range(36):
        key, size = "a%d" % r, 100 if r % 3 else 300 << 10
        bodies = [body(size, 300 * r + j) for j in range(3)]
        vids = [c3.put_object(Bucket="adj", Key=key, Body=b)["VersionId"] for b in bodies]
        a, b = [(c1, c2), (c2, c3), (c3, c1)][r % 3]
        out = race([lambda: a.delete_object(Bucket="adj", Key=key, VersionId=vids[2]) and 1,
                    lambda: b.delete_object(Bucket="adj", Key=key, VersionId=vids[1]) and 1])
        assert out == [1, 1], (key, out)
        for c in (c1, c2, c3):
            got = c.get_object(Bucket="adj", Key=key)
            assert md5(got["Body"].read()) == md5(bodies[0]), (key, got["VersionId"], vids)
            listed = [v["VersionId"] for v in c.list_object_versions(
                Bucket="adj", Prefix=key).get("Versions", []) if v["Key"] == key]
            assert listed == [vids[0]], (key, listed, vids)


def test_marker_racing_a_delete_of_the_current_version(cluster):
    """A DELETE (a marker) through one node and a DELETE ?versionId= of the current version
    through another, at once, both acknowledged: the marker is the latest on every node and
    the deleted version is listed nowhere. Whichever came first, the marker ends on top."""
    c1, c2, c3 = (n.s3() for n in cluster)
    c1.create_bucket(Bucket="mkdel")
    c1.put_bucket_versioning(Bucket="mkdel", VersioningConfiguration={"Status": "Enabled"})
    bad = []
    for r in range(int(os.environ.get("WL_RACE_ROUNDS", "30"))):
        key = "k%d" % r
        size = 1000 if r % 2 else 300 << 10
        v1 = c3.put_object(Bucket="mkdel", Key=key, Body=body(size, 40 * r))["VersionId"]
        v2 = c3.put_object(Bucket="mkdel", Key=key, Body=body(size, 40 * r + 1))["VersionId"]
        a, b = [(c1, c2), (c2, c3), (c3, c1)][r % 3]
        marker, dcur = race([lambda: a.delete_object(Bucket="mkdel", Key=key),
                             lambda: b.delete_object(Bucket="mkdel", Key=key, VersionId=v2)])
        mid = marker.get("VersionId") if isinstance(marker, dict) else None
        for c in (c1, c2, c3):
            got = c.list_object_versions(Bucket="mkdel", Prefix=key)
            vs = [v for v in got.get("Versions", []) if v["Key"] == key]
            ms = [m for m in got.get("DeleteMarkers", []) if m["Key"] == key]
            latest = [x["VersionId"] for x in vs + ms if x["IsLatest"]]
            ids = [v["VersionId"] for v in vs]
            if (mid and latest != [mid]) or (isinstance(dcur, dict) and v2 in ids) or \
                    v1 not in ids:
                bad.append((key, size, "marker", mid or marker, "delete",
                            "ok" if isinstance(dcur, dict) else dcur, "latest", latest,
                            "v1" if latest == [v1] else "", "versions", ids, [v1, v2]))
    assert not bad, "\n".join(str(b) for b in bad)


def test_put_marker_and_deletes_by_id_at_once(cluster):
    """With v1 and v2 stored: a PUT, a DELETE (marker), a DELETE ?versionId=v2 (current)
    and a DELETE ?versionId=v1, through the three nodes at once, all acknowledged: v1 and v2
    are listed nowhere, the PUT's version and the marker are, every listed version reads
    back with its ETag on every node, and one of them is the latest. Seen failing (a
    session-15 probe, 4+2, 300 KB): a deleted version stayed listed and unreadable (10
    rounds in 30), a commit's archive of it written after its delete; with archives under
    SHARD_IF_KEPT, 1 round in 150 on a quiet machine and 2 in 150 on a busy one, either
    way (a plain head in flight unseen by a store's condition), and an acknowledged PUT or
    marker lost (a promotion or a heal of another writer's head in flight, taken for the
    current version): docs/design-notes.md, "Racing deletes by id against a PUT and a
    delete marker". 0 in 600 after."""
    c1, c2, c3 = (n.s3() for n in cluster)
    c1.create_bucket(Bucket="four")
    c1.put_bucket_versioning(Bucket="four", VersioningConfiguration={"Status": "Enabled"})
    bad = []
    for r in range(int(os.environ.get("WL_RACE_ROUNDS", "30"))):
        key = "k%d" % r
        b1, b2, b3 = (body(300 << 10, 700 * r + j) for j in range(3))
        v1 = c1.put_object(Bucket="four", Key=key, Body=b1)["VersionId"]
        v2 = c2.put_object(Bucket="four", Key=key, Body=b2)["VersionId"]
        put, marker, dcur, dnon = race([
            lambda: c1.put_object(Bucket="four", Key=key, Body=b3),
            lambda: c2.delete_object(Bucket="four", Key=key),
            lambda: c3.delete_object(Bucket="four", Key=key, VersionId=v2) and v2,
            lambda: c1.delete_object(Bucket="four", Key=key, VersionId=v1) and v1])
        gone = {v for v in (dcur, dnon) if v in (v1, v2)}
        kept = {o["VersionId"] for o in (put, marker) if isinstance(o, dict)}
        for c in (c1, c2, c3):
            r_ = c.list_object_versions(Bucket="four", Prefix=key)
            vs = [v for v in r_.get("Versions", []) if v["Key"] == key]
            ms = [m for m in r_.get("DeleteMarkers", []) if m["Key"] == key]
            ids = {v["VersionId"] for v in vs} | {m["VersionId"] for m in ms}
            latest = [x for x in vs + ms if x["IsLatest"]]
            unreadable = []
            for v in vs:
                try:
                    c.get_object(Bucket="four", Key=key, VersionId=v["VersionId"])["Body"].read()
                except ClientError as e:
                    unreadable.append((v["VersionId"], e.response["Error"]["Code"]))
            # (Nothing left at all is an outcome: the PUT and the marker both refused, 503,
            # and both versions deleted by id.)
            if ids & gone or not kept <= ids or unreadable or len(latest) != (1 if ids else 0):
                bad.append((key, "v1" if v1 in ids & gone else "", "v2" if v2 in ids & gone else "",
                            "missing", kept - ids, "unreadable", unreadable, "latest",
                            len(latest), "ops", put if isinstance(put, str) else "ok",
                            marker if isinstance(marker, str) else "ok", dcur, dnon))
    assert not bad, "\n".join(str(b) for b in bad)


def test_racing_completes_and_aborts_of_one_upload(cluster):
    """CompleteMultipartUpload through two nodes with different part lists, or a Complete
    through one and an Abort through another: one closes the upload, the other is told
    NoSuchUpload, and the object (when completed) reads back whole everywhere. Both used
    to be acknowledged, each dropping parts the other's object needed: unreadable, every
    round."""
    c1, c2, c3 = (n.s3() for n in cluster)
    c1.create_bucket(Bucket="mpurace")
    for r in range(12):
        key = "m%d" % r
        up = c1.create_multipart_upload(Bucket="mpurace", Key=key)["UploadId"]
        parts = {j: body(5 << 20 if j == 1 else 1000 + j, 500 * r + j) for j in (1, 2, 3)}
        et = {j: c3.upload_part(Bucket="mpurace", Key=key, UploadId=up, PartNumber=j,
                                Body=parts[j])["ETag"] for j in parts}

        def complete(c, nums):
            c.complete_multipart_upload(Bucket="mpurace", Key=key, UploadId=up, MultipartUpload={
                "Parts": [{"PartNumber": j, "ETag": et[j]} for j in nums]})
            return nums
        if r % 2:
            out = race([lambda: complete(c1, [1, 2]), lambda: complete(c2, [1, 3])])
        else:
            out = race([lambda: complete(c1, [1, 2]),
                        lambda: c2.abort_multipart_upload(Bucket="mpurace", Key=key,
                                                          UploadId=up) and "aborted"])
        done = [o for o in out if isinstance(o, list)]
        assert len([o for o in out if o != "NoSuchUpload"]) == 1, (key, out)
        for c in (c1, c2, c3):
            if done:
                want = b"".join(parts[j] for j in done[0])
                assert md5(c.get_object(Bucket="mpurace", Key=key)["Body"].read()) == md5(want)
            else:
                with pytest.raises(ClientError):
                    c.head_object(Bucket="mpurace", Key=key)


def test_delete_bucket_racing_puts_through_other_nodes(cluster):
    """DeleteBucket through one node while PUTs into the bucket go through the others:
    either the bucket stays (BucketNotEmpty) with every acknowledged object in it, or it
    goes and the PUTs are refused (NoSuchBucket). Every round used to end with the bucket
    gone and acknowledged objects lost."""
    n1, n2, n3 = cluster
    c1, c2, c3 = (n.s3() for n in cluster)
    outcomes = set()
    for r in range(12):
        name = "dbrace-%d" % r
        c1.create_bucket(Bucket=name)
        data = body(100 if r % 2 else 200000, r)
        out = race([lambda: c1.delete_bucket(Bucket=name) and "deleted",
                    lambda: c2.put_object(Bucket=name, Key="a", Body=data)["ETag"],
                    lambda: c3.put_object(Bucket=name, Key="b", Body=data)["ETag"]])
        acked = [k for k, o in zip("ab", out[1:]) if o not in ("NoSuchBucket", "SlowDown")]
        if out[0] == "BucketNotEmpty":
            outcomes.add("kept")
            for c in (c1, c2, c3):
                for k in acked:
                    assert md5(c.get_object(Bucket=name, Key=k)["Body"].read()) == md5(data)
        else:
            outcomes.add("deleted")
            assert not acked, (name, out)  # a PUT acknowledged into a bucket deleted
            for c in (c1, c2, c3):
                with pytest.raises(ClientError):
                    c.head_bucket(Bucket=name)
    assert outcomes, outcomes


def test_node_killed_mid_stream(cluster_k):
    """A node killed with SIGKILL while PUTs stream through the others: every
    acknowledged object reads back whole, by hash, through every node."""
    import threading
    n1, n2, n3 = cluster = cluster_k
    n1.s3().create_bucket(Bucket="stream")
    acked, stop = {}, threading.Event()

    def writer(node, wid):
        c = node.s3()
        for i in range(400):
            if stop.is_set():
                break
            data = body(2000 if i % 3 else 300000, 10000 * wid + i)
            try:
                c.put_object(Bucket="stream", Key="w%d/%d" % (wid, i), Body=data)
                acked["w%d/%d" % (wid, i)] = md5(data)
            except ClientError:
                pass  # refused while the node goes: not acknowledged, nothing promised
    ts = [threading.Thread(target=writer, args=(n, w)) for w, n in enumerate((n1, n2, n1, n2))]
    for t in ts:
        t.start()
    wait_for(lambda: len(acked) >= 40, "40 acknowledged PUTs")
    n3.stop(signal.SIGKILL)
    wait_for(lambda: len(acked) >= 80, "40 more PUTs with n3 gone")
    stop.set()
    for t in ts:
        t.join()
    start_all([n3])
    for n in cluster:
        c = n.s3()
        for key, h in acked.items():
            assert md5(c.get_object(Bucket="stream", Key=key)["Body"].read()) == h, (n.id, key)


def heal(node, bucket):
    status, text, _ = signed_request(node.port, "POST", "/_warmlake/heal?bucket=" + bucket)
    assert status == 200, text
    return json.loads(text)


def test_heal_puts_back_what_a_node_missed(cluster_k):
    """Objects written while a node is down miss their shards on its drives.
    Healing the bucket rebuilds them there: afterwards another node can go and
    every object still reads whole; a bucket not healed cannot lose that node.
    (The heal queue would heal them by itself: the queue's test; here n1's queue
    is emptied by a restart, so that the heal call is what heals them.)"""
    n1, n2, n3 = cluster_k
    c = n1.s3()
    for b in ("healed", "unhealed"):
        c.create_bucket(Bucket=b)
    n3.stop(signal.SIGKILL)
    want = {}
    for b in ("healed", "unhealed"):
        for i, size in enumerate([1000, 70000, 300000, 2500000]):
            data = body(size, hash((b, i)) & 0xffff)
            c.put_object(Bucket=b, Key="o%d" % i, Body=data)
            want[(b, "o%d" % i)] = md5(data)
        mpu = c.create_multipart_upload(Bucket=b, Key="mp")
        part = body(5 * 1048576, 4242)
        etags = [{"PartNumber": pn, "ETag": c.upload_part(
            Bucket=b, Key="mp", UploadId=mpu["UploadId"], PartNumber=pn, Body=part)["ETag"]}
            for pn in (1, 2)]
        c.complete_multipart_upload(Bucket=b, Key="mp", UploadId=mpu["UploadId"],
                                    MultipartUpload={"Parts": etags})
        want[(b, "mp")] = md5(part + part)
    n1.stop()  # its heal queue (in memory) goes with it
    start_all([n1, n3])
    c = n1.s3()
    # n1 finds n3 back on its next connect (a down peer is retried after a short backoff):
    # heal until a pass reaches every store, adding up what the passes fixed.
    total = {"heads_fixed": 0, "blocks_fixed": 0}

    def healed_all():
        rep = heal(n1, "healed")
        for f in total:
            total[f] += rep[f]
        return rep["failed"] == 0 and rep["objects"] >= 5
    wait_for(healed_all, "a heal pass that reaches n3")
    assert total["heads_fixed"] > 0 and total["blocks_fixed"] > 0, total
    assert heal(n1, "healed")["blocks_fixed"] == 0  # nothing left to rebuild
    n2.stop(signal.SIGKILL)  # two more shards of six gone: n1's and n3's must do
    for (b, k), h in want.items():
        if b == "healed":
            assert md5(c.get_object(Bucket=b, Key=k)["Body"].read()) == h, k
    failed = 0
    for (b, k), h in want.items():
        if b == "unhealed" and k != "o0":  # o0 is inline: its copies may sit on n1 alone
            try:
                c.get_object(Bucket=b, Key=k)["Body"].read()
            except ClientError:
                failed += 1
    assert failed > 0  # without healing, losing n2 loses them: the test can fail
    start_all([n2])


def node_stats(node):
    status, text, _ = signed_request(node.port, "GET", "/_warmlake/stats")
    assert status == 200, text
    return json.loads(text)


def test_deletes_a_node_missed_stay_deleted_after_two_more_drives_go(cluster_k):
    """Deletes of each kind made while a node was down: unversioned DELETEs, delete markers,
    deletes by version id. That node kept the heads it held, outranked by the deleted heads on
    the others, and nothing put those heads on it once it was back: a heal passed deleted
    keys by, and the refill of a replaced drive carried no tombstone. With the drives of the
    node the deletes went through then replaced and refilled, a reader's m+1 stores could be
    those holding only the old heads (a review, on one node: deleted keys listed again,
    empty ones read back 200). Now a heal pass puts the deleted heads on the node that
    missed them."""
    n1, n2, n3 = cluster_k
    c = n1.s3()
    c.create_bucket(Bucket="plain")
    c.create_bucket(Bucket="vers")
    c.put_bucket_versioning(Bucket="vers", VersioningConfiguration={"Status": "Enabled"})
    sizes = [0, 1000, 300000, 0, 20, 2500000]
    want, v1 = {}, {}
    for i in range(36):
        data = body(sizes[i % len(sizes)], 500 + i)
        c.put_object(Bucket="plain", Key="k%02d" % i, Body=data)
        want["k%02d" % i] = md5(data)
    for i in range(24):
        k = "v%02d" % i
        v1[k] = c.put_object(Bucket="vers", Key=k, Body=body(sizes[i % 6], 600 + i))["VersionId"]
        data = body(sizes[(i + 1) % 6], 700 + i)
        c.put_object(Bucket="vers", Key=k, Body=data)
        want[k] = md5(data)
    n3.stop(signal.SIGKILL)
    gone = ["k%02d" % i for i in range(30)]
    positions = [("plain", k, "") for k in gone] + [("vers", "v%02d" % i, "") for i in range(12)]
    positions += [("vers", "v%02d" % i, v1["v%02d" % i]) for i in range(12, 24)]
    # (A small object's heads may be on its copies alone, none of them n3's.)
    before = {p: seq for p, seq in last_records(n3).items() if p in positions}
    assert len(before) > len(positions) // 2, sorted(set(positions) - set(before))
    for k in gone:
        c.delete_object(Bucket="plain", Key=k)
    marked = ["v%02d" % i for i in range(12)]
    for k in marked:
        c.delete_object(Bucket="vers", Key=k)
    by_id = ["v%02d" % i for i in range(12, 24)]
    for k in by_id:
        c.delete_object(Bucket="vers", Key=k, VersionId=v1[k])
    n1.stop()  # its heal queue (in memory) with it: the heal pass is what puts them there
    start_all([n1, n3])

    def healed(b):
        def once():
            status, text, _ = signed_request(n1.port, "POST", "/_warmlake/heal?bucket=" + b)
            return status == 200 and json.loads(text)["failed"] == 0
        return once
    for b in ("plain", "vers"):
        wait_for(healed(b), "a heal pass of %s that reaches n3" % b)
    # On n3's drives, each position a delete left behind has a newer record now (the
    # deleted head put there by the heal, or the drop of it): before, the PUT's head stayed.
    n3.stop()
    after = last_records(n3)
    start_all([n3])
    stale = [p for p, seq in before.items() if after.get(p, (0, 0))[0] <= seq[0]]
    assert not stale, stale
    n1.stop()
    replace_node_drives(n1)
    n1.extra = list(n1.extra) + ["--scrub-rate", "1M"]  # a slow refill: read while it runs
    start_all([n1])
    assert any(d.get("refilling") for d in node_stats(n1)["drives"])
    check_deleted(n1, n2, n3, gone, marked, by_id, v1, want)
    wait_for(lambda: not any(d.get("refilling") for d in node_stats(n1)["drives"]),
             "n1's drives refilled", timeout=300)
    check_deleted(n1, n2, n3, gone, marked, by_id, v1, want)


def check_deleted(n1, n2, n3, gone, marked, by_id, v1, want):
    """Through every node: what was deleted is neither listed nor read; the rest is whole."""
    for node in (n1, n2, n3):
        c = node.s3()
        listed = [o["Key"] for o in c.list_objects_v2(Bucket="plain").get("Contents", [])]
        assert listed == ["k%02d" % i for i in range(30, 36)], (node.id, listed)
        back = []
        for k in gone:
            try:
                c.head_object(Bucket="plain", Key=k)
                back.append(k)
            except ClientError as e:
                if e.response["Error"]["Code"] != "404":
                    back.append((k, e.response["Error"]["Code"]))
        assert not back, (node.id, back)
        for k in listed:
            assert md5(c.get_object(Bucket="plain", Key=k)["Body"].read()) == want[k], k
        vs = c.list_object_versions(Bucket="vers")
        current = sorted(v["Key"] for v in vs.get("Versions", []) if v["IsLatest"])
        assert current == by_id, (node.id, current)
        markers = sorted(m["Key"] for m in vs.get("DeleteMarkers", []) if m["IsLatest"])
        assert markers == marked, (node.id, markers)
        ids = {(v["Key"], v["VersionId"]) for v in vs.get("Versions", [])}
        assert not [k for k in by_id if (k, v1[k]) in ids], node.id
        for k in by_id:
            with pytest.raises(ClientError):
                c.head_object(Bucket="vers", Key=k, VersionId=v1[k])
            assert md5(c.get_object(Bucket="vers", Key=k)["Body"].read()) == want[k], k
        for k in marked:
            with pytest.raises(ClientError):
                c.head_object(Bucket="vers", Key=k)


def last_records(node):
    """{(bucket, key, position): (seq, drive)}: the newest record naming each head position on
    a stopped node's drives (`wl-drive dump`; a bucket's internal name ends in its id)."""
    out = {}
    for name in sorted(os.listdir(node.data)):
        if not name.startswith("drive"):
            continue
        dump = subprocess.run([os.path.join(BUILD, "storage", "wl-drive"), "dump",
                               os.path.join(node.data, name)],
                              capture_output=True, check=True, timeout=60).stdout
        for line in dump.split(b"\n"):
            f = dict(x.split(b"=", 1) for x in line.split(b" ") if b"=" in x)
            if b"bucket" not in f or b"\x04" not in f[b"bucket"] or f.get(b"shard") is None:
                continue
            b = f[b"bucket"].split(b"\x04")[0].decode()
            v = f.get(b"version", b"").decode()
            if len(v) > 16:
                continue  # a block (named by its upload id), not a head
            p = (b, f[b"key"].decode(), v)
            seq = int(f[b"seq"])
            if seq > out.get(p, (0, ""))[0]:
                out[p] = (seq, name)
    return out


def replace_node_drives(node):
    """A stopped node's drives lost and replaced by empty ones: refilled at its next start."""
    for name in sorted(os.listdir(node.data)):
        if name.startswith("drive"):
            shutil.rmtree(os.path.join(node.data, name))
            os.mkdir(os.path.join(node.data, name))


def test_silent_node_is_read_around(datadir):
    """A node that stops answering but keeps its connections (SIGSTOP) turns
    suspect at its first call's deadline; from then on reads go around its
    drives (blocks rebuilt from parity, heads from the others) and make no
    call to it at all; so do writes, overwrites and deletes (quorum k: they
    stand on the rest); it is pinged, and once it answers again it is up
    and the heal queue puts back what it missed."""
    path, _ = write_map(datadir, ["n1", "n2", "n3"])
    nodes = start_all([Node(datadir, n, path,
                            extra=["--peer-timeout-ms", "4000", "--write-quorum", "4"])
                       for n in ("n1", "n2", "n3")])
    n1, n2, n3 = nodes
    try:
        c = n1.s3()
        c.create_bucket(Bucket="quiet")
        want = {}
        for i, size in enumerate([1000, 300000, 3 * 1048576 + 5]):
            data = body(size, 700 + i)
            c.put_object(Bucket="quiet", Key="k%d" % i, Body=data)
            want["k%d" % i] = md5(data)
        os.kill(n3.proc.pid, signal.SIGSTOP)

        def read_all():
            for k, h in want.items():
                assert md5(c.get_object(Bucket="quiet", Key=k)["Body"].read()) == h, k
            keys = [o["Key"] for o in c.list_objects_v2(Bucket="quiet").get("Contents", [])]
            assert keys == sorted(want), keys

        def n3_not_up():
            read_all()  # whatever n3's state, every read is whole
            return sum(d["health"] != "up" for d in node_stats(n1)["drives"]) == 2

        wait_for(n3_not_up, "n3's drives seen not up from n1", timeout=120)
        stores = node_stats(n1)["drives"]
        sick = [d["index"] for d in stores if d["health"] != "up"]
        assert len(sick) == 2, stores
        def n3_calls():
            st = node_stats(n1)
            peer = [p for p in st["peers"] if p["node"] == "n3"][0]
            return peer["calls"], peer["timeouts"], st["proto"]["probes"]

        before = n3_calls()
        for _ in range(5):
            read_all()
        for i, size in enumerate([700, 200000, 2 * 1048576 + 9]):  # new, and overwrites
            for key in ("w%d" % i, "k%d" % i):
                data = body(size, 800 + i)
                c.put_object(Bucket="quiet", Key=key, Body=data)
                want[key] = md5(data)
        c.delete_object(Bucket="quiet", Key="w0")
        del want["w0"]
        read_all()
        after = n3_calls()
        # No call of these reads and writes went to n3 (it was pinged meanwhile, perhaps). Its
        # timeouts may still grow: a head read given up on before (a hedge) is left to time out.
        assert after[0] == before[0], (before, after)
        os.kill(n3.proc.pid, signal.SIGCONT)
        wait_for(lambda: all(d["health"] == "up" for d in node_stats(n1)["drives"]),
                 "n3's drives up again from n1", timeout=120)
        wait_for(lambda: node_stats(n1)["heal"]["pending"] == 0, "n1's heal queue drained",
                 timeout=120)
        assert node_stats(n1)["heal"]["healed"] >= 5, node_stats(n1)["heal"]
        read_all()
        c2 = n2.s3()
        for k, h in want.items():
            assert md5(c2.get_object(Bucket="quiet", Key=k)["Body"].read()) == h, k
    finally:
        if n3.proc:
            os.kill(n3.proc.pid, signal.SIGCONT)
        stop_all(nodes)


def test_frozen_node_is_hedged(datadir):
    """Hedged reads: a node that stops answering (SIGSTOP) while its calls'
    deadline is a minute away does not hold up reads for that minute. Heads
    asked of it are given up on after --hedge-ms and asked of other stores;
    its blocks of a stripe are given up on once parity read beside them is
    in; its stores are then read around. Every GET returns the exact bytes
    well inside a client timeout shorter than the deadline, and no call to it
    timed out: the reads gave up on them first."""
    from botocore.config import Config
    import boto3
    path, _ = write_map(datadir, ["n1", "n2", "n3"])
    nodes = start_all([Node(datadir, n, path, extra=["--peer-timeout-ms", "60000",
                                                     "--hedge-ms", "50"])
                       for n in ("n1", "n2", "n3")])
    n1, n2, n3 = nodes
    try:
        c = n1.s3()
        c.create_bucket(Bucket="hedge")
        want = {}
        # Small objects (inline, copies on three of six stores: some keys' first copy is on
        # n3) and erasure-coded ones.
        for i, size in enumerate([1000, 300000, 1048576, 3 * 1048576 + 5] + [100 + j for j in range(8)]):
            data = body(size, 900 + i)
            c.put_object(Bucket="hedge", Key="k%d" % i, Body=data)
            want["k%d" % i] = md5(data)
        os.kill(n3.proc.pid, signal.SIGSTOP)
        # A client that gives up long before a call to n3 would (20 s against 60 s), and does
        # not retry: a read that waited for n3 fails here.
        impatient = boto3.session.Session().client(
            "s3", endpoint_url=n1.endpoint, aws_access_key_id=AK, aws_secret_access_key=SK,
            region_name="us-east-1",
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1},
                          read_timeout=20, connect_timeout=5))
        for _ in range(3):
            for k, h in want.items():
                got = impatient.get_object(Bucket="hedge", Key=k)["Body"].read()
                assert md5(got) == h, k
            r = impatient.get_object(Bucket="hedge", Key="k3", Range="bytes=1048000-2100000")
            assert r["Body"].read() == body(3 * 1048576 + 5, 903)[1048000:2100001]
        keys = [o["Key"] for o in impatient.list_objects_v2(Bucket="hedge").get("Contents", [])]
        assert keys == sorted(want), keys
        os.kill(n3.proc.pid, signal.SIGCONT)
        st = node_stats(n1)
        assert st["proto"]["hedged_reads"] >= 1, st["proto"]
        peer = [p for p in st["peers"] if p["node"] == "n3"][0]
        assert peer["timeouts"] == 0, peer  # given up on, not waited out
        # n3 answers the calls given up on late; they are dropped, and it serves as before.
        c3 = n3.s3()
        for k, h in want.items():
            assert md5(c3.get_object(Bucket="hedge", Key=k)["Body"].read()) == h, k
            assert md5(c.get_object(Bucket="hedge", Key=k)["Body"].read()) == h, k
    finally:
        if n3.proc:
            os.kill(n3.proc.pid, signal.SIGCONT)
        stop_all(nodes)



def impatient_client(node, timeout=20):
    """A client that gives up after `timeout` seconds and does not retry."""
    from botocore.config import Config
    import boto3
    return boto3.session.Session().client(
        "s3", endpoint_url=node.endpoint, aws_access_key_id=AK, aws_secret_access_key=SK,
        region_name="us-east-1",
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1},
                      read_timeout=timeout, connect_timeout=5))


def test_frozen_node_is_written_around(datadir):
    """Hedged writes: a node that stops answering (SIGSTOP) while its calls'
    deadline is a minute away does not hold up writes for that minute. With
    the write quorum at four stores of six, PUTs through another node (small
    ones stored inline, some with copies on the frozen node, and erasure-coded
    ones of one and several stripes) succeed for a client that gives up after
    20 s; the commit's read of the heads and each round's writes give up on
    the frozen node's calls after --hedge-ms once the others have the round.
    Every object reads back exact through both live nodes, no call to the
    frozen node timed out, and after SIGCONT the heal queue puts back what it
    missed: then another node can go, and every object still reads whole."""
    path, _ = write_map(datadir, ["n1", "n2", "n3"])
    nodes = start_all([Node(datadir, n, path, extra=["--peer-timeout-ms", "60000",
                                                     "--hedge-ms", "50", "--write-quorum", "4"])
                       for n in ("n1", "n2", "n3")])
    n1, n2, n3 = nodes
    try:
        c = n1.s3()
        c.create_bucket(Bucket="hedgew")
        c.put_object(Bucket="hedgew", Key="before", Body=b"connections are up")
        os.kill(n3.proc.pid, signal.SIGSTOP)
        impatient = impatient_client(n1)
        want = {}
        sizes = [1000] + [100 + j for j in range(8)] + [300000, 1048576, 8 * 1048576 + 3]
        for i, size in enumerate(sizes):
            data = body(size, 700 + i)
            impatient.put_object(Bucket="hedgew", Key="w%d" % i, Body=data)
            want["w%d" % i] = md5(data)
        for node in (n1, n2):
            cl = impatient_client(node)
            for k, h in want.items():
                assert md5(cl.get_object(Bucket="hedgew", Key=k)["Body"].read()) == h, (node.id, k)
        os.kill(n3.proc.pid, signal.SIGCONT)
        st = node_stats(n1)
        peer = [p for p in st["peers"] if p["node"] == "n3"][0]
        assert peer["timeouts"] == 0, peer  # given up on, not waited out
        assert st["proto"]["hedged_reads"] + st["proto"]["hedged_writes"] >= 1, st["proto"]
        wait_for(lambda: node_stats(n1)["heal"]["pending"] == 0, "n1's heal queue drained: %s"
                 % (node_stats(n1)["heal"], ), timeout=120)
        st = node_stats(n1)["heal"]
        assert st["healed"] >= len(want), st
        c3 = n3.s3()
        for k, h in want.items():
            assert md5(c3.get_object(Bucket="hedgew", Key=k)["Body"].read()) == h, k
        n2.stop(signal.SIGKILL)  # two more stores: n1's and the healed n3's must do
        for k, h in want.items():
            assert md5(c.get_object(Bucket="hedgew", Key=k)["Body"].read()) == h, k
    finally:
        if n3.proc:
            os.kill(n3.proc.pid, signal.SIGCONT)
        stop_all(nodes)

def test_write_quorum_and_heal_queue(datadir):
    """With the default write quorum (k+1 = five stores of six), a PUT with a
    node away (two stores) fails cleanly and leaves nothing; with k it is
    acknowledged, its key queued, and healed by the queue once the node is
    back, with no heal call: then another node can go."""
    strict = three_nodes(datadir)
    try:
        c = strict[0].s3()
        c.create_bucket(Bucket="strict")
        strict[2].stop(signal.SIGKILL)
        for size in (1000, 300000):
            with pytest.raises(ClientError) as e:
                c.put_object(Bucket="strict", Key="k%d" % size, Body=body(size, size))
            assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503
        assert c.list_objects_v2(Bucket="strict").get("KeyCount") == 0
        for size in (1000, 300000):
            with pytest.raises(ClientError):
                c.head_object(Bucket="strict", Key="k%d" % size)
    finally:
        stop_all(strict)

    root = os.path.join(datadir, "queue")
    os.makedirs(root)
    n1, n2, n3 = nodes = three_nodes(root, extra=["--write-quorum", "4"])
    try:
        c = n1.s3()
        c.create_bucket(Bucket="queued")
        c.create_bucket(Bucket="qvers")
        c.put_bucket_versioning(Bucket="qvers", VersioningConfiguration={"Status": "Enabled"})
        n3.stop(signal.SIGKILL)
        want, versions = {}, {}
        for i, size in enumerate([1000, 70000, 300000, 2500000]):
            data = body(size, 900 + i)
            c.put_object(Bucket="queued", Key="o%d" % i, Body=data)
            want["o%d" % i] = md5(data)
            # Versions covered by the next before the queue comes to them: healed too (a
            # probe found them left short of n3 for good, and lost with one node more).
            for j in range(2):
                data = body(size, 950 + 2 * i + j)
                vid = c.put_object(Bucket="qvers", Key="v%d" % i, Body=data)["VersionId"]
                versions[("v%d" % i, vid)] = md5(data)
        st = node_stats(n1)["heal"]
        assert st["queued"] >= len(want) and st["healed"] == 0, st  # (one may be in a try)
        start_all([n3])
        wait_for(lambda: node_stats(n1)["heal"]["pending"] == 0, "n1's heal queue drained: %s"
                 % (node_stats(n1), ), timeout=60)
        st = node_stats(n1)["heal"]
        assert st["healed"] >= len(want) and st["blocks_fixed"] > 0, st
        n2.stop(signal.SIGKILL)  # two more stores: n1's and n3's must do
        for k, h in want.items():
            assert md5(c.get_object(Bucket="queued", Key=k)["Body"].read()) == h, k
        for (k, vid), h in versions.items():
            got = c.get_object(Bucket="qvers", Key=k, VersionId=vid)["Body"].read()
            assert md5(got) == h, (k, vid)
        start_all([n2])
    finally:
        stop_all(nodes)


def test_refused_peers(datadir):
    path, doc = write_map(datadir, ["n1", "n2", "n3"])
    # n3 holds another secret: the others refuse it and it refuses them.
    k = ["--write-quorum", "4"]  # n3's drives are out of reach: writes need only four stores
    n1, n2, n3 = start_all([Node(datadir, "n1", path, extra=k), Node(datadir, "n2", path, extra=k),
                            Node(datadir, "n3", path, secret="not-the-cluster-secret-at-all")])
    try:
        c = n1.s3()
        c.create_bucket(Bucket="lake")
        data = body(200000, 5)
        c.put_object(Bucket="lake", Key="k", Body=data)  # four stores of six answer
        assert md5(n2.s3().get_object(Bucket="lake", Key="k")["Body"].read()) == md5(data)
        # n3 reaches no other drive: it cannot serve the object.
        with pytest.raises(ClientError) as e:
            n3.s3().get_object(Bucket="lake", Key="k")["Body"].read()
        assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] >= 500
        assert "proto_peer_refused" in n1.read_log() + n2.read_log() + n3.read_log()
    finally:
        n3.stop()
        n2.stop()
        n1.stop()
    # A node of another cluster id is refused by the others' handshake.
    other = dict(doc, cluster="other")
    opath = os.path.join(datadir, "other.json")
    with open(opath, "w") as f:
        json.dump(other, f)
    # (Its own data directory: n2's remembers the cluster it was written in, and refuses.)
    # (n3 too: a node waits up to 10 s at its start for a peer that is not there yet, but not
    # for one that refuses it.)
    # x listens before the others start, so that their wait sees it refuse (under load it
    # could come up after their 10 s wait, and be logged unreachable instead).
    x = Node(os.path.join(datadir, "x"), "n2", opath)
    x.launch()
    wait_listening(doc["nodes"][1]["proto"])
    n1, n3 = start_all([Node(datadir, "n1", path), Node(datadir, "n3", path)])
    x.wait_ready()
    try:
        with pytest.raises(ClientError):
            x.s3().get_object(Bucket="lake", Key="k")["Body"].read()
        assert "cluster id other" in n1.read_log()
        assert "member_peer_refusing peer=n2" in n1.read_log()
    finally:
        x.stop()
        n3.stop()
        n1.stop()
    # A node that holds the secret but is not in the others' map (removed, or never added):
    # it passes the handshake, and may read counters, but its requests for drives are refused.
    ports = free_ports(2)
    rogue = dict(doc, nodes=doc["nodes"] + [{"id": "n9", "s3": "127.0.0.1:%d" % ports[0],
                                             "proto": "127.0.0.1:%d" % ports[1], "drives": 2}],
                 sets=[{"ec": "4+2", "drives": ["n1/0", "n2/0", "n3/0", "n1/1", "n2/1", "n9/0"]}])
    rpath = os.path.join(datadir, "rogue.json")
    with open(rpath, "w") as f:
        json.dump(rogue, f)
    k = ["--write-quorum", "4"]
    nodes = start_all([Node(datadir, "n1", path, extra=k), Node(datadir, "n2", path, extra=k),
                       Node(datadir, "n3", path, extra=k), Node(datadir, "n9", rpath)])
    try:
        assert md5(nodes[1].s3().get_object(Bucket="lake", Key="k")["Body"].read()) == md5(data)
        with pytest.raises(ClientError) as e:
            nodes[3].s3().get_object(Bucket="lake", Key="k")["Body"].read()
        assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] >= 500
        assert "event=peer_not_member peer=n9" in "".join(n.read_log() for n in nodes[:3])
    finally:
        stop_all(nodes)


def test_bad_maps_refuse_to_start(datadir):
    path, doc = write_map(datadir, ["n1", "n2"])
    for args, why in [(["--node", "n9"], "not in the cluster map"),
                      ([], "need --node")]:
        env = dict(os.environ, WARMLAKE_CLUSTER_SECRET=SECRET)
        r = subprocess.run([WARMLAKED, "--cluster", path, "--data", datadir] + args, env=env,
                           capture_output=True, timeout=30)
        assert r.returncode == 2 and why in r.stderr.decode(), r.stderr
    bad = os.path.join(datadir, "bad.json")
    with open(bad, "w") as f:
        f.write('{"cluster": "x", "epoch": 1, "nodes": []}')
    r = subprocess.run([WARMLAKED, "--cluster", bad, "--node", "n1", "--data", datadir],
                       capture_output=True, timeout=30)
    assert r.returncode == 2 and b"nodes" in r.stderr
    # No secret, or one too short.
    for env in ({}, {"WARMLAKE_CLUSTER_SECRET": "short"}):
        e = {k: v for k, v in os.environ.items() if k != "WARMLAKE_CLUSTER_SECRET"}
        e.update(env)
        r = subprocess.run([WARMLAKED, "--cluster", path, "--node", "n1", "--data", datadir],
                           env=e, capture_output=True, timeout=30)
        assert r.returncode != 0 and b"secret" in r.stderr


# ---- the map in etcd ----

ADMIN = os.path.join(os.path.dirname(WARMLAKED), "..", "cluster", "wl-admin")


@pytest.fixture
def etcd(datadir):
    """A real etcd (Debian's etcd-server) on free loopback ports, stopped by pid."""
    import shutil
    exe = shutil.which("etcd")
    if not exe:
        pytest.fail("etcd missing: deploy/install-deps.sh installs etcd-server")
    client, peer = free_ports(2)
    url = "http://127.0.0.1:%d" % client
    log = open(os.path.join(datadir, "etcd.log"), "a")
    p = subprocess.Popen([exe, "--data-dir", os.path.join(datadir, "etcd"),
                          "--listen-client-urls", url, "--advertise-client-urls", url,
                          "--listen-peer-urls", "http://127.0.0.1:%d" % peer,
                          "--initial-advertise-peer-urls", "http://127.0.0.1:%d" % peer,
                          "--initial-cluster", "default=http://127.0.0.1:%d" % peer],
                         stdout=log, stderr=log)
    STARTED.append(p)
    deadline = time.time() + 30
    while time.time() < deadline:
        if admin(url, "cluster", "show").returncode == 2:  # answers: "no map"
            break
        time.sleep(0.2)
    else:
        p.kill()
        pytest.fail("etcd did not start")
    url = EtcdUrl(url)
    url.proc = p  # (for a test that stops it)
    yield url
    p.terminate()
    p.wait(timeout=30)


class EtcdUrl(str):
    """etcd's client URL, with its process."""


def admin(url, *args, env=None):
    e = dict(os.environ, WARMLAKE_CLUSTER_SECRET=SECRET)
    e.update(env or {})
    return subprocess.run([ADMIN, "--etcd", url] + list(args), capture_output=True, text=True,
                          timeout=60, env=e)


class EtcdNode(Node):
    def __init__(self, root, node_id, url):
        super().__init__(root, node_id, None, extra=["--etcd", url])

    def args(self):
        # No --cluster FILE: the node reads the map from etcd.
        return [WARMLAKED, "--node", self.id, "--data", self.data, "--drive-capacity", "2G",
                "--segment-size", "64M"] + self.extra


def wait_for(pred, what, timeout=60):
    """Poll pred until true (bounded): lease expiry and watches are asynchronous."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return
        time.sleep(0.2)
    raise AssertionError("timed out waiting for " + what)


def test_map_in_etcd(datadir, etcd):
    path, doc = write_map(datadir, ["n1", "n2", "n3"], sets=[
        {"ec": "4+2", "drives": ["n1/0", "n2/0", "n3/0", "n1/1", "n2/1", "n3/1"]}])
    assert admin(etcd, "status").returncode == 2  # nothing there yet
    r = admin(etcd, "cluster", "init", "--map", path)
    assert r.returncode == 0, r.stderr
    r = admin(etcd, "cluster", "init", "--map", path)
    assert r.returncode == 2 and "already holds a map" in r.stderr
    nodes = [EtcdNode(datadir, n, etcd) for n in ("n1", "n2", "n3")]
    nodes[2].extra += ["--lease-ttl", "5"]  # it is killed below: status says so sooner
    start_all(nodes)
    try:
        st = json.loads(admin(etcd, "status", "--json").stdout)
        assert st["epoch"] == 1 and [n["alive"] for n in st["nodes"]] == [True] * 3
        assert st["sets"][0]["health"] == "ok"
        assert all(d["capacity"] == 2 << 30 for n in st["nodes"] for d in n["drives"])
        # Each node's heal queue and scanner, asked over the node protocol.
        assert all(n["heal_queue"]["pending"] == 0 and n["heal_scanner"]["passes"] == 0
                   for n in st["nodes"]), st
        # ... and its memory: two drives each, their indexes sharing one cache.
        assert all(n["memory"]["rss"] > 0 and n["memory"]["index_cache_capacity"] == 64 << 20
                   for n in st["nodes"]), st
        assert admin(etcd, "status").stdout.count("MiB resident") == 3
        c = nodes[0].s3()
        c.create_bucket(Bucket="lake")
        data = body(3000000, 7)
        c.put_object(Bucket="lake", Key="k", Body=data)
        # A node added to the map: every member applies the new epoch without a restart,
        # and the new node (a gateway: none of its drives is in the set) serves the object.
        p4 = free_ports(2)
        r = admin(etcd, "node", "add", "--id", "n4", "--s3", "127.0.0.1:%d" % p4[0],
                  "--proto", "127.0.0.1:%d" % p4[1], "--drives", "1")
        assert r.returncode == 0 and "epoch 2" in r.stdout, r.stderr
        for n in nodes:
            wait_for(lambda: "event=member_epoch node=%s epoch=2" % n.id in n.read_log(),
                     n.id + " to apply epoch 2")
        n4 = start_all([EtcdNode(datadir, "n4", etcd)])[0]
        nodes.append(n4)
        assert md5(n4.s3().get_object(Bucket="lake", Key="k")["Body"].read()) == md5(data)
        assert md5(nodes[1].s3().get_object(Bucket="lake", Key="k")["Body"].read()) == md5(data)
        # A node killed: its lease runs out and status says so; the set is degraded.
        nodes[2].stop(signal.SIGKILL)
        wait_for(lambda: json.loads(admin(etcd, "status", "--json").stdout)["nodes"][2]["alive"]
                 is False, "n3's lease to expire")
        st = json.loads(admin(etcd, "status", "--json").stdout)
        assert st["sets"][0]["health"] == "degraded" and st["sets"][0]["shards_down"] == 2
        assert md5(n4.s3().get_object(Bucket="lake", Key="k")["Body"].read()) == md5(data)
        # Removing a node whose drives the set uses is refused; the map is unchanged.
        r = admin(etcd, "node", "remove", "--id", "n3")
        assert r.returncode == 2 and "n3" in r.stderr
        assert json.loads(admin(etcd, "cluster", "show").stdout)["epoch"] == 2
        # A map that moves this set's shards fences the members: 503, never old-layout answers.
        new = json.loads(admin(etcd, "cluster", "show").stdout)
        new["sets"][0]["drives"] = ["n1/1", "n2/0", "n3/0", "n1/0", "n2/1", "n3/1"]
        mp = os.path.join(datadir, "moved.json")
        with open(mp, "w") as f:
            json.dump(new, f)
        assert admin(etcd, "map", "set", "--map", mp).returncode == 0
        wait_for(lambda: "event=member_fenced node=n1" in nodes[0].read_log(), "n1's fence")
        with pytest.raises(ClientError) as e:
            c.get_object(Bucket="lake", Key="k")
        assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503
    finally:
        stop_all(nodes)


def test_drive_replace_refills_now(datadir, etcd):
    """A drive replaced by an empty one: `wl-admin drive replace NODE/N` starts that
    node's heal scanner at once (its interval is a week), which rebuilds what the drive
    lacks; then another node can go and everything still reads whole."""
    path, _ = write_map(datadir, ["n1", "n2", "n3"])
    assert admin(etcd, "cluster", "init", "--map", path).returncode == 0
    nodes = start_all([EtcdNode(datadir, n, etcd) for n in ("n1", "n2", "n3")])
    n1, n2, n3 = nodes
    try:
        c = n1.s3()
        c.create_bucket(Bucket="swap")
        want = {}
        for i, size in enumerate([500, 90000, 2 * 1048576 + 3]):
            data = body(size, 300 + i)
            c.put_object(Bucket="swap", Key="k%d" % i, Body=data)
            want["k%d" % i] = md5(data)
        # Mistakes are named, nothing asked.
        for bad, why in (("n9/0", "no such drive"), ("n2/7", "no such drive"),
                         ("n2", "no such drive")):
            r = admin(etcd, "drive", "replace", bad)
            assert r.returncode == 2 and why in r.stderr, r.stderr
        r = admin(etcd, "drive", "replace", "n2/1", env={"WARMLAKE_CLUSTER_SECRET": ""})
        assert r.returncode == 2 and "secret" in r.stderr
        n2.stop()
        shutil.rmtree(os.path.join(n2.data, "drive1"))
        n2.start()
        r = admin(etcd, "drive", "replace", "n2/1")
        assert r.returncode == 0 and "heal pass started" in r.stdout, r.stderr

        def n2_pass():
            st = json.loads(admin(etcd, "status", "--json").stdout)
            return st["nodes"][1].get("heal_scanner", {}).get("passes", 0) >= 1
        wait_for(n2_pass, "n2's heal pass", timeout=120)
        sc = json.loads(admin(etcd, "status", "--json").stdout)["nodes"][1]["heal_scanner"]
        assert sc["blocks_fixed"] > 0 and sc["failed"] == 0, sc
        # Two more shards of every stripe gone: the refilled drive stands in.
        n3.stop(signal.SIGKILL)
        for k, h in want.items():
            assert md5(c.get_object(Bucket="swap", Key=k)["Body"].read()) == h, k
    finally:
        stop_all(nodes)


def test_replaced_drive_is_listed_last_by_every_node(datadir, etcd):
    """A node that finds one of its drives replaced by an empty one says so in its
    registration in etcd ("refilling"); every other node then takes that store
    last, as its own node does, so a listing through any node merges k stores
    that hold what they should. Here n1's drive 0 (store 0 of 4+2, which a listing
    takes first) is replaced with no scanner to refill it, and small objects,
    whose heads and bytes are on three stores of six, are listed through n3."""
    path, _ = write_map(datadir, ["n1", "n2", "n3"])
    assert admin(etcd, "cluster", "init", "--map", path).returncode == 0
    nodes = [EtcdNode(datadir, n, etcd) for n in ("n1", "n2", "n3")]
    for n in nodes:
        n.extra = n.extra + ["--scrub-interval", "0"]
    start_all(nodes)
    n1, n2, n3 = nodes
    try:
        c = n1.s3()
        c.create_bucket(Bucket="marks")
        want = {}
        for i in range(48):
            data = body(300 + i, 1300 + i)
            c.put_object(Bucket="marks", Key="s%02d" % i, Body=data)
            want["s%02d" % i] = md5(data)
        n1.stop()
        shutil.rmtree(os.path.join(n1.data, "drive0"))
        n1.start()

        def seen_by_n3():
            return [d.get("refilling") for d in node_stats(n3)["drives"]] == [1, 0, 0, 0, 0, 0]
        wait_for(seen_by_n3, "n3 taking n1's replaced drive as refilling", timeout=60)
        c3 = n3.s3()
        keys, token = [], None
        while True:
            kw = {"Bucket": "marks", "MaxKeys": 10}
            if token:
                kw["ContinuationToken"] = token
            r = c3.list_objects_v2(**kw)
            keys += [o["Key"] for o in r.get("Contents", [])]
            if not r.get("IsTruncated"):
                break
            token = r["NextContinuationToken"]
        assert keys == sorted(want)
        for k, h in want.items():
            assert md5(c3.get_object(Bucket="marks", Key=k)["Body"].read()) == h, k
    finally:
        stop_all(nodes)


def break_drive_geometry(node, drive):
    """The node stopped, a bit of drive's geometry file flipped (the drive then does not open),
    the node started again: (the file's path, its good bytes) for mend_drive_geometry."""
    node.stop()
    geo = os.path.join(node.data, "drive%d" % drive, "DRIVE")
    with open(geo, "rb") as f:
        good = f.read()
    at = good.index(b"segment_size=") + len(b"segment_size=")
    with open(geo, "wb") as f:
        f.write(good[:at] + bytes([good[at] ^ 0x01]) + good[at + 1:])
    node.start()
    return geo, good


def mend_drive_geometry(node, geo, good):
    node.stop()
    with open(geo, "wb") as f:
        f.write(good)
    node.start()


def test_a_failed_drive_is_down_for_every_node(datadir, etcd):
    """A member one of whose drives does not open (a bit flipped in its geometry file)
    starts without it and says so in its registration ("failed"): every node takes that
    store as down, `wl-admin status` names the drive FAILED and the set degraded, and
    objects written meanwhile through another node read back. Mended, the drive is refilled
    with what it missed at the node's next start, so that the objects written while it was
    failed survive another node's loss. Before: the member did not start at all."""
    path, _ = write_map(datadir, ["n1", "n2", "n3"])
    assert admin(etcd, "cluster", "init", "--map", path).returncode == 0
    nodes = start_all([EtcdNode(datadir, n, etcd) for n in ("n1", "n2", "n3")])
    n1, n2, n3 = nodes
    try:
        c = n1.s3()
        c.create_bucket(Bucket="dead")
        want = {}
        for i, size in enumerate([0, 700, 90000, 2 * 1048576 + 3]):
            data = body(size, 400 + i)
            c.put_object(Bucket="dead", Key="a%d" % i, Body=data)
            want["a%d" % i] = md5(data)
        geo, good = break_drive_geometry(n2, 1)
        assert "event=drive_failed path=%s/drive1" % n2.data in n2.read_log()
        st = json.loads(admin(etcd, "status", "--json").stdout)
        assert st["nodes"][1]["drives"][1].get("failed") is True, st["nodes"][1]
        assert st["sets"][0]["shards_down"] == 1 and st["sets"][0]["health"] == "degraded"
        assert "drive 1: FAILED" in admin(etcd, "status").stdout
        at = st["sets"][0]["drives"].index("n2/1")

        def down_everywhere():
            return all(node_stats(n)["drives"][at]["health"] == "failed" for n in nodes)
        wait_for(down_everywhere, "every node taking n2/1 as failed")
        c3 = n3.s3()
        for i, size in enumerate([0, 800, 100000, 3 * 1048576 + 5]):
            data = body(size, 500 + i)
            c3.put_object(Bucket="dead", Key="b%d" % i, Body=data)
            want["b%d" % i] = md5(data)
        for n in nodes:
            cn = n.s3()
            for k, h in want.items():
                assert md5(cn.get_object(Bucket="dead", Key=k)["Body"].read()) == h, (n.id, k)
        mend_drive_geometry(n2, geo, good)
        assert "event=drive_back path=%s/drive1" % n2.data in n2.read_log()

        def refilled():
            st = json.loads(admin(etcd, "status", "--json").stdout)
            return st["nodes"][1].get("heal_scanner", {}).get("passes", 0) >= 1 and \
                not any(d.get("refilling") for d in node_stats(n2)["drives"])
        wait_for(refilled, "n2's drive refilled", timeout=120)
        # n1's two shards gone: the objects written while n2/1 was failed need it.
        n1.stop(signal.SIGKILL)
        for k, h in want.items():
            assert md5(c3.get_object(Bucket="dead", Key=k)["Body"].read()) == h, k
    finally:
        stop_all(nodes)


def test_a_failed_drive_is_failed_for_every_node_of_a_static_map(datadir):
    """A cluster whose map is a file has no registrations to say that a drive did not open:
    its node now answers calls to it ERR_DRIVE_FAILED, and a peer takes the store as failed
    from the first answer (healed around, not waited for), until that node comes back.
    Before, the other nodes took it as up for good, their heals failing against it. Mended and
    restarted, the drive is up again everywhere, and what was written meanwhile reads back."""
    path, doc = write_map(datadir, ["n1", "n2", "n3"], sets=[
        {"ec": "4+2", "drives": ["n1/0", "n2/0", "n3/0", "n1/1", "n2/1", "n3/1"]}])
    nodes = start_all([Node(datadir, n, path) for n in ("n1", "n2", "n3")])
    n1, n2, n3 = nodes
    try:
        c = n1.s3()
        c.create_bucket(Bucket="dead")
        want = {}
        geo, good = break_drive_geometry(n2, 1)
        assert "event=drive_failed path=%s/drive1" % n2.data in n2.read_log()
        at = doc["sets"][0]["drives"].index("n2/1")
        for i, size in enumerate([0, 800, 100000, 3 * 1048576 + 5]):
            data = body(size, 600 + i)
            nodes[i % 3].s3().put_object(Bucket="dead", Key="b%d" % i, Body=data)
            want["b%d" % i] = md5(data)
        for n in nodes:  # every node reads every object: each calls n2/1 at least once
            cn = n.s3()
            for k, h in want.items():
                assert md5(cn.get_object(Bucket="dead", Key=k)["Body"].read()) == h, (n.id, k)

        def failed_everywhere():
            return all(node_stats(n)["drives"][at]["health"] == "failed" for n in nodes)
        wait_for(failed_everywhere, "every node taking n2/1 as failed", timeout=30)
        mend_drive_geometry(n2, geo, good)
        assert "event=drive_back path=%s/drive1" % n2.data in n2.read_log()

        def up_everywhere():
            return all(node_stats(n)["drives"][at]["health"] == "up" for n in nodes)
        wait_for(up_everywhere, "n2/1 up again on every node", timeout=60)
        for n in nodes:
            cn = n.s3()
            for k, h in want.items():
                assert md5(cn.get_object(Bucket="dead", Key=k)["Body"].read()) == h, (n.id, k)
    finally:
        stop_all(nodes)


def test_lease_gone_is_read_and_written_around(datadir, etcd):
    """A node frozen (SIGSTOP) keeps its connections but loses its etcd lease: the others
    take it as down from its lease alone (the call deadline is a minute, and no call of
    theirs waits on it), read and write around it, and take it back once it registers
    again."""
    path, _ = write_map(datadir, ["n1", "n2", "n3"])
    assert admin(etcd, "cluster", "init", "--map", path).returncode == 0
    nodes = [EtcdNode(datadir, n, etcd) for n in ("n1", "n2", "n3")]
    for n in nodes:
        n.extra += ["--peer-timeout-ms", "60000", "--write-quorum", "4"]
    # The frozen node's lease is short (the test waits it out); the others keep the default's
    # slack, so that a loaded machine does not take them as away.
    nodes[2].extra += ["--lease-ttl", "5"]
    start_all(nodes)
    n1, n2, n3 = nodes
    try:
        c = n1.s3()
        c.create_bucket(Bucket="leases")
        want = {}
        for i, size in enumerate([800, 250000]):
            data = body(size, 40 + i)
            c.put_object(Bucket="leases", Key="k%d" % i, Body=data)
            want["k%d" % i] = md5(data)
        os.kill(n3.proc.pid, signal.SIGSTOP)
        # (Not by polling n1's stats: until then they would ask n3 and wait a minute.)
        wait_for(lambda: "event=proto_peer_away peer=n3" in n1.read_log(),
                 "n1 to take n3 as away by its lease", timeout=60)
        assert sum(d["health"] != "up" for d in node_stats(n1)["drives"]) == 2
        peer = [p for p in node_stats(n1)["peers"] if p["node"] == "n3"][0]
        assert peer["timeouts"] == 0, peer  # no call deadline told it
        before = peer["calls"]
        for i, size in enumerate([600, 300000]):
            data = body(size, 60 + i)
            c.put_object(Bucket="leases", Key="w%d" % i, Body=data)
            want["w%d" % i] = md5(data)
        for k, h in want.items():
            assert md5(c.get_object(Bucket="leases", Key=k)["Body"].read()) == h, k
        peer = [p for p in node_stats(n1)["peers"] if p["node"] == "n3"][0]
        assert peer["calls"] == before and peer["timeouts"] == 0, peer
        os.kill(n3.proc.pid, signal.SIGCONT)
        wait_for(lambda: all(d["health"] == "up" for d in node_stats(n1)["drives"]),
                 "n3 back up from n1 once it registers again", timeout=60)
        assert "event=proto_peer_back peer=n3" in n1.read_log()
        wait_for(lambda: node_stats(n1)["heal"]["pending"] == 0, "n1's heal queue drained")
        for k, h in want.items():
            assert md5(n2.s3().get_object(Bucket="leases", Key=k)["Body"].read()) == h, k
    finally:
        if n3.proc:
            os.kill(n3.proc.pid, signal.SIGCONT)
        stop_all(nodes)


def pool_bytes(node, first, last):
    """User bytes on the node's view of stores first..last (a pool's: set j's store i is
    j*(k+m)+i in /_warmlake/stats)."""
    return sum(d["user_bytes"] for d in node_stats(node)["drives"][first:last])


def test_pool_added_live(datadir, etcd):
    """A pool added to a running cluster (`wl-admin pool add`): every node applies it
    without a restart, nothing moves, old keys stay where they are (overwrites too),
    new keys go to both pools, every node reads every object; a draining pool takes no
    new key but keeps serving its own; `pool weigh` sets the weights from free space; a
    node restarted with the grown map finds its layout and everything still reads."""
    path, _ = write_map(datadir, ["n1", "n2", "n3"], sets=[
        {"ec": "2+1", "drives": ["n1/0", "n2/0", "n3/0"]},
        {"ec": "2+1", "drives": ["n1/1", "n2/1", "n3/1"]}])
    assert admin(etcd, "cluster", "init", "--map", path).returncode == 0
    old = [EtcdNode(datadir, n, etcd) for n in ("n1", "n2", "n3")]
    nodes = list(old)
    start_all(old)
    try:
        c1 = old[0].s3()
        c1.create_bucket(Bucket="grow")
        want = {}
        for i in range(24):
            data = body([500, 70000, 300000][i % 3] + i, 4000 + i)
            c1.put_object(Bucket="grow", Key="old-%02d" % i, Body=data)
            want["old-%02d" % i] = md5(data)
        ports = free_ports(6)
        for j, n in enumerate(("n4", "n5", "n6")):
            r = admin(etcd, "node", "add", "--id", n, "--s3", "127.0.0.1:%d" % ports[2 * j],
                      "--proto", "127.0.0.1:%d" % ports[2 * j + 1], "--drives", "1")
            assert r.returncode == 0, r.stderr
        # Not before its nodes are up: they would hold up every new key and listing.
        r = admin(etcd, "pool", "add", "--id", "p1", "--nodes", "n4,n5,n6", "--ec", "2+1")
        assert r.returncode == 2 and "node n4 is not up" in r.stderr, r.stderr
        new = start_all([EtcdNode(datadir, n, etcd) for n in ("n4", "n5", "n6")])
        nodes += new
        r = admin(etcd, "pool", "add", "--id", "p1", "--nodes", "n4,n5,x")
        assert r.returncode == 2 and "node x is not up" in r.stderr
        r = admin(etcd, "pool", "add", "--id", "p1", "--nodes", "n4,n5,n6", "--ec", "2+1")
        assert r.returncode == 0, r.stderr
        st = json.loads(admin(etcd, "status", "--json").stdout)
        assert [(p["id"], p["first_set"], p["sets"], p["state"]) for p in st["pools"]] == [
            ("p0", 0, 2, "active"), ("p1", 2, 1, "active")]
        for n in nodes:
            wait_for(lambda: "event=member_pool_added pool=p1" in n.read_log(),
                     n.id + " to add pool p1")
        assert all("member_fenced" not in n.read_log() for n in old)
        # Old keys stay in pool 0, overwritten through a node of pool 1 included.
        for i in range(0, 24, 3):
            data = body(2000 + i, 5000 + i)
            new[1].s3().put_object(Bucket="grow", Key="old-%02d" % i, Body=data)
            want["old-%02d" % i] = md5(data)
        assert pool_bytes(old[0], 6, 9) == 0
        # New keys: both pools take some.
        for i in range(30):
            data = body([300, 90000][i % 2] + i, 6000 + i)
            nodes[i % 6].s3().put_object(Bucket="grow", Key="new-%02d" % i, Body=data)
            want["new-%02d" % i] = md5(data)
        in_p1 = pool_bytes(old[0], 6, 9)
        assert in_p1 > 0 and pool_bytes(old[0], 0, 6) > 0
        assert pool_bytes(new[0], 6, 9) == in_p1  # every node counts the same stores
        for n in nodes:
            cl = n.s3()
            keys, token = [], None
            while True:
                kw = {"Bucket": "grow", "MaxKeys": 17}
                if token:
                    kw["ContinuationToken"] = token
                r = cl.list_objects_v2(**kw)
                keys += [o["Key"] for o in r.get("Contents", [])]
                if not r.get("IsTruncated"):
                    break
                token = r["NextContinuationToken"]
            assert keys == sorted(want), n.id
            for k, h in want.items():
                assert md5(cl.get_object(Bucket="grow", Key=k)["Body"].read()) == h, (n.id, k)
        # Draining p1: new keys all go to p0; p1's own keys are read and overwritten in place.
        r = admin(etcd, "pool", "drain", "--id", "p1")
        assert r.returncode == 0, r.stderr
        for n in nodes:
            wait_for(lambda: "event=pool_state pool=1 weight=1 draining" in n.read_log(),
                     n.id + " to drain p1")
        before = pool_bytes(old[1], 6, 9)
        for i in range(20):
            data = body(400 + i, 7000 + i)
            nodes[i % 6].s3().put_object(Bucket="grow", Key="late-%02d" % i, Body=data)
            want["late-%02d" % i] = md5(data)
        assert pool_bytes(old[1], 6, 9) <= before  # (its mover moves keys out meanwhile)
        for k, h in want.items():
            assert md5(new[2].s3().get_object(Bucket="grow", Key=k)["Body"].read()) == h, k
        assert admin(etcd, "pool", "activate", "--id", "p1").returncode == 0
        # Weighed from free space: p0's six drives have about twice the room of p1's three.
        r = admin(etcd, "pool", "weigh")
        assert r.returncode == 0, r.stderr
        pools = json.loads(admin(etcd, "status", "--json").stdout)["pools"]
        assert pools[0]["weight"] == 1000000 and 400000 < pools[1]["weight"] < 600000, pools
        r = admin(etcd, "pool", "weigh", env={"WARMLAKE_CLUSTER_SECRET": ""})
        assert r.returncode == 2
        # A restart with the grown map: the layout recorded grew with it.
        old[0].stop()
        old[0].start()
        for k, h in want.items():
            assert md5(old[0].s3().get_object(Bucket="grow", Key=k)["Body"].read()) == h, k
    finally:
        stop_all(nodes)


def drain_state(etcd, node_id):
    st = json.loads(admin(etcd, "status", "--json").stdout)
    return [n for n in st["nodes"] if n["id"] == node_id][0].get("drain", {})


def versions_of(c, bucket):
    r = c.list_object_versions(Bucket=bucket)
    return sorted([(v["Key"], v["VersionId"], v["ETag"], v["Size"], v["LastModified"], v["IsLatest"])
                   for v in r.get("Versions", [])] +
                  [(d["Key"], d["VersionId"], "DM", 0, d["LastModified"], d["IsLatest"])
                   for d in r.get("DeleteMarkers", [])])


def test_pool_drained(datadir, etcd):
    """`wl-admin pool drain` of the first pool, with a second one added: every object moves
    to the new pool with its identity (version ids, ETags, Last-Modified, delete markers,
    tags, ACLs, a multipart object's parts) while clients write through every node, and
    every node reads everything back by hash; an upload in progress stays until completed,
    then moves too; the drained pool's drives hold almost no live bytes; `wl-admin status`
    shows the mover's progress."""
    path, _ = write_map(datadir, ["n1", "n2", "n3"], sets=[
        {"ec": "2+1", "drives": ["n1/0", "n2/0", "n3/0"]},
        {"ec": "2+1", "drives": ["n1/1", "n2/1", "n3/1"]}])
    assert admin(etcd, "cluster", "init", "--map", path).returncode == 0
    nodes = [EtcdNode(datadir, n, etcd) for n in ("n1", "n2", "n3")]
    nodes[0].extra += ["--drain-rate", "4M"]  # slow enough for the writes below to meet it
    start_all(nodes)
    try:
        c1 = nodes[0].s3()
        c1.create_bucket(Bucket="plain")
        c1.create_bucket(Bucket="vers")
        c1.put_bucket_versioning(Bucket="vers", VersioningConfiguration={"Status": "Enabled"})
        c1.put_bucket_cors(Bucket="plain", CORSConfiguration={"CORSRules": [
            {"AllowedMethods": ["GET"], "AllowedOrigins": ["http://drain.example"]}]})
        want = {}
        for i in range(24):
            data = body([0, 500, 70000, 300000][i % 4] + (i if i % 4 else 0), 100 + i)
            c1.put_object(Bucket="plain", Key="p-%02d" % i, Body=data)
            want["p-%02d" % i] = md5(data)
        c1.put_object_tagging(Bucket="plain", Key="p-01", Tagging={
            "TagSet": [{"Key": "t", "Value": "moved"}]})
        c1.put_object_acl(Bucket="plain", Key="p-02", ACL="public-read")
        for i in range(6):
            for j, size in enumerate((100, 80000, 300)):
                c1.put_object(Bucket="vers", Key="v-%d" % i, Body=body(size + i, 1000 * i + j))
                if j == 1 and i % 2:
                    c1.delete_object(Bucket="vers", Key="v-%d" % i)
        parts = [body(5 << 20, 31), body(1 << 20, 32)]
        up = c1.create_multipart_upload(Bucket="plain", Key="mp")["UploadId"]
        et = [c1.upload_part(Bucket="plain", Key="mp", UploadId=up, PartNumber=j + 1,
                             Body=parts[j])["ETag"] for j in range(2)]
        c1.complete_multipart_upload(Bucket="plain", Key="mp", UploadId=up, MultipartUpload={
            "Parts": [{"PartNumber": j + 1, "ETag": et[j]} for j in range(2)]})
        want["mp"] = md5(b"".join(parts))
        opened = c1.create_multipart_upload(Bucket="plain", Key="open")["UploadId"]
        oet = c1.upload_part(Bucket="plain", Key="open", UploadId=opened, PartNumber=1,
                             Body=body(1000, 41))["ETag"]
        vers_before = versions_of(c1, "vers")

        ports = free_ports(6)
        for j, n in enumerate(("n4", "n5", "n6")):
            r = admin(etcd, "node", "add", "--id", n, "--s3", "127.0.0.1:%d" % ports[2 * j],
                      "--proto", "127.0.0.1:%d" % ports[2 * j + 1], "--drives", "2")
            assert r.returncode == 0, r.stderr
        nodes += start_all([EtcdNode(datadir, n, etcd) for n in ("n4", "n5", "n6")])
        r = admin(etcd, "pool", "add", "--id", "p1", "--nodes", "n4,n5,n6", "--ec", "2+1")
        assert r.returncode == 0, r.stderr
        for n in nodes:
            wait_for(lambda: "event=member_pool_added pool=p1" in n.read_log(),
                     n.id + " to add pool p1")
        live0 = sum(d["live_bytes"] for d in node_stats(nodes[0])["drives"][0:6])
        r = admin(etcd, "pool", "drain", "--id", "p0")
        assert r.returncode == 0, r.stderr
        # Writes through every node while the keys move: new keys, and overwrites of old ones.
        for i in range(30):
            c = nodes[i % 6].s3()
            key = "p-%02d" % (i % 24) if i % 3 == 0 else "w-%02d" % i
            data = body(300 + 1000 * (i % 5), 5000 + i)
            c.put_object(Bucket="plain", Key=key, Body=data)
            want[key] = md5(data)
        # n1 holds the first store of both sets of p0: it moves them.
        wait_for(lambda: drain_state(etcd, "n1").get("passes", 0) >= 1 and
                 drain_state(etcd, "n1").get("left", 1) == 0, "n1 to move p0's keys", 120)
        assert drain_state(etcd, "n1")["uploads_left"] == 1  # the open upload stays
        c1.complete_multipart_upload(Bucket="plain", Key="open", UploadId=opened, MultipartUpload={
            "Parts": [{"PartNumber": 1, "ETag": oet}]})
        want["open"] = md5(body(1000, 41))
        wait_for(lambda: drain_state(etcd, "n1").get("done") == 1, "p0 to be drained", 120)
        st = drain_state(etcd, "n1")
        assert st["keys"] >= 24 + 6 + 3 and st["failed"] == 0, st
        status = admin(etcd, "status").stdout
        assert "DRAINED" in status, status
        live_after = sum(d["live_bytes"] for d in node_stats(nodes[0])["drives"][0:6])
        assert live_after < live0 / 20, (live0, live_after)
        for n in nodes:
            cl = n.s3()
            for k, h in want.items():
                assert md5(cl.get_object(Bucket="plain", Key=k)["Body"].read()) == h, (n.id, k)
            assert versions_of(cl, "vers") == vers_before, n.id
            assert cl.get_object_tagging(Bucket="plain", Key="p-01")["TagSet"] == [
                {"Key": "t", "Value": "moved"}]
            grants = cl.get_object_acl(Bucket="plain", Key="p-02")["Grants"]
            assert any(g["Grantee"].get("URI", "").endswith("AllUsers") for g in grants)
            assert cl.head_object(Bucket="plain", Key="mp", PartNumber=1)["PartsCount"] == 2
            assert cl.get_bucket_cors(Bucket="plain")["CORSRules"][0]["AllowedOrigins"] == [
                "http://drain.example"]
            keys = [o["Key"] for o in cl.list_objects_v2(Bucket="plain")["Contents"]]
            assert keys == sorted(want), n.id

        # Removed: the drained pool goes out of service; then its nodes go, and everything
        # reads, lists and takes writes through the others. An active pool is not removed,
        # and a removed one does not come back.
        r = admin(etcd, "pool", "remove", "--id", "p1")
        assert r.returncode != 0 and "not draining" in r.stderr, r.stderr
        r = admin(etcd, "pool", "remove", "--id", "p0")
        assert r.returncode == 0, r.stderr
        for n in nodes:
            wait_for(lambda: "event=pool_state pool=0 weight=1 removed" in n.read_log(),
                     n.id + " to apply p0's removal")
        for n in nodes[:3]:
            n.stop()
        for n in nodes[3:]:
            cl = n.s3()
            for k, h in want.items():
                assert md5(cl.get_object(Bucket="plain", Key=k)["Body"].read()) == h, (n.id, k)
            assert versions_of(cl, "vers") == vers_before, n.id
            keys = [o["Key"] for o in cl.list_objects_v2(Bucket="plain")["Contents"]]
            assert keys == sorted(want), n.id
            assert cl.list_multipart_uploads(Bucket="plain").get("Uploads", []) == []
        c4 = nodes[3].s3()
        c4.put_object(Bucket="plain", Key="after-removal", Body=b"still here")
        assert nodes[5].s3().get_object(Bucket="plain", Key="after-removal")[
            "Body"].read() == b"still here"
        st = json.loads(admin(etcd, "status", "--json").stdout)
        assert [p["state"] for p in st["pools"]] == ["removed", "active"], st["pools"]
        r = admin(etcd, "pool", "activate", "--id", "p0")
        assert r.returncode != 0 and "removed" in r.stderr, r.stderr
    finally:
        stop_all(nodes)


def test_drain_into_a_full_pool_keeps_its_keys_and_its_log_short(datadir, etcd):
    """A drain into a pool too small for it: the keys that do not fit stay in the draining
    pool, whole (every one reads back by hash through every node), and the mover says so in
    one line a pass (how many failed, the first by name), not a line a key a pass (every key
    of the pool every two seconds: a log flood for as long as the target is full)."""
    path, _ = write_map(datadir, ["n1", "n2", "n3"], drives=1, sets=[
        {"ec": "2+1", "drives": ["n1/0", "n2/0", "n3/0"]}])
    assert admin(etcd, "cluster", "init", "--map", path).returncode == 0
    nodes = start_all([EtcdNode(datadir, n, etcd) for n in ("n1", "n2", "n3")])
    try:
        c1 = nodes[0].s3()
        c1.create_bucket(Bucket="full")
        want = {}
        for i in range(40):
            data = body((1 << 20) + i, 300 + i)
            c1.put_object(Bucket="full", Key="k-%02d" % i, Body=data)
            want["k-%02d" % i] = md5(data)
        ports = free_ports(6)
        for j, n in enumerate(("n4", "n5", "n6")):
            r = admin(etcd, "node", "add", "--id", n, "--s3", "127.0.0.1:%d" % ports[2 * j],
                      "--proto", "127.0.0.1:%d" % ports[2 * j + 1], "--drives", "1")
            assert r.returncode == 0, r.stderr
        small = [EtcdNode(datadir, n, etcd) for n in ("n4", "n5", "n6")]
        for n in small:  # room for about a third of what p0 holds
            n.extra += ["--drive-capacity", "16M", "--segment-size", "2M"]
        nodes += start_all(small)
        r = admin(etcd, "pool", "add", "--id", "p1", "--nodes", "n4,n5,n6", "--ec", "2+1")
        assert r.returncode == 0, r.stderr
        for n in nodes:
            wait_for(lambda: "event=member_pool_added pool=p1" in n.read_log(),
                     n.id + " to add pool p1")
        r = admin(etcd, "pool", "drain", "--id", "p0")
        assert r.returncode == 0, r.stderr
        wait_for(lambda: drain_state(etcd, "n1").get("passes", 0) >= 3, "three passes", 180)
        st = drain_state(etcd, "n1")
        assert st["failed"] > 0 and st["left"] > 0 and st["done"] == 0, st
        log = nodes[0].read_log()
        passes = sum("event=drain_pass" in ln for ln in log.splitlines())
        said = [ln for ln in log.splitlines() if "event=drain_keys_failed" in ln]
        assert 1 <= len(said) <= passes + 1, (passes, said[-3:])
        assert "first_key=k-" in said[0], said[0]
        assert "move_failed" not in log and "move_copy_short" not in log
        for n in nodes:
            cl = n.s3()
            for k, h in want.items():
                assert md5(cl.get_object(Bucket="full", Key=k)["Body"].read()) == h, (n.id, k)
            keys = [o["Key"] for o in cl.list_objects_v2(Bucket="full")["Contents"]]
            assert keys == sorted(want), n.id
    finally:
        stop_all(nodes)


def test_node_add_pins_an_automatic_map(datadir, etcd):
    """`node add` on a map whose set is automatic (every drive) writes the layout out
    first, drive by drive, as pool p0: the running nodes keep their set (no fence) and the
    new node's drives wait for a pool."""
    path, _ = write_map(datadir, ["n1", "n2", "n3"])
    assert admin(etcd, "cluster", "init", "--map", path).returncode == 0
    nodes = start_all([EtcdNode(datadir, n, etcd) for n in ("n1", "n2", "n3")])
    try:
        c = nodes[0].s3()
        c.create_bucket(Bucket="pin")
        data = body(200000, 11)
        c.put_object(Bucket="pin", Key="k", Body=data)
        p4 = free_ports(2)
        r = admin(etcd, "node", "add", "--id", "n4", "--s3", "127.0.0.1:%d" % p4[0],
                  "--proto", "127.0.0.1:%d" % p4[1], "--drives", "2")
        assert r.returncode == 0, r.stderr
        doc = json.loads(admin(etcd, "cluster", "show").stdout)
        assert "sets" not in doc and "ec" not in doc
        assert doc["pools"] == [{"id": "p0", "sets": [{"ec": "4+2", "drives": [
            "n1/0", "n2/0", "n3/0", "n1/1", "n2/1", "n3/1"]}]}]
        for n in nodes:
            wait_for(lambda: "event=member_epoch node=%s epoch=2" % n.id in n.read_log(),
                     n.id + " to apply epoch 2")
            assert "member_fenced" not in n.read_log()
            assert md5(n.s3().get_object(Bucket="pin", Key="k")["Body"].read()) == md5(data)
    finally:
        stop_all(nodes)


def etcd_kv(url, op, key, value=None):
    """A put or delete through etcd's JSON gateway: what an operator's etcdctl would do."""
    import base64
    import urllib.request
    body = {"key": base64.b64encode(key.encode()).decode()}
    if value is not None:
        body["value"] = base64.b64encode(value.encode()).decode()
    req = urllib.request.Request(url + "/v3/kv/" + op, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def test_features_wait_for_every_node_and_never_go_back(datadir, etcd):
    """A rolling upgrade (cluster/features.h): a feature is used once every node of the
    map reads it, and never again by less. A node run as a build without one
    (WARMLAKE_FEATURES_CLAIM lowers what it says it reads) holds it back while it is in
    the map; data keeps flowing; once upgraded, the feature is put in use, and a build
    without it then refuses to start, or is fenced if it meets it while running."""
    path, doc = write_map(datadir, ["n1", "n2", "n3"], sets=[
        {"ec": "4+2", "drives": ["n1/0", "n2/0", "n3/0", "n1/1", "n2/1", "n3/1"]}])
    assert admin(etcd, "cluster", "init", "--map", path).returncode == 0
    all_on = "if-kept,part-tags,closing-records,initiators,token-crc"
    old, old_on = "0x1e", "part-tags,closing-records,initiators,token-crc"  # all but if-kept

    def status():
        return json.loads(admin(etcd, "status", "--json").stdout)

    def as_old(n):
        n.env = lambda: dict(Node.env(n), WARMLAKE_FEATURES_CLAIM=old)
        return n

    def refused_to_start(n):
        r = subprocess.run(n.args(), env=n.env(), capture_output=True, timeout=60)
        assert r.returncode == 2, r.stderr
        assert "lacks features the cluster uses (if-kept)" in r.stderr.decode(), r.stderr

    # A new cluster uses every feature of the build that made it.
    assert status()["features_in_use"] == all_on
    refused_to_start(as_old(EtcdNode(datadir, "n3", etcd)))
    # A cluster from before the features were recorded: none in use yet.
    etcd_kv(etcd, "deleterange", "/warmlake/features_in_use")
    nodes = [EtcdNode(datadir, "n1", etcd), EtcdNode(datadir, "n2", etcd),
             as_old(EtcdNode(datadir, "n3", etcd))]
    start_all(nodes)
    try:
        wait_for(lambda: status()["features_in_use"] == old_on, "what all three read in use")
        st = status()
        assert st["features_waiting"] == {"if-kept": ["n3"]}, st
        assert [n["features"] for n in st["nodes"]] == [all_on, all_on, old_on], st
        assert all(n["build"].startswith("warmlake ") for n in st["nodes"]), st
        text = admin(etcd, "status").stdout
        assert "feature if-kept waits for: n3" in text, text
        # Data flows meanwhile: versions archived (the gated write) through every node.
        c = nodes[2].s3()
        c.create_bucket(Bucket="upg")
        c.put_bucket_versioning(Bucket="upg", VersioningConfiguration={"Status": "Enabled"})
        bodies = {}
        for i, n in enumerate(nodes * 2):
            data = body(1000 + 70000 * i, i)
            vid = n.s3().put_object(Bucket="upg", Key="k", Body=data)["VersionId"]
            bodies[vid] = md5(data)
        for n in nodes:
            for vid, h in bodies.items():
                got = n.s3().get_object(Bucket="upg", Key="k", VersionId=vid)["Body"].read()
                assert md5(got) == h
        # n3 upgraded: every node reads if-kept now, and it is put in use.
        nodes[2].stop()
        nodes[2] = EtcdNode(datadir, "n3", etcd)
        start_all([nodes[2]])
        wait_for(lambda: status()["features_in_use"] == all_on, "if-kept in use")
        assert status()["features_waiting"] == {}
        assert any("event=member_features_in_use" in n.read_log() and "added=if-kept" in
                   n.read_log() for n in nodes)
        # Going back is refused: the data written since may need the feature.
        nodes[2].stop()
        refused_to_start(as_old(EtcdNode(datadir, "n3", etcd)))
        nodes[2] = EtcdNode(datadir, "n3", etcd)
        start_all([nodes[2]])
        for vid, h in bodies.items():
            got = nodes[2].s3().get_object(Bucket="upg", Key="k", VersionId=vid)["Body"].read()
            assert md5(got) == h
        # A node that finds a feature in use it lacks while it runs (a raise that read its
        # entry before it went back) is fenced: 503, never an answer from data it misreads.
        # n3's entry goes back first, as the old build's start writes it: a keeper round of
        # n1 or n2 between the delete and n3's start (a slow start under a sanitizer) would
        # otherwise read n3's entry as the new build left it, raise if-kept again, and n3
        # would refuse to start instead of being fenced (a CI run did).
        nodes[2].stop()
        etcd_kv(etcd, "put", "/warmlake/features/n3",
                json.dumps({"features": int(old, 16), "build": "warmlake old"}))
        etcd_kv(etcd, "deleterange", "/warmlake/features_in_use")
        nodes[2] = as_old(EtcdNode(datadir, "n3", etcd))
        start_all([nodes[2]])
        etcd_kv(etcd, "put", "/warmlake/features_in_use", json.dumps({"in_use": 31}))
        wait_for(lambda: "event=member_fenced node=n3" in nodes[2].read_log(), "n3's fence")
        assert "features this build lacks: if-kept" in nodes[2].read_log()
        assert status()["nodes"][2]["lacks"] == "if-kept"
        assert "LACKS features in use: if-kept" in admin(etcd, "status").stdout
        with pytest.raises(ClientError) as e:
            nodes[2].s3().get_object(Bucket="upg", Key="k")
        assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503
        assert md5(nodes[0].s3().get_object(Bucket="upg", Key="k")["Body"].read()) == \
            list(bodies.values())[-1]
    finally:
        stop_all(nodes)


def test_features_raised_only_by_the_current_map(datadir, etcd):
    """A node fenced because it left the map keeps the member list it had; its keeper
    still runs: it must not put in use a feature that a node of the map as etcd holds it
    lacks (a review's repro: it did, and the older node it let in was fenced for good)."""
    path, doc = write_map(datadir, ["n1", "n2", "n3", "n4", "n6"], sets=[
        {"ec": "4+2", "drives": ["n1/0", "n2/0", "n3/0", "n1/1", "n2/1", "n3/1"]}])
    assert admin(etcd, "cluster", "init", "--map", path).returncode == 0
    etcd_kv(etcd, "deleterange", "/warmlake/features_in_use")  # a cluster from before the keys
    old_on = "part-tags,closing-records,initiators,token-crc"

    def status():
        return json.loads(admin(etcd, "status", "--json").stdout)

    nodes = start_all([EtcdNode(datadir, n, etcd) for n in ("n1", "n2", "n3", "n4")])
    try:
        assert status()["features_in_use"] == "none"  # n6 never started: holds all back
        r = admin(etcd, "node", "remove", "--id", "n4")
        assert r.returncode == 0, r.stderr
        wait_for(lambda: "left the map" in nodes[3].read_log(), "n4 fenced")
        p5 = free_ports(2)
        r = admin(etcd, "node", "add", "--id", "n5", "--s3", "127.0.0.1:%d" % p5[0],
                  "--proto", "127.0.0.1:%d" % p5[1], "--drives", "1")
        assert r.returncode == 0, r.stderr
        n5 = EtcdNode(datadir, "n5", etcd)
        n5.env = lambda: dict(Node.env(n5), WARMLAKE_FEATURES_CLAIM="0x1e")
        nodes += start_all([n5, EtcdNode(datadir, "n6", etcd)])
        wait_for(lambda: status()["features_in_use"] != "none", "features in use")
        # A few keeper rounds of every node (n4's too; a round is a third of the lease, 3.3 s):
        # none raises if-kept, which n5, in the map, lacks. (Slower rounds could only let a
        # wrong raise go unseen here, never fail the test.)
        for _ in range(3):
            time.sleep(3.5)
            st = status()
            assert st["features_in_use"] == old_on, st
        assert st["features_waiting"] == {"if-kept": ["n5"]}, st
        assert "event=member_fenced node=n5" not in n5.read_log()
    finally:
        stop_all(nodes)


class CutProxy:
    """A TCP proxy on loopback to a port, that can be cut (every connection closed, new
    ones refused) and mended: etcd unreachable from the nodes behind it, as a network
    partition makes it, while it runs on (and expires their leases)."""

    def __init__(self, port):
        import threading
        self.port, self.to, self.open, self.conns = free_ports(1)[0], port, True, []
        self.lock = threading.Lock()
        self.stop = False
        self.ls = socket.socket()
        self.ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.ls.bind(("127.0.0.1", self.port))
        self.ls.listen(64)
        self.ls.settimeout(0.2)
        self.t = threading.Thread(target=self.accept, daemon=True)
        self.t.start()

    def accept(self):
        import threading
        while not self.stop:
            try:
                a, _ = self.ls.accept()
            except OSError:
                continue
            if not self.open:
                a.close()
                continue
            try:
                b = socket.create_connection(("127.0.0.1", self.to), timeout=2)
            except OSError:
                a.close()
                continue
            with self.lock:
                self.conns += [a, b]
            for x, y in ((a, b), (b, a)):
                threading.Thread(target=self.pump, args=(x, y), daemon=True).start()

    def pump(self, x, y):
        try:
            while True:
                d = x.recv(65536)
                if not d:
                    break
                y.sendall(d)
        except OSError:
            pass
        for z in (x, y):
            try:
                z.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self):
        self.open = False
        with self.lock:
            for c in self.conns:
                try:
                    c.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            self.conns = []

    def mend(self):
        self.open = True

    def close(self):
        self.stop = True
        self.cut()
        self.t.join(timeout=5)
        self.ls.close()


def test_etcd_back_after_the_leases_went(datadir, etcd):
    """etcd away from the nodes for longer than the leases (a partition): writes go on, on
    the last map, while etcd expires every node's lease. Each node registers again at
    its own next round; until then the others found its registration gone, took it as away
    and wrote around all of it: every PUT refused, cluster-wide, for a round (a probe: 162
    503s). A registration found gone right after this node's own lease went, or etcd came
    back, makes no peer away for a lease's time."""
    path, _ = write_map(datadir, ["n1", "n2", "n3"])
    assert admin(etcd, "cluster", "init", "--map", path).returncode == 0
    proxy = CutProxy(int(etcd.rsplit(":", 1)[1]))
    nodes = [EtcdNode(datadir, n, "http://127.0.0.1:%d" % proxy.port) for n in ("n1", "n2", "n3")]
    # Rounds of 2, 2.3 and 3 s: out of step. Each node's grace after etcd is back is its own
    # lease, 6 s at least: longer than the slowest peer's round and its registration's write
    # (with a 3 s lease beside a 3 s round, a loaded etcd could make n3 late for n1's grace).
    for n, ttl in zip(nodes, ("6", "7", "9")):
        n.extra += ["--lease-ttl", ttl]
    start_all(nodes)
    try:
        c = nodes[0].s3()
        c.create_bucket(Bucket="away")
        # A round of every node's keeper first (3 s at most): a peer is taken as away only
        # once seen registered. (Slower rounds could only hide the fault, not fail the test.)
        time.sleep(4)
        proxy.cut()
        try:
            for i in range(3):  # on the last map, etcd away
                c.put_object(Bucket="away", Key="during%d" % i, Body=body(3000, i))
            # Past every lease (9 s at most), which etcd expires meanwhile.
            wait_for(lambda: not json.loads(admin(etcd, "status", "--json").stdout)["nodes"][2][
                "alive"], "etcd to expire the leases", timeout=30)
        finally:
            proxy.mend()
        wait_for(lambda: all("event=member_lease_lost" in n.read_log() for n in nodes),
                 "every node to find its lease gone")
        # Every node registers again within a round; no PUT meanwhile or after is refused
        # for want of stores (default write quorum: five of six, so one peer away is enough).
        refused = 0
        deadline = time.time() + 6
        i = 0
        while time.time() < deadline and i < 600:
            try:
                nodes[i % 3].s3().put_object(Bucket="away", Key="after%d" % i,
                                             Body=body(3000, i))
            except ClientError:
                refused += 1
            i += 1
        assert refused == 0, refused
        assert not any("event=proto_peer_away" in n.read_log() for n in nodes)
    finally:
        stop_all(nodes)
        proxy.close()


def test_flaky_etcd_does_not_hide_a_frozen_peer(datadir, etcd):
    """Short etcd blips (each well within the lease: nobody's lease goes) must not hide a
    peer whose lease is gone for good: each "etcd back" restarted the away grace, so with a
    blip every couple of rounds the grace never ran out and n3 (frozen, lease gone) was
    never taken as away by n1 -- its calls then wait out the peer deadline."""
    path, _ = write_map(datadir, ["n1", "n2", "n3"])
    assert admin(etcd, "cluster", "init", "--map", path).returncode == 0
    proxy = CutProxy(int(etcd.rsplit(":", 1)[1]))
    n1 = EtcdNode(datadir, "n1", "http://127.0.0.1:%d" % proxy.port)
    n2, n3 = EtcdNode(datadir, "n2", etcd), EtcdNode(datadir, "n3", etcd)
    nodes = [n1, n2, n3]
    n1.extra += ["--lease-ttl", "3"]  # rounds of 1 s, a grace of 3 s
    n3.extra += ["--lease-ttl", "3"]
    start_all(nodes)
    try:
        time.sleep(4)  # every node seen registered once
        os.kill(n3.proc.pid, signal.SIGSTOP)  # its lease goes for good in 3 s
        deadline = time.time() + 60
        while time.time() < deadline and "event=proto_peer_away peer=n3" not in n1.read_log():
            down = n1.read_log().count("event=member_etcd_unreachable")
            back = n1.read_log().count("event=member_etcd_back")
            proxy.cut()  # a blip of about a round: n1's lease (3 s) stays
            wait_for(lambda: n1.read_log().count("event=member_etcd_unreachable") > down,
                     "n1 to miss etcd", timeout=30)
            proxy.mend()
            wait_for(lambda: n1.read_log().count("event=member_etcd_back") > back,
                     "n1 to reach etcd", timeout=30)
            time.sleep(1.5)  # a round or so with etcd answering, n3's registration gone
        # (A blip that a loaded machine stretched past n1's lease grants a grace of its own,
        # which ends too: n3 is still taken as away within the deadline.)
        assert "event=proto_peer_away peer=n3" in n1.read_log()
    finally:
        if n3.proc:
            os.kill(n3.proc.pid, signal.SIGCONT)
        stop_all(nodes)
        proxy.close()


def test_if_match_put_racing_delete_through_other_nodes(cluster):
    """An If-Match PUT and a DELETE of the same key through two other nodes at once, in an
    unversioned bucket. The PUT was written against the version the DELETE read; a DELETE
    that found it standing took itself for the earlier of the two and answered 204 while the
    PUT answered 200 and its body stayed: the compare-and-swap and the delete both won (a
    cluster probe: 3-11 rounds in 150, inline objects, and erasure-coded ones too). The
    DELETE now comes after such a write: an If-Match DELETE of the old ETag is 412, a plain
    one deletes the new version. Every node agrees on the outcome."""
    n1, n2, n3 = cluster
    clients = [n.s3() for n in cluster]
    clients[0].create_bucket(Bucket="casdel")
    bad, outcomes = [], {}
    for r in range(120):
        size = 1000 if r % 3 else 70_000  # inline, and erasure-coded
        key, base, new = "k%d" % r, body(size, r), body(size, 500_000 + r)
        etag = clients[0].put_object(Bucket="casdel", Key=key, Body=base)["ETag"]
        conditional = r % 2 == 0
        dh = {"If-Match": etag} if conditional else {}
        # The DELETE starts a little later, by a different amount each round: a PUT has
        # more to do before its heads go out, and the heads of both must meet.
        delay = (r * 7 % 24) / 1000

        def delete(dh=dh, key=key, delay=delay):
            time.sleep(delay)
            return signed_request(n3.port, "DELETE", "/casdel/" + key, headers=dh)[0]
        put, dele = race([
            lambda: signed_request(n2.port, "PUT", "/casdel/" + key, new,
                                   headers={"If-Match": etag})[0], delete])
        finals = finals_of(clients, "casdel", key)
        ok = len(finals) == 1 and put in (200, 404, 412, 503) and dele in (204, 412, 503)
        if 503 in (put, dele):
            pass  # in doubt (a client retries): only that every node says the same
        elif put == 200 and dele == 204:
            # Both won: only as PUT then DELETE, which leaves nothing (and a DELETE of the
            # old ETag after the PUT is refused).
            ok = ok and finals == {"NoSuchKey"} and not conditional
        elif put == 200:
            ok = ok and dele == 412 and conditional and finals == {md5(new)}
        else:  # the PUT refused (404 or 412): the DELETE came first and won
            ok = ok and dele == 204 and finals == {"NoSuchKey"}
        outcomes[(conditional, put, dele)] = outcomes.get((conditional, put, dele), 0) + 1
        if not ok:
            bad.append((r, conditional, put, dele, finals))
    assert not bad, (bad, outcomes)
