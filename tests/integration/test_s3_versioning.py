"""Bucket versioning: Put/GetBucketVersioning, version ids from PUT, Copy and
Complete, GET/HEAD/DELETE ?versionId, delete markers, the null version's
overwrite rules when Suspended, ListObjectVersions (markers, delimiters),
DeleteObjects with version ids, CopyObject from a version, tags per
version, space freed when a version goes. Debian's boto3, the newest
botocore (test_with_newest_botocore) and the aws CLI's s3api."""
import hashlib
import json
import os
import time

import pytest
from botocore.exceptions import ClientError

from conftest import run_under_newest_botocore, s3_client, signed_request
from test_s3_gateway import aws


def code(e):
    return e.value.response["Error"]["Code"]


def status(e):
    return e.value.response["ResponseMetadata"]["HTTPStatusCode"]


def md5(b):
    return hashlib.md5(b).hexdigest()


def versioned(c, name, state="Enabled"):
    c.create_bucket(Bucket=name)
    c.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": state})


def versions(c, bucket, **kw):
    r = c.list_object_versions(Bucket=bucket, **kw)
    return ([(v["Key"], v["VersionId"], v["IsLatest"]) for v in r.get("Versions", [])],
            [(d["Key"], d["VersionId"], d["IsLatest"]) for d in r.get("DeleteMarkers", [])])


def test_versioning_status(server):
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="vstat")
    assert "Status" not in c.get_bucket_versioning(Bucket="vstat")
    c.put_bucket_versioning(Bucket="vstat", VersioningConfiguration={"Status": "Enabled"})
    assert c.get_bucket_versioning(Bucket="vstat")["Status"] == "Enabled"
    c.put_bucket_versioning(Bucket="vstat", VersioningConfiguration={"Status": "Suspended"})
    assert c.get_bucket_versioning(Bucket="vstat")["Status"] == "Suspended"
    # Anything but S3's two values is malformed; a config without Status changes nothing.
    for body in (b"<VersioningConfiguration><Status>On</Status></VersioningConfiguration>",
                 b"<VersioningConfiguration><Status>Enabled</Status>"):
        st, data, _ = signed_request(server.port, "PUT", "/vstat?versioning", body)
        assert st == 400 and b"MalformedXML" in data
    st, _, _ = signed_request(server.port, "PUT", "/vstat?versioning",
                              b"<VersioningConfiguration/>")
    assert st == 200
    assert c.get_bucket_versioning(Bucket="vstat")["Status"] == "Suspended"


def test_versions_kept_and_read_by_id(server):
    c = s3_client(server.endpoint)
    versioned(c, "vkeep")
    bodies = [os.urandom(n) for n in (100, 70000, 3 << 20)]
    ids = []
    for b in bodies:
        r = c.put_object(Bucket="vkeep", Key="k", Body=b)
        assert r["VersionId"] and r["VersionId"] != "null"
        ids.append(r["VersionId"])
    assert len(set(ids)) == 3
    # The newest is current; each version reads back whole by its id.
    assert md5(c.get_object(Bucket="vkeep", Key="k")["Body"].read()) == md5(bodies[-1])
    for vid, b in zip(ids, bodies):
        r = c.get_object(Bucket="vkeep", Key="k", VersionId=vid)
        assert r["VersionId"] == vid and md5(r["Body"].read()) == md5(b)
        h = c.head_object(Bucket="vkeep", Key="k", VersionId=vid)
        assert h["ContentLength"] == len(b) and h["VersionId"] == vid
        r = c.get_object(Bucket="vkeep", Key="k", VersionId=vid, Range="bytes=10-19")
        assert r["Body"].read() == b[10:20]
    # Newest first, the current one latest.
    vs, dms = versions(c, "vkeep")
    assert vs == [("k", ids[2], True), ("k", ids[1], False), ("k", ids[0], False)] and not dms
    # Unknown and malformed ids.
    with pytest.raises(ClientError) as e:
        c.get_object(Bucket="vkeep", Key="k", VersionId="0" * 16)
    assert code(e) == "NoSuchVersion"
    with pytest.raises(ClientError) as e:
        c.get_object(Bucket="vkeep", Key="k", VersionId="not-a-version")
    assert status(e) == 400
    with pytest.raises(ClientError) as e:
        c.get_object(Bucket="vkeep", Key="k", VersionId="null")
    assert code(e) == "NoSuchVersion"


