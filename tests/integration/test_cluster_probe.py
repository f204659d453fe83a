"""Cross-node races a probe of a 4-node cluster (3 drives each, 4+2 sets spanning the
nodes) found: requests that each node serves right alone, wrong when they go through
different nodes at once. Each test fails on the code before its fix."""
import os
import time

import pytest
from botocore.exceptions import ClientError

from conftest import Node, start_all, stop_all, write_map
from test_cluster import body, md5, race


@pytest.fixture
def four(datadir):
    ids = ["n1", "n2", "n3", "n4"]
    path, _ = write_map(datadir, ids, drives=3, ec="4+2")
    nodes = start_all([Node(datadir, i, path) for i in ids])
    yield nodes
    stop_all(nodes)


BUSY = ("SlowDown", "ServiceUnavailable")


def public(grants):
    return any(g["Grantee"].get("URI", "").endswith("/AllUsers") for g in grants)


def test_bucket_settings_set_at_once_through_different_nodes(four):
    """PutBucketVersioning, PutBucketTagging and PutBucketAcl through three nodes at once
    each rewrite the bucket record: every acknowledged setting must be there afterwards, on
    every node (S3: each is its own setting; none undoes another). The stores let one
    rewrite of a record cover another's (a rewrite may cover "a rewrite of the version it
    read"), so all but one were lost, acknowledged (most rounds)."""
    c = [n.s3() for n in four]
    c[0].create_bucket(Bucket="settings")
    for r in range(12):
        status = "Enabled" if r % 2 == 0 else "Suspended"
        acl = "public-read" if r % 2 == 0 else "private"
        out = race([
            lambda: c[0].put_bucket_versioning(Bucket="settings", VersioningConfiguration={
                "Status": status}) and "ok",
            lambda: c[1].put_bucket_tagging(Bucket="settings", Tagging={
                "TagSet": [{"Key": "round", "Value": str(r)}]}) and "ok",
            lambda: c[2].put_bucket_acl(Bucket="settings", ACL=acl) and "ok"])
        for i, cl in enumerate(c):
            if out[0] == "ok":
                got = cl.get_bucket_versioning(Bucket="settings").get("Status")
                assert got == status, (r, i, out, "versioning", got)
            if out[1] == "ok":
                got = cl.get_bucket_tagging(Bucket="settings")["TagSet"]
                assert got == [{"Key": "round", "Value": str(r)}], (r, i, out, "tags", got)
            if out[2] == "ok":
                got = public(cl.get_bucket_acl(Bucket="settings")["Grants"])
                assert got == (acl == "public-read"), (r, i, out, "acl", got)
        assert all(o == "ok" or o in BUSY for o in out), out


@pytest.mark.parametrize("size", [100, 300000])
def test_object_tags_and_acl_set_at_once_through_different_nodes(four, size):
    """PutObjectTagging and PutObjectAcl of one object through two nodes at once: both are
    kept (S3 keeps tags and ACL apart). One rewrite covered the other (most rounds), and
    the object's bytes must not change."""
    c = [n.s3() for n in four]
    c[0].create_bucket(Bucket="objmeta")
    data = body(size, 31)
    c[3].put_object(Bucket="objmeta", Key="k", Body=data)
    for r in range(12):
        acl = "public-read" if r % 2 == 0 else "private"
        out = race([
            lambda: c[1].put_object_tagging(Bucket="objmeta", Key="k", Tagging={
                "TagSet": [{"Key": "round", "Value": str(r)}]}) and "ok",
            lambda: c[2].put_object_acl(Bucket="objmeta", Key="k", ACL=acl) and "ok"])
        assert all(o == "ok" or o in BUSY for o in out), out
        for i, cl in enumerate(c):
            if out[0] == "ok":
                got = cl.get_object_tagging(Bucket="objmeta", Key="k")["TagSet"]
                assert got == [{"Key": "round", "Value": str(r)}], (r, i, out, "tags", got)
            if out[1] == "ok":
                got = public(cl.get_object_acl(Bucket="objmeta", Key="k")["Grants"])
                assert got == (acl == "public-read"), (r, i, out, "acl", got)
            assert md5(cl.get_object(Bucket="objmeta", Key="k")["Body"].read()) == md5(data)


