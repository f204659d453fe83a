"""Several erasure sets as one namespace (server/obj_multi.c): a single node
with twelve drives (two 4+2 sets) and a cluster of three nodes with four
drives each (two sets, each spanning all three nodes). Every object lands
on one set; listings, versions and uploads merge over the sets; a node
killed with SIGKILL costs each set two shards (m) and no acknowledged
object; a data directory refuses a restart with another layout."""
import hashlib
import json
import os
import signal
import subprocess
from types import SimpleNamespace

import pytest

from conftest import WARMLAKED, Server, s3_client, stop_all
from test_cluster import Node, free_ports, node_stats, start_all


def body(n, seed):
    out, x = bytearray(), seed * 2654435761 + 1
    while len(out) < n:
        x = (x * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        out += x.to_bytes(8, "little")
    return bytes(out[:n])


def md5(b):
    return hashlib.md5(b).hexdigest()


def drive_bytes(port):
    """Bytes each store of the node's sets took (every set's stores, remote ones too)."""
    return [d["host_bytes"] for d in node_stats(SimpleNamespace(port=port))["drives"]]


def listing(c, bucket, page, **kw):
    keys, prefixes, token = [], [], None
    while True:
        args = dict(Bucket=bucket, MaxKeys=page, **kw)
        if token:
            args["ContinuationToken"] = token
        r = c.list_objects_v2(**args)
        keys += [o["Key"] for o in r.get("Contents", [])]
        prefixes += [p["Prefix"] for p in r.get("CommonPrefixes", [])]
        if not r["IsTruncated"]:
            return keys, prefixes
        token = r["NextContinuationToken"]


def version_listing(c, bucket, page):
    out, km, vm = [], None, None
    while True:
        args = dict(Bucket=bucket, MaxKeys=page)
        if km is not None:
            args.update(KeyMarker=km, VersionIdMarker=vm)
        r = c.list_object_versions(**args)
        entries = [(v["Key"], v["VersionId"], v["IsLatest"]) for v in r.get("Versions", [])]
        entries += [(m["Key"], m["VersionId"], m["IsLatest"]) for m in r.get("DeleteMarkers", [])]
        out += entries
        if not r["IsTruncated"]:
            return out
        km, vm = r["NextKeyMarker"], r["NextVersionIdMarker"]


def exercise(nodes, bucket):
    """Objects of every kind through the nodes in turn, read back by hash through each,
    listed whole in pages; returns {key: md5}."""
    cs = [s3_client(n.endpoint) for n in nodes]
    cs[0].create_bucket(Bucket=bucket)
    want = {}
    for i in range(60):
        size = (10, 3000, 70000, 400000)[i % 4]
        data = body(size, i)
        key = "o/%03d" % i if i % 3 else "p%d/x%03d" % (i % 2, i)
        cs[i % len(cs)].put_object(Bucket=bucket, Key=key, Body=data)
        want[key] = md5(data)
    # A multipart upload (its parts live with its key's set) and one left open.
    big = body(12 << 20, 99)
    up = cs[-1].create_multipart_upload(Bucket=bucket, Key="mp/big")
    parts = []
    for n, off in enumerate(range(0, len(big), 5 << 20), 1):
        r = cs[0].upload_part(Bucket=bucket, Key="mp/big", UploadId=up["UploadId"], PartNumber=n,
                              Body=big[off:off + (5 << 20)])
        parts.append({"PartNumber": n, "ETag": r["ETag"]})
    cs[-1].complete_multipart_upload(Bucket=bucket, Key="mp/big", UploadId=up["UploadId"],
                                     MultipartUpload={"Parts": parts})
    want["mp/big"] = md5(big)
    opened = [cs[0].create_multipart_upload(Bucket=bucket, Key="open/%d" % i)["UploadId"]
              for i in range(5)]
    ups = cs[-1].list_multipart_uploads(Bucket=bucket).get("Uploads", [])
    assert sorted(u["Key"] for u in ups) == ["open/%d" % i for i in range(5)]
    for i, u in enumerate(opened):
        cs[1 % len(cs)].abort_multipart_upload(Bucket=bucket, Key="open/%d" % i, UploadId=u)
    for c in cs:
        for key, h in want.items():
            assert md5(c.get_object(Bucket=bucket, Key=key)["Body"].read()) == h, key
        keys, _ = listing(c, bucket, 7)
        assert keys == sorted(want)
        keys, prefixes = listing(c, bucket, 3, Delimiter="/")
        assert keys == [] and prefixes == ["mp/", "o/", "p0/", "p1/"]
        keys, prefixes = listing(c, bucket, 5, Prefix="p1/", Delimiter="/")
        assert keys == sorted(k for k in want if k.startswith("p1/")) and prefixes == []
    return want


def test_one_node_two_sets(datadir):
    srv = Server(datadir, drives=12).start()
    try:
        c = s3_client(srv.endpoint)
        want = exercise([srv], "twosets")
        # Both sets took data: drives 0-5 and 6-11 alike.
        written = drive_bytes(srv.port)
        assert len(written) == 12
        assert sum(written[:6]) > 1 << 20 and sum(written[6:]) > 1 << 20, written
        # Versions, listed in pages across the sets: each key newest first, resumable mid-key.
        c.create_bucket(Bucket="vers")
        c.put_bucket_versioning(Bucket="vers", VersioningConfiguration={"Status": "Enabled"})
        made = {}
        for v in range(3):
            for i in range(12):
                r = c.put_object(Bucket="vers", Key="k%02d" % i, Body=body(100 + v, i * 10 + v))
                made.setdefault("k%02d" % i, []).append(r["VersionId"])
        c.delete_object(Bucket="vers", Key="k03")
        whole = version_listing(c, "vers", 1000)
        assert len(whole) == 37
        assert [e for e in whole if e[2]] and len([e for e in whole if e[2]]) == 12
        for page in (1, 4):  # (a page's delete markers come after its versions)
            paged = version_listing(c, "vers", page)
            assert len(paged) == len(whole) and sorted(paged) == sorted(whole)
        for k, vids in made.items():
            got = [e[1] for e in whole if e[0] == k and e[1] in vids]
            assert got == vids[::-1], (k, got, vids)  # newest first
        # A restart keeps the layout and finds everything.
        srv.stop()
        srv.start()
        c = s3_client(srv.endpoint)
        for key, h in want.items():
            assert md5(c.get_object(Bucket="twosets", Key=key)["Body"].read()) == h, key
        assert listing(c, "twosets", 1000)[0] == sorted(want)
        # Deleted everywhere it lives; the bucket then goes.
        for key in want:
            c.delete_object(Bucket="twosets", Key=key)
        assert listing(c, "twosets", 1000)[0] == []
        c.delete_bucket(Bucket="twosets")
    finally:
        srv.stop()
    # Another drive count would look for keys on other sets: refused, the data untouched.
    r = subprocess.run([WARMLAKED, "--listen", "127.0.0.1:0", "--data", datadir, "--drives", "6",
                        "--ec", "4+2", "--drive-capacity", "2G", "--segment-size", "64M"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "laid out" in r.stderr, r.stderr  # a bad setting: 2


def test_layout_of_older_data_dir_is_one_set(datadir):
    """A data directory made before layouts were recorded held one set."""
    srv = Server(datadir, drives=6).start()
    try:
        s3_client(srv.endpoint).create_bucket(Bucket="old")
    finally:
        srv.stop()
    os.remove(os.path.join(datadir, "layout"))
    r = subprocess.run([WARMLAKED, "--listen", "127.0.0.1:0", "--data", datadir, "--drives", "12",
                        "--ec", "4+2", "--drive-capacity", "2G", "--segment-size", "64M"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "sets 1" in r.stderr, r.stderr
    srv = Server(datadir, drives=6).start()
    try:
        assert s3_client(srv.endpoint).head_bucket(Bucket="old")
    finally:
        srv.stop()


def test_empty_drive_dirs_are_no_older_data(datadir):
    """Drive directories made before the first start (disks mounted at DATA/driveN, or a
    deploy script's mkdir) hold nothing: any layout starts on them."""
    fresh = os.path.join(datadir, "fresh")
    for i in range(12):
        os.makedirs(os.path.join(fresh, "drive%d" % i))
    srv = Server(fresh, drives=12).start()
    try:
        c = s3_client(srv.endpoint)
        c.create_bucket(Bucket="mounted")
        c.put_object(Bucket="mounted", Key="k", Body=b"x" * 1000)
        assert c.get_object(Bucket="mounted", Key="k")["Body"].read() == b"x" * 1000
    finally:
        srv.stop()
    with open(os.path.join(fresh, "layout")) as f:
        assert f.read().startswith("sets 2")


def test_cluster_two_sets(datadir):
    """Three nodes of four drives, "ec": "4+2": two sets, each with two drives on every
    node. A node killed with SIGKILL takes two shards of each set: nothing acknowledged
    is lost, and the others keep serving reads and listings."""
    ports = free_ports(6)
    names = ["n1", "n2", "n3"]
    doc = {"cluster": "sets", "epoch": 1, "ec": "4+2", "nodes": [
        {"id": n, "s3": "127.0.0.1:%d" % ports[2 * i], "proto": "127.0.0.1:%d" % ports[2 * i + 1],
         "drives": 4} for i, n in enumerate(names)]}
    path = os.path.join(datadir, "map.json")
    with open(path, "w") as f:
        json.dump(doc, f)
    nodes = start_all([Node(datadir, n, path, extra=["--write-quorum", "4"]) for n in names])
    try:
        want = exercise(nodes, "spread")
        written = drive_bytes(nodes[0].port)  # both sets, every node's drives: all took data
        assert len(written) == 12 and all(b > 0 for b in written), written
        nodes[2].stop(signal.SIGKILL)
        for c in (s3_client(nodes[0].endpoint), s3_client(nodes[1].endpoint)):
            for key, h in want.items():
                assert md5(c.get_object(Bucket="spread", Key=key)["Body"].read()) == h, key
            assert listing(c, "spread", 9)[0] == sorted(want)
        # Writes go on (quorum k) on both sets, and read back.
        c = s3_client(nodes[1].endpoint)
        for i in range(10):
            data = body(5000 + i, 500 + i)
            c.put_object(Bucket="spread", Key="after/%d" % i, Body=data)
            assert md5(s3_client(nodes[0].endpoint).get_object(
                Bucket="spread", Key="after/%d" % i)["Body"].read()) == md5(data)
        # A map whose sets differ (another coding cuts other sets) is refused at a restart:
        # the data directory remembers the sets it was written under.
        nodes[0].stop()
        doc["ec"] = "2+1"
        with open(path, "w") as f:
            json.dump(doc, f)
        nodes[0].launch()
        assert nodes[0].proc.wait(timeout=60) != 0
        assert "laid out" in nodes[0].read_log(), nodes[0].read_log()
    finally:
        stop_all(nodes)


def test_map_sets_must_share_coding(datadir):
    ports = free_ports(4)
    doc = {"cluster": "mixed", "epoch": 1, "nodes": [
        {"id": "a", "s3": "127.0.0.1:%d" % ports[0], "proto": "127.0.0.1:%d" % ports[1],
         "drives": 5}],
        "sets": [{"ec": "2+1", "drives": ["a/0", "a/1", "a/2"]},
                 {"ec": "1+1", "drives": ["a/3", "a/4"]}]}
    path = os.path.join(datadir, "map.json")
    with open(path, "w") as f:
        json.dump(doc, f)
    n = Node(datadir, "a", path)
    n.launch()
    try:
        assert n.proc.wait(timeout=60) != 0
        assert "one coding" in n.read_log()
    finally:
        n.stop()


@pytest.mark.parametrize("drives", [7, 9])
def test_drives_not_a_multiple(datadir, drives):
    r = subprocess.run([WARMLAKED, "--listen", "127.0.0.1:0", "--data", datadir, "--drives",
                        str(drives), "--ec", "4+2"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "multiple" in r.stderr, r.stderr
    with pytest.raises(FileNotFoundError):
        os.stat(os.path.join(datadir, "drive0"))