def test_delete_markers(server):
    c = s3_client(server.endpoint)
    versioned(c, "vdel")
    v1 = c.put_object(Bucket="vdel", Key="k", Body=b"one")["VersionId"]
    r = c.delete_object(Bucket="vdel", Key="k")
    assert r["DeleteMarker"] is True
    marker = r["VersionId"]
    assert marker and marker != v1
    # The key is gone for plain reads and listings; its data is still there by id.
    with pytest.raises(ClientError) as e:
        c.get_object(Bucket="vdel", Key="k")
    assert code(e) == "NoSuchKey"
    hdrs = e.value.response["ResponseMetadata"]["HTTPHeaders"]
    assert hdrs["x-amz-delete-marker"] == "true" and hdrs["x-amz-version-id"] == marker
    with pytest.raises(ClientError) as e:
        c.head_object(Bucket="vdel", Key="k", VersionId=marker)
    assert status(e) == 405
    assert c.list_objects_v2(Bucket="vdel")["KeyCount"] == 0
    assert c.get_object(Bucket="vdel", Key="k", VersionId=v1)["Body"].read() == b"one"
    vs, dms = versions(c, "vdel")
    assert vs == [("k", v1, False)] and dms == [("k", marker, True)]
    # Deleting the marker by id brings the version back.
    r = c.delete_object(Bucket="vdel", Key="k", VersionId=marker)
    assert r["DeleteMarker"] is True and r["VersionId"] == marker
    assert c.get_object(Bucket="vdel", Key="k")["Body"].read() == b"one"
    assert versions(c, "vdel") == ([("k", v1, True)], [])
    # A delete of a key that never was still makes a marker (S3 does).
    r = c.delete_object(Bucket="vdel", Key="never")
    assert r["DeleteMarker"] is True
    assert versions(c, "vdel")[1] == [("never", r["VersionId"], True)]


def test_delete_current_version_promotes_previous(server):
    c = s3_client(server.endpoint)
    versioned(c, "vprom")
    ids = [c.put_object(Bucket="vprom", Key="k", Body=b"v%d" % i)["VersionId"] for i in range(3)]
    c.delete_object(Bucket="vprom", Key="k", VersionId=ids[2])
    assert c.get_object(Bucket="vprom", Key="k")["Body"].read() == b"v1"
    c.delete_object(Bucket="vprom", Key="k", VersionId=ids[0])  # a noncurrent one
    assert versions(c, "vprom") == ([("k", ids[1], True)], [])
    c.delete_object(Bucket="vprom", Key="k", VersionId=ids[1])
    with pytest.raises(ClientError) as e:
        c.get_object(Bucket="vprom", Key="k")
    assert code(e) == "NoSuchKey"
    assert versions(c, "vprom") == ([], [])
    # Deleting a version that is not there is done already.
    r = c.delete_object(Bucket="vprom", Key="k", VersionId=ids[1])
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 204
    # With nothing left, the bucket can go.
    c.delete_bucket(Bucket="vprom")