@pytest.mark.parametrize("size", [100, 300000])
def test_delete_racing_tags_or_acl_through_another_node(four, size):
    """DELETE of an object (unversioned bucket) through one node while PutObjectTagging or
    PutObjectAcl goes through another: once the DELETE is acknowledged the key is gone on
    every node (S3: either the rewrite came first and the DELETE removed it, or it came
    after and answers NoSuchKey). An unversioned DELETE leaves no head, and a rewrite's
    condition ("nothing, or no newer than the version read") let it land on the emptied
    stores: the object came back, whole when small, and when erasure-coded a listed key
    whose every GET was 503 (its blocks dropped): most rounds."""
    c = [n.s3() for n in four]
    c[0].create_bucket(Bucket="delrace")
    for r in range(16):
        key = "k%d" % r
        c[0].put_object(Bucket="delrace", Key=key, Body=body(size, 50 + r))
        if r % 2:
            meta = lambda: c[2].put_object_acl(Bucket="delrace", Key=key, ACL="public-read") and "ok"
        else:
            meta = lambda: c[2].put_object_tagging(Bucket="delrace", Key=key, Tagging={
                "TagSet": [{"Key": "a", "Value": "b"}]}) and "ok"
        out = race([lambda: c[1].delete_object(Bucket="delrace", Key=key) and "ok", meta])
        assert out[1] in ("ok", "NoSuchKey") + BUSY, out
        if out[0] != "ok":
            continue
        for i, cl in enumerate(c):
            with pytest.raises(Exception) as e:
                cl.get_object(Bucket="delrace", Key=key)["Body"].read()
            assert getattr(e.value, "response", {}).get("Error", {}).get("Code") == "NoSuchKey", \
                (r, i, out, e.value)
            listed = cl.list_objects_v2(Bucket="delrace", Prefix=key).get("Contents", [])
            assert key not in [o["Key"] for o in listed], (r, i, out)


def test_delete_bucket_racing_bucket_tagging_through_another_node(four):
    """DeleteBucket through one node while PutBucketTagging goes through another: once the
    DeleteBucket is acknowledged the bucket is gone on every node. The tag rewrite of the
    bucket record landed on the emptied stores and brought the bucket back."""
    c = [n.s3() for n in four]
    for r in range(16):
        b = "gone%d" % r
        c[0].create_bucket(Bucket=b)
        out = race([lambda: c[1].delete_bucket(Bucket=b) and "ok",
                    lambda: c[2].put_bucket_tagging(Bucket=b, Tagging={
                        "TagSet": [{"Key": "a", "Value": "b"}]}) and "ok"])
        assert out[1] in ("ok", "NoSuchBucket") + BUSY, out
        if out[0] != "ok":
            continue
        for i, cl in enumerate(c):
            with pytest.raises(Exception) as e:
                cl.head_bucket(Bucket=b)
            assert getattr(e.value, "response", {}).get("Error", {}).get("Code") in (
                "404", "NoSuchBucket"), (r, i, out, e.value)


def test_create_multipart_upload_racing_delete_bucket(four):
    """CreateMultipartUpload through one node while DeleteBucket goes through another. An
    unfinished upload does not keep a bucket (as in S3): DeleteBucket aborts the uploads it
    lists. A create acknowledged before that listing is aborted with the bucket; one that
    comes after it sees the bucket's delete mark and undoes itself (NoSuchBucket). Either
    way no upload outlives its bucket. Once, the create was fenced by its own node's bucket
    lock only: both answered 200 (16 rounds in 60) and the upload's record was left in an
    incarnation nothing walks any more. Checked here: an upload id acknowledged beside a
    204 is dead (Complete and UploadPart say NoSuchUpload once the name is a bucket again,
    whose upload listing is empty), and the DeleteBucket is acknowledged every round."""
    c = [n.s3() for n in four]
    lingering = []
    for r in range(30):
        b = "mpudel%d" % r
        c[0].create_bucket(Bucket=b)
        delay = (r % 10) / 1000  # the create lands anywhere in the DeleteBucket's walk
        out = race([lambda: c[1].delete_bucket(Bucket=b) and "ok",
                    lambda: time.sleep(delay) or c[2].create_multipart_upload(
                        Bucket=b, Key="k")["UploadId"]])
        assert out[0] in ("ok",) + BUSY, out
        if out[0] != "ok":
            c[3].delete_bucket(Bucket=b)  # (busy: again)
        if out[1] in ("NoSuchBucket",) + BUSY:
            continue
        c[0].create_bucket(Bucket=b)
        assert c[3].list_multipart_uploads(Bucket=b).get("Uploads", []) == [], r
        for call in (lambda: c[1].upload_part(Bucket=b, Key="k", UploadId=out[1], PartNumber=1,
                                              Body=b"x"),
                     lambda: c[2].complete_multipart_upload(
                         Bucket=b, Key="k", UploadId=out[1],
                         MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": "0" * 32}]})):
            try:
                call()
                lingering.append((r, out))
            except ClientError as e:
                assert e.response["Error"]["Code"] == "NoSuchUpload", (r, e.response)
        c[0].delete_bucket(Bucket=b)
    assert not lingering, lingering


def test_delete_marker_racing_delete_bucket(four):
    """DELETE (a delete marker: versioning Enabled) through one node while DeleteBucket goes
    through another: not both acknowledged (a marker is a version: S3 refuses to delete a
    bucket that holds one). The marker was fenced by its own node's bucket lock only: both
    answered 204 (33 rounds in 40 with the DELETE 0-10 ms late), the marker left in an
    incarnation nothing walks."""
    c = [n.s3() for n in four]
    both = []
    for r in range(30):
        b = "mkdel%d" % r
        c[0].create_bucket(Bucket=b)
        c[0].put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Enabled"})
        delay = (r % 10) / 1000
        out = race([lambda: c[1].delete_bucket(Bucket=b) and "ok",
                    lambda: time.sleep(delay) or c[2].delete_object(Bucket=b, Key="k") and "ok"])
        assert out[0] in ("ok", "BucketNotEmpty") + BUSY, out
        assert out[1] in ("ok", "NoSuchBucket") + BUSY, out
        if out == ["ok", "ok"]:
            both.append(r)
        elif out[0] != "ok":
            for m in c[3].list_object_versions(Bucket=b).get("DeleteMarkers", []):
                c[3].delete_object(Bucket=b, Key=m["Key"], VersionId=m["VersionId"])
            c[3].delete_bucket(Bucket=b)
    assert not both, both


def test_put_racing_unversioned_delete_of_a_small_object(four):
    """PUT (overwrite) of a small object through one node while DELETE goes through another
    (unversioned bucket): afterwards the key is either the PUT's bytes, listed, on every node,
    or gone everywhere, and a plain PUT of it succeeds at once. Seen: the PUT's heads cut by
    the DELETE's removal round; GET returned the PUT's bytes while no listing showed the key
    (1 round in 30), and a follow-up PUT answered 503 SlowDown for 10 s (4 rounds in 40).
    The delete now removes only the version it read (a conditional delete at each store) and
    waits out a newer head in flight. WL_PROBE_ROUNDS: rounds (40)."""
    c = [n.s3() for n in four]
    c[0].create_bucket(Bucket="putdel")
    bad = []
    rounds = int(os.environ.get("WL_PROBE_ROUNDS", "40"))
    for r in range(rounds):
        key, old, new = "k%d" % r, body(100, 600 + r), body(100, 700 + r)
        c[0].put_object(Bucket="putdel", Key=key, Body=old)
        delay = (r % 8) / 2000
        out = race([lambda: c[1].put_object(Bucket="putdel", Key=key, Body=new) and "ok",
                    lambda: time.sleep(delay) or c[2].delete_object(Bucket="putdel", Key=key)
                    and "ok"])
        if out != ["ok", "ok"]:
            continue
        seen = set()
        for cl in c:
            try:
                got = md5(cl.get_object(Bucket="putdel", Key=key)["Body"].read())
            except Exception as e:  # NoSuchKey
                got = getattr(e, "response", {}).get("Error", {}).get("Code")
            listed = key in [o["Key"] for o in cl.list_objects_v2(
                Bucket="putdel", Prefix=key).get("Contents", [])]
            seen.add((got, listed))
        if seen not in ({(md5(new), True)}, {("NoSuchKey", False)}):
            bad.append((r, "state", seen))
        try:
            c[3].put_object(Bucket="putdel", Key=key, Body=b"after")
        except Exception as e:
            bad.append((r, "follow-up PUT", str(e)[:80]))
    assert not bad, (len(bad), rounds, bad)