def test_null_version_rules(server):
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="vnull")
    # Before versioning: the object is the null version.
    c.put_object(Bucket="vnull", Key="k", Body=b"before")
    assert "VersionId" not in c.put_object(Bucket="vnull", Key="plain", Body=b"p")
    c.put_bucket_versioning(Bucket="vnull", VersioningConfiguration={"Status": "Enabled"})
    assert c.head_object(Bucket="vnull", Key="k")["VersionId"] == "null"
    v1 = c.put_object(Bucket="vnull", Key="k", Body=b"enabled")["VersionId"]
    assert c.get_object(Bucket="vnull", Key="k", VersionId="null")["Body"].read() == b"before"
    # Suspended: a PUT makes the null version, replacing the old null one, keeping v1.
    c.put_bucket_versioning(Bucket="vnull", VersioningConfiguration={"Status": "Suspended"})
    assert "VersionId" not in c.put_object(Bucket="vnull", Key="k", Body=b"suspended")
    assert c.get_object(Bucket="vnull", Key="k")["Body"].read() == b"suspended"
    assert c.get_object(Bucket="vnull", Key="k", VersionId="null")["Body"].read() == b"suspended"
    assert c.get_object(Bucket="vnull", Key="k", VersionId=v1)["Body"].read() == b"enabled"
    vs, _ = versions(c, "vnull", Prefix="k")
    assert vs == [("k", "null", True), ("k", v1, False)]
    # Again: still one null version.
    c.put_object(Bucket="vnull", Key="k", Body=b"suspended2")
    vs, _ = versions(c, "vnull", Prefix="k")
    assert vs == [("k", "null", True), ("k", v1, False)]
    # A delete while Suspended: a null delete marker replaces the null version.
    r = c.delete_object(Bucket="vnull", Key="k")
    assert r["DeleteMarker"] is True and r["VersionId"] == "null"
    vs, dms = versions(c, "vnull", Prefix="k")
    assert vs == [("k", v1, False)] and dms == [("k", "null", True)]
    # Enabled again: a new version on top; the null marker stays as noncurrent.
    c.put_bucket_versioning(Bucket="vnull", VersioningConfiguration={"Status": "Enabled"})
    v3 = c.put_object(Bucket="vnull", Key="k", Body=b"again")["VersionId"]
    vs, dms = versions(c, "vnull", Prefix="k")
    assert vs == [("k", v3, True), ("k", v1, False)] and dms == [("k", "null", False)]
    c.delete_object(Bucket="vnull", Key="k", VersionId="null")
    assert versions(c, "vnull", Prefix="k")[1] == []


def test_list_versions_pagination_and_delimiter(server):
    c = s3_client(server.endpoint)
    versioned(c, "vlist")
    keys = ["a", "b/1", "b/2", "c", "d/x/y"]
    expect = []
    for k in keys:
        ids = [c.put_object(Bucket="vlist", Key=k, Body=k.encode() * (i + 1))["VersionId"]
               for i in range(3)]
        expect += [(k, v) for v in reversed(ids)]
    c.delete_object(Bucket="vlist", Key="c")
    # Pages of every size return everything once, in order, markers round-tripping.
    full = []
    r = c.list_object_versions(Bucket="vlist")
    for v in r["Versions"] + r["DeleteMarkers"]:
        full.append((v["Key"], v["VersionId"]))
    assert sorted(full) == sorted(expect + [("c", versions(c, "vlist")[1][0][1])])
    for page in (1, 2, 3, 4, 7):
        got, km, vm = [], None, None
        for _ in range(100):
            kw = {"MaxKeys": page}
            if km:
                kw["KeyMarker"] = km
                if vm:
                    kw["VersionIdMarker"] = vm
            r = c.list_object_versions(Bucket="vlist", **kw)
            entries = r.get("Versions", []) + r.get("DeleteMarkers", [])
            assert len(entries) <= page
            got += [(v["Key"], v["VersionId"]) for v in entries]
            if not r["IsTruncated"]:
                break
            km, vm = r["NextKeyMarker"], r.get("NextVersionIdMarker")
        assert sorted(got) == sorted(full) and len(got) == len(full), page
    # Delimiter: folders become common prefixes, counted once.
    r = c.list_object_versions(Bucket="vlist", Delimiter="/")
    assert [p["Prefix"] for p in r["CommonPrefixes"]] == ["b/", "d/"]
    assert {v["Key"] for v in r["Versions"]} == {"a", "c"}
    r = c.list_object_versions(Bucket="vlist", Delimiter="/", Prefix="b/")
    assert len(r["Versions"]) == 6 and "CommonPrefixes" not in r
    r = c.list_object_versions(Bucket="vlist", Delimiter="/", MaxKeys=4)
    assert r["IsTruncated"] and r["NextKeyMarker"] == "b/"
    r = c.list_object_versions(Bucket="vlist", Delimiter="/", KeyMarker="b/")
    assert r["Versions"][0]["Key"] == "c" and [p["Prefix"] for p in r["CommonPrefixes"]] == ["d/"]
    with pytest.raises(ClientError) as e:
        c.list_object_versions(Bucket="vlist", VersionIdMarker="null")
    assert code(e) == "InvalidArgument"
    # Plain listings see current objects only.
    assert [o["Key"] for o in c.list_objects_v2(Bucket="vlist")["Contents"]] == [
        "a", "b/1", "b/2", "d/x/y"]


def test_delete_objects_with_versions(server):
    c = s3_client(server.endpoint)
    versioned(c, "vmulti")
    a1 = c.put_object(Bucket="vmulti", Key="a", Body=b"a1")["VersionId"]
    a2 = c.put_object(Bucket="vmulti", Key="a", Body=b"a2")["VersionId"]
    c.put_object(Bucket="vmulti", Key="b", Body=b"b")
    r = c.delete_objects(Bucket="vmulti", Delete={"Objects": [
        {"Key": "a", "VersionId": a1}, {"Key": "b"}, {"Key": "a", "VersionId": "bad id"}]})
    deleted = {(d["Key"], d.get("VersionId")): d for d in r["Deleted"]}
    assert deleted[("a", a1)].get("DeleteMarker") is None
    assert deleted[("b", None)]["DeleteMarker"] is True
    assert deleted[("b", None)]["DeleteMarkerVersionId"]
    assert [e["Key"] for e in r["Errors"]] == ["a"]
    vs, dms = versions(c, "vmulti")
    assert ("a", a2, True) in vs and ("a", a1, False) not in vs
    assert [d[0] for d in dms] == ["b"]
    # Removing the marker by id through DeleteObjects reports it as one.
    marker = dms[0][1]
    r = c.delete_objects(Bucket="vmulti",
                         Delete={"Objects": [{"Key": "b", "VersionId": marker}]})
    assert r["Deleted"][0]["DeleteMarker"] is True
    assert c.get_object(Bucket="vmulti", Key="b")["Body"].read() == b"b"


def test_copy_and_multipart_versions(server):
    c = s3_client(server.endpoint)
    versioned(c, "vcopy")
    v1 = c.put_object(Bucket="vcopy", Key="src", Body=b"first")["VersionId"]
    c.put_object(Bucket="vcopy", Key="src", Body=b"second")
    # Copy an old version: to another key, and over the same key (a restore).
    r = c.copy_object(Bucket="vcopy", Key="dst", CopySource={"Bucket": "vcopy", "Key": "src",
                                                              "VersionId": v1})
    assert r["CopySourceVersionId"] == v1 and r["VersionId"]
    assert c.get_object(Bucket="vcopy", Key="dst")["Body"].read() == b"first"
    r = c.copy_object(Bucket="vcopy", Key="src", CopySource={"Bucket": "vcopy", "Key": "src",
                                                              "VersionId": v1})
    assert c.get_object(Bucket="vcopy", Key="src")["Body"].read() == b"first"
    assert len(versions(c, "vcopy", Prefix="src")[0]) == 3
    marker = c.delete_object(Bucket="vcopy", Key="dst")["VersionId"]
    with pytest.raises(ClientError) as e:
        c.copy_object(Bucket="vcopy", Key="x", CopySource={"Bucket": "vcopy", "Key": "dst",
                                                            "VersionId": marker})
    assert status(e) == 400
    with pytest.raises(ClientError) as e:
        c.copy_object(Bucket="vcopy", Key="x", CopySource={"Bucket": "vcopy", "Key": "dst"})
    assert code(e) == "NoSuchKey"
    # Multipart uploads make versions too.
    part = os.urandom(5 << 20)
    u = c.create_multipart_upload(Bucket="vcopy", Key="mp")["UploadId"]
    e1 = c.upload_part(Bucket="vcopy", Key="mp", UploadId=u, PartNumber=1, Body=part)["ETag"]
    e2 = c.upload_part(Bucket="vcopy", Key="mp", UploadId=u, PartNumber=2, Body=b"tail")["ETag"]
    r = c.complete_multipart_upload(Bucket="vcopy", Key="mp", UploadId=u, MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": e1}, {"PartNumber": 2, "ETag": e2}]})
    mpv = r["VersionId"]
    c.put_object(Bucket="vcopy", Key="mp", Body=b"small")
    got = c.get_object(Bucket="vcopy", Key="mp", VersionId=mpv)["Body"].read()
    assert md5(got) == md5(part + b"tail")


def test_tags_per_version(server):
    c = s3_client(server.endpoint)
    versioned(c, "vtags")
    v1 = c.put_object(Bucket="vtags", Key="k", Body=b"1", Tagging="gen=1")["VersionId"]
    v2 = c.put_object(Bucket="vtags", Key="k", Body=b"2", Tagging="gen=2")["VersionId"]
    r = c.put_object_tagging(Bucket="vtags", Key="k", VersionId=v1,
                             Tagging={"TagSet": [{"Key": "gen", "Value": "old"}]})
    assert r["VersionId"] == v1  # the version whose tags these are, as S3 answers
    assert c.get_object_tagging(Bucket="vtags", Key="k", VersionId=v1)["TagSet"] == [
        {"Key": "gen", "Value": "old"}]
    r = c.get_object_tagging(Bucket="vtags", Key="k")
    assert r["TagSet"] == [{"Key": "gen", "Value": "2"}] and r["VersionId"] == v2
    # Retagging keeps the version's data, date and place.
    assert c.get_object(Bucket="vtags", Key="k", VersionId=v1)["Body"].read() == b"1"
    assert versions(c, "vtags")[0] == [("k", v2, True), ("k", v1, False)]
    with pytest.raises(ClientError) as e:
        c.get_object_tagging(Bucket="vtags", Key="k", VersionId="0" * 16)
    assert code(e) == "NoSuchVersion"


def stats(server):
    st, body, _ = signed_request(server.port, "GET", "/_warmlake/stats")
    assert st == 200
    return json.loads(body)["total"]


def test_deleting_versions_frees_space(server):
    c = s3_client(server.endpoint)
    versioned(c, "vspace")
    base = stats(server)["live_bytes"]
    ids = [c.put_object(Bucket="vspace", Key="big", Body=os.urandom(4 << 20))["VersionId"]
           for _ in range(3)]
    held = stats(server)["live_bytes"] - base
    assert held >= 3 * (4 << 20)  # every version kept (plus parity)
    for v in ids:
        c.delete_object(Bucket="vspace", Key="big", VersionId=v)
    deadline = time.time() + 30
    while stats(server)["live_bytes"] - base > (1 << 20) and time.time() < deadline:
        time.sleep(0.2)
    assert stats(server)["live_bytes"] - base <= (1 << 20)


def test_versions_survive_restart(server):
    c = s3_client(server.endpoint)
    versioned(c, "vrest")
    ids = [c.put_object(Bucket="vrest", Key="k", Body=b"r%d" % i)["VersionId"] for i in range(3)]
    marker = c.delete_object(Bucket="vrest", Key="k")["VersionId"]
    server.kill9()
    server.start()
    c = s3_client(server.endpoint)
    vs, dms = versions(c, "vrest")
    assert vs == [("k", ids[2], False), ("k", ids[1], False), ("k", ids[0], False)]
    assert dms == [("k", marker, True)]
    for i, v in enumerate(ids):
        assert c.get_object(Bucket="vrest", Key="k", VersionId=v)["Body"].read() == b"r%d" % i


def test_aws_cli_versioning(server, datadir):
    assert aws(server, datadir, "s3api", "create-bucket", "--bucket", "cliver").returncode == 0
    r = aws(server, datadir, "s3api", "put-bucket-versioning", "--bucket", "cliver",
            "--versioning-configuration", "Status=Enabled")
    assert r.returncode == 0, r.stderr
    r = aws(server, datadir, "s3api", "get-bucket-versioning", "--bucket", "cliver")
    assert r.returncode == 0 and json.loads(r.stdout)["Status"] == "Enabled"
    body = os.path.join(datadir, "b")
    ids = []
    for content in (b"one", b"two"):
        with open(body, "wb") as f:
            f.write(content)
        r = aws(server, datadir, "s3api", "put-object", "--bucket", "cliver", "--key", "k",
                "--body", body)
        assert r.returncode == 0, r.stderr
        ids.append(json.loads(r.stdout)["VersionId"])
    r = aws(server, datadir, "s3api", "list-object-versions", "--bucket", "cliver")
    assert r.returncode == 0, r.stderr
    assert [v["VersionId"] for v in json.loads(r.stdout)["Versions"]] == ids[::-1]
    out = os.path.join(datadir, "out")
    r = aws(server, datadir, "s3api", "get-object", "--bucket", "cliver", "--key", "k",
            "--version-id", ids[0], out)
    assert r.returncode == 0, r.stderr
    with open(out, "rb") as f:
        assert f.read() == b"one"
    r = aws(server, datadir, "s3api", "delete-object", "--bucket", "cliver", "--key", "k",
            "--version-id", ids[1])
    assert r.returncode == 0, r.stderr


def test_paging_survives_the_marker_version_going(server):
    """The usual way to empty a versioned bucket deletes each page before asking for the
    next: the version named by the marker is gone by then."""
    c = s3_client(server.endpoint)
    versioned(c, "vpage")
    ids = [c.put_object(Bucket="vpage", Key="k", Body=b"%d" % i)["VersionId"] for i in range(6)]
    c.put_object(Bucket="vpage", Key="z", Body=b"z")
    r = c.list_object_versions(Bucket="vpage", MaxKeys=2)
    assert r["NextKeyMarker"] == "k" and r["NextVersionIdMarker"] == ids[4]
    c.delete_object(Bucket="vpage", Key="k", VersionId=ids[4])
    r = c.list_object_versions(Bucket="vpage", KeyMarker="k", VersionIdMarker=ids[4])
    assert [(v["Key"], v["VersionId"]) for v in r["Versions"]][:4] == [
        ("k", ids[3]), ("k", ids[2]), ("k", ids[1]), ("k", ids[0])]
    assert r["Versions"][4]["Key"] == "z"
    # The resource API's delete-by-pages empties the bucket.
    import boto3
    res = boto3.resource("s3", endpoint_url=server.endpoint, aws_access_key_id=c._request_signer
                         ._credentials.access_key, aws_secret_access_key=c._request_signer
                         ._credentials.secret_key, region_name="us-east-1")
    for i in range(5):
        c.put_object(Bucket="vpage", Key="m%d" % i, Body=b"m")
        c.delete_object(Bucket="vpage", Key="m%d" % i)
    res.Bucket("vpage").object_versions.page_size(4).delete()
    assert versions(c, "vpage") == ([], [])
    c.delete_bucket(Bucket="vpage")


def test_conditions_apply_to_the_version_named(server):
    c = s3_client(server.endpoint)
    versioned(c, "vcond")
    v1 = c.put_object(Bucket="vcond", Key="d", Body=b"one")["VersionId"]
    c.put_object(Bucket="vcond", Key="d", Body=b"two")
    bad = '"%s"' % ("0" * 32)
    st, body, _ = signed_request(server.port, "DELETE", "/vcond/d?versionId=" + v1,
                                 headers={"If-Match": bad})
    assert st == 412, body
    st, body, _ = signed_request(server.port, "DELETE", "/vcond/d?versionId=" + v1,
                                 headers={"x-amz-if-match-size": "999"})
    assert st == 412, body
    import base64
    doc = ("<Delete><Object><Key>d</Key><VersionId>%s</VersionId><ETag>%s</ETag></Object>"
           "</Delete>" % (v1, bad)).encode()
    st, body, _ = signed_request(server.port, "POST", "/vcond?delete", doc, headers={
        "Content-MD5": base64.b64encode(hashlib.md5(doc).digest()).decode()})
    assert st == 200 and b"<Code>PreconditionFailed</Code>" in body, body
    assert ("<VersionId>%s</VersionId>" % v1).encode() in body
    assert c.get_object(Bucket="vcond", Key="d", VersionId=v1)["Body"].read() == b"one"
    st, _, _ = signed_request(server.port, "DELETE", "/vcond/d?versionId=" + v1,
                              headers={"If-Match": '"%s"' % md5(b"one")})
    assert st == 204
    with pytest.raises(ClientError) as e:
        c.get_object(Bucket="vcond", Key="d", VersionId=v1)
    assert code(e) == "NoSuchVersion"


def test_delete_marker_versions_refuse_everything_but_delete(server):
    c = s3_client(server.endpoint)
    versioned(c, "vdm")
    c.put_object(Bucket="vdm", Key="k", Body=b"x")
    m = c.delete_object(Bucket="vdm", Key="k")["VersionId"]
    with pytest.raises(ClientError) as e:
        c.get_object(Bucket="vdm", Key="k", VersionId=m)
    h = e.value.response["ResponseMetadata"]["HTTPHeaders"]
    assert status(e) == 405 and h["x-amz-delete-marker"] == "true" and "last-modified" in h
    for call in (lambda: c.put_object_tagging(Bucket="vdm", Key="k", VersionId=m,
                                              Tagging={"TagSet": []}),
                 lambda: c.delete_object_tagging(Bucket="vdm", Key="k", VersionId=m),
                 lambda: c.get_object_tagging(Bucket="vdm", Key="k", VersionId=m),
                 lambda: c.put_object_acl(Bucket="vdm", Key="k", VersionId=m, ACL="private")):
        with pytest.raises(ClientError) as e:
            call()
        assert status(e) == 405
    st, body, _ = signed_request(server.port, "GET", "/vdm?versions&prefix=%FF")
    assert st == 400  # not UTF-8 (a control character is a key's like any other: 200)
    st, body, _ = signed_request(server.port, "GET", "/vdm?versions&prefix=%01")
    assert st == 200


def test_with_newest_botocore(server):
    """This module again under the newest botocore."""
    run_under_newest_botocore("test_s3_versioning.py", "aws_cli")


def test_anonymous_reads_need_that_version_public(server):
    import urllib.error
    import urllib.request
    c = s3_client(server.endpoint)
    versioned(c, "vanon")
    old = c.put_object(Bucket="vanon", Key="k", Body=b"private", ACL="private")["VersionId"]
    new = c.put_object(Bucket="vanon", Key="k", Body=b"public", ACL="public-read")["VersionId"]
    url = server.endpoint + "/vanon/k"
    assert urllib.request.urlopen(url, timeout=10).read() == b"public"
    assert urllib.request.urlopen(url + "?versionId=" + new, timeout=10).read() == b"public"
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(url + "?versionId=" + old, timeout=10)
    assert e.value.code == 403
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(server.endpoint + "/vanon?versioning", timeout=10)
    assert e.value.code == 403
