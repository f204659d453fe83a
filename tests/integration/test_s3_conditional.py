"""Conditional writes (what Iceberg and Delta commit with), Complete retried
after it succeeded, and a part uploaded twice at once. Runs under Debian's
boto3 and again under the newest botocore (test_with_newest_botocore)."""
import hashlib
import os
import socket
import threading

import pytest
from botocore.exceptions import ClientError

from conftest import run_under_newest_botocore, s3_client, signed_request
from test_hardening import read_response, request_head, sign



def sha(b):
    return hashlib.sha256(b).hexdigest()


def code(e):
    return e.value.response["Error"]["Code"]


def put_raw(server, key, body, headers):
    return signed_request(server.port, "PUT", "/cond/" + key, body, headers=headers)


def test_put_if_none_match_and_if_match(server):
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="cond")
    st, _, h = put_raw(server, "k", b"first", {"If-None-Match": "*"})
    assert st == 200
    e1 = h["ETag"]
    st, body, _ = put_raw(server, "k", b"second", {"If-None-Match": "*"})
    assert st == 412 and b"PreconditionFailed" in body
    st, body, _ = put_raw(server, "k", b"third", {"If-Match": '"0123456789abcdef0123456789abcdef"'})
    assert st == 412
    st, _, h = put_raw(server, "k", b"fourth", {"If-Match": e1})
    assert st == 200
    assert c.get_object(Bucket="cond", Key="k")["Body"].read() == b"fourth"
    st, body, _ = put_raw(server, "absent", b"x", {"If-Match": e1})
    assert st == 404 and b"NoSuchKey" in body
    st, _, _ = put_raw(server, "k", b"x", {"If-None-Match": '"abc"'})
    assert st == 501
    # A deleted key may be created again with If-None-Match.
    c.delete_object(Bucket="cond", Key="k")
    assert put_raw(server, "k", b"again", {"If-None-Match": "*"})[0] == 200


def test_conditional_creates_race_one_winner(server):
    """16 clients create the same key with If-None-Match: * for 50 rounds: one 200 per round,
    the others 412, the stored bytes the winner's."""
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="cond")
    for rnd in range(50):
        key = "race-%d" % rnd
        results = [None] * 16
        bodies = [os.urandom(2000 + i) for i in range(16)]
        gate = threading.Barrier(16)

        def go(i):
            gate.wait()
            results[i] = put_raw(server, key, bodies[i], {"If-None-Match": "*"})[0]

        ts = [threading.Thread(target=go, args=(i,)) for i in range(16)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        winners = [i for i, st in enumerate(results) if st == 200]
        assert len(winners) == 1, results
        assert sorted(results) == [200] + [412] * 15, results
        got = c.get_object(Bucket="cond", Key=key)["Body"].read()
        assert got == bodies[winners[0]]


def test_copy_and_complete_conditions(server):
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="cond")
    c.put_object(Bucket="cond", Key="src", Body=b"source")
    c.put_object(Bucket="cond", Key="dst", Body=b"dest")
    src_etag = c.head_object(Bucket="cond", Key="src")["ETag"]
    st, body, _ = signed_request(server.port, "PUT", "/cond/dst", b"", headers={
        "x-amz-copy-source": "/cond/src", "If-None-Match": "*"})
    assert st == 412
    st, body, _ = signed_request(server.port, "PUT", "/cond/dst", b"", headers={
        "x-amz-copy-source": "/cond/src", "x-amz-copy-source-if-match": '"ffff"'})
    assert st == 412
    st, body, _ = signed_request(server.port, "PUT", "/cond/dst", b"", headers={
        "x-amz-copy-source": "/cond/src", "x-amz-copy-source-if-none-match": src_etag})
    assert st == 412
    assert c.get_object(Bucket="cond", Key="dst")["Body"].read() == b"dest"
    c.copy_object(Bucket="cond", Key="dst", CopySource="cond/src", CopySourceIfMatch=src_etag)
    assert c.get_object(Bucket="cond", Key="dst")["Body"].read() == b"source"
    # CompleteMultipartUpload with If-None-Match on a key that exists.
    up = c.create_multipart_upload(Bucket="cond", Key="dst")["UploadId"]
    e = c.upload_part(Bucket="cond", Key="dst", UploadId=up, PartNumber=1, Body=b"p")["ETag"]
    xml = ("<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>%s</ETag></Part>"
           "</CompleteMultipartUpload>" % e).encode()
    st, body, _ = signed_request(server.port, "POST", "/cond/dst?uploadId=" + up, xml,
                                 headers={"If-None-Match": "*"})
    assert st == 412
    assert c.get_object(Bucket="cond", Key="dst")["Body"].read() == b"source"
    st, body, _ = signed_request(server.port, "POST", "/cond/new?uploadId=" + up, xml)
    assert st == 404  # the upload is for "dst"


def test_conditional_delete(server):
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="cond")
    c.put_object(Bucket="cond", Key="d", Body=b"12345")
    h = c.head_object(Bucket="cond", Key="d")
    lm = h["ResponseMetadata"]["HTTPHeaders"]["last-modified"]
    for bad in ({"If-Match": '"0000"'}, {"x-amz-if-match-size": "4"},
                {"x-amz-if-match-last-modified-time": "Mon, 01 Jan 2001 00:00:00 GMT"}):
        st, _, _ = signed_request(server.port, "DELETE", "/cond/d", b"", headers=bad)
        assert st == 412, bad
    assert c.head_object(Bucket="cond", Key="d")["ContentLength"] == 5
    st, _, _ = signed_request(server.port, "DELETE", "/cond/d", b"", headers={
        "If-Match": h["ETag"], "x-amz-if-match-size": "5", "x-amz-if-match-last-modified-time": lm})
    assert st == 204
    with pytest.raises(ClientError):
        c.head_object(Bucket="cond", Key="d")
    # No current version: 404 NoSuchKey, whatever the condition (as S3 answers, measured:
    # conditions are judged against the current version, and there is none).
    for cond in ({"If-Match": h["ETag"]}, {"If-Match": "*"}, {"If-Match": '"0000"'}):
        st, body, _ = signed_request(server.port, "DELETE", "/cond/d", b"", headers=cond)
        assert (st, b"<Code>NoSuchKey</Code>" in body) == (404, True), cond
    st, _, _ = signed_request(server.port, "DELETE", "/cond/d", b"")
    assert st == 204  # unconditional: deleting nothing is done


def test_conditional_delete_versioned(server):
    """With versioning: If-Match: * deletes (a marker) only when a current version exists; over
    a delete marker every condition answers 404 NoSuchKey and adds no marker, even one naming
    the ETag of the version under the marker."""
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="condv")
    c.put_bucket_versioning(Bucket="condv", VersioningConfiguration={"Status": "Enabled"})
    put = c.put_object(Bucket="condv", Key="k", Body=b"v1")
    st, _, hdrs = signed_request(server.port, "DELETE", "/condv/k", b"", headers={"If-Match": "*"})
    assert st == 204 and {k.lower(): v for k, v in hdrs.items()}.get("x-amz-delete-marker") == "true"
    for cond in ({"If-Match": "*"}, {"If-Match": put["ETag"]}, {"If-Match": '"0000"'}):
        st, body, _ = signed_request(server.port, "DELETE", "/condv/k", b"", headers=cond)
        assert (st, b"<Code>NoSuchKey</Code>" in body) == (404, True), cond
    vers = c.list_object_versions(Bucket="condv")
    assert len(vers.get("DeleteMarkers", [])) == 1 and len(vers["Versions"]) == 1
    got = c.get_object(Bucket="condv", Key="k", VersionId=put["VersionId"])["Body"].read()
    assert hashlib.md5(got).hexdigest() == hashlib.md5(b"v1").hexdigest()


def test_complete_retried_after_success(server):
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="cond")
    up = c.create_multipart_upload(Bucket="cond", Key="mp")["UploadId"]
    p1, p2 = os.urandom(5 << 20), os.urandom(1000)
    e1 = c.upload_part(Bucket="cond", Key="mp", UploadId=up, PartNumber=1, Body=p1)["ETag"]
    e2 = c.upload_part(Bucket="cond", Key="mp", UploadId=up, PartNumber=2, Body=p2)["ETag"]
    parts = {"Parts": [{"PartNumber": 1, "ETag": e1}, {"PartNumber": 2, "ETag": e2}]}
    r1 = c.complete_multipart_upload(Bucket="cond", Key="mp", UploadId=up, MultipartUpload=parts)
    r2 = c.complete_multipart_upload(Bucket="cond", Key="mp", UploadId=up, MultipartUpload=parts)
    assert r1["ETag"] == r2["ETag"]
    assert sha(c.get_object(Bucket="cond", Key="mp")["Body"].read()) == sha(p1 + p2)
    # Other parts, or once the object was replaced: the upload is gone.
    with pytest.raises(ClientError) as e:
        c.complete_multipart_upload(Bucket="cond", Key="mp", UploadId=up,
                                    MultipartUpload={"Parts": parts["Parts"][:1]})
    assert code(e) == "NoSuchUpload"
    c.put_object(Bucket="cond", Key="mp", Body=b"replaced")
    with pytest.raises(ClientError) as e:
        c.complete_multipart_upload(Bucket="cond", Key="mp", UploadId=up, MultipartUpload=parts)
    assert code(e) == "NoSuchUpload"
    assert c.get_object(Bucket="cond", Key="mp")["Body"].read() == b"replaced"


def test_part_uploaded_twice_at_once_last_wins(server):
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="cond")
    up = c.create_multipart_upload(Bucket="cond", Key="twice")["UploadId"]
    a, b = os.urandom(6 << 20), os.urandom(6 << 20)
    path = "/cond/twice?partNumber=1&uploadId=%s" % up

    def start(body):
        h = sign(server.port, "PUT", path)
        h["Content-Length"] = str(len(body))
        s = socket.create_connection(("127.0.0.1", server.port), timeout=60)
        s.sendall(request_head("PUT", path, h) + body[:len(body) // 2])
        return s

    sa, sb = start(a), start(b)
    try:
        sb.sendall(b[len(b) // 2:])
        assert read_response(sb)[0] == 200
        sa.sendall(a[len(a) // 2:])  # a finishes last: a is the part
        assert read_response(sa)[0] == 200
    finally:
        sa.close()
        sb.close()
    ea = '"%s"' % hashlib.md5(a).hexdigest()
    assert c.list_parts(Bucket="cond", Key="twice", UploadId=up)["Parts"][0]["ETag"] == ea
    c.complete_multipart_upload(Bucket="cond", Key="twice", UploadId=up, MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": ea}]})
    assert sha(c.get_object(Bucket="cond", Key="twice")["Body"].read()) == sha(a)


def test_with_newest_botocore(server):
    """This module again under the newest botocore."""
    run_under_newest_botocore("test_s3_conditional.py", 'race')


def test_delete_objects_conditions(server):
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="cond")
    for k in ("a", "b", "c", "d"):
        c.put_object(Bucket="cond", Key=k, Body=k.encode() * 3)
    ea = c.head_object(Bucket="cond", Key="a")["ETag"]
    lm = c.head_object(Bucket="cond", Key="d")["LastModified"]
    xml = ("<Delete><Object><Key>a</Key><ETag>%s</ETag></Object>"
           "<Object><Key>b</Key><ETag>\"00000000000000000000000000000000\"</ETag></Object>"
           "<Object><Key>c</Key><Size>2</Size></Object>"
           "<Object><Key>d</Key><Size>3</Size><LastModifiedTime>%s</LastModifiedTime></Object>"
           "<Object><Key>gone</Key><ETag>%s</ETag></Object></Delete>"
           % (ea, lm.strftime("%Y-%m-%dT%H:%M:%S.000Z"), ea)).encode()
    import base64
    md5 = base64.b64encode(hashlib.md5(xml).digest()).decode()
    st, body, _ = signed_request(server.port, "POST", "/cond?delete", xml,
                                 headers={"Content-MD5": md5})
    assert st == 200
    import xml.etree.ElementTree as ET
    ns = "{http://s3.amazonaws.com/doc/2006-03-01/}"
    root = ET.fromstring(body)
    deleted = sorted(e.findtext(ns + "Key") for e in root.findall(ns + "Deleted"))
    errors = {e.findtext(ns + "Key"): e.findtext(ns + "Code") for e in root.findall(ns + "Error")}
    assert deleted == ["a", "d"]
    assert errors == {"b": "PreconditionFailed", "c": "PreconditionFailed", "gone": "NoSuchKey"}
    left = sorted(o["Key"] for o in c.list_objects_v2(Bucket="cond")["Contents"])
    assert left == ["b", "c"]


def test_empty_if_match_matches_nothing(server):
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="cond")
    c.put_object(Bucket="cond", Key="e", Body=b"keep")
    for headers in ({"If-Match": ""}, {"If-Match": '""'}):
        assert put_raw(server, "e", b"over", headers)[0] == 412
        assert signed_request(server.port, "DELETE", "/cond/e", b"", headers=headers)[0] == 412
        assert put_raw(server, "absent", b"x", headers)[0] == 404
    assert c.get_object(Bucket="cond", Key="e")["Body"].read() == b"keep"
    xml = b"<Delete><Object><Key>e</Key><ETag></ETag></Object></Delete>"
    import base64
    md5 = base64.b64encode(hashlib.md5(xml).digest()).decode()
    st, body, _ = signed_request(server.port, "POST", "/cond?delete", xml, headers={"Content-MD5": md5})
    assert st == 200 and b"PreconditionFailed" in body
    # A Key outside an Object is malformed (it used to read an uninitialised condition).
    xml = b"<Delete><Foo><Key>e</Key></Foo></Delete>"
    md5 = base64.b64encode(hashlib.md5(xml).digest()).decode()
    st, body, _ = signed_request(server.port, "POST", "/cond?delete", xml, headers={"Content-MD5": md5})
    assert st == 400 and b"MalformedXML" in body
    assert c.get_object(Bucket="cond", Key="e")["Body"].read() == b"keep"


def test_abort_if_match_initiated_time(server):
    """AbortMultipartUpload with x-amz-if-match-initiated-time: the upload goes only if it
    was initiated at that time (412 otherwise, and it stays); an upload that is not there is
    204, as S3 documents the header. The header was ignored: a failed precondition aborted
    the upload (a sweep)."""
    import datetime
    import email.utils
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="abort-cond")
    uid = c.create_multipart_upload(Bucket="abort-cond", Key="k")["UploadId"]
    init = [u for u in c.list_multipart_uploads(Bucket="abort-cond")["Uploads"]
            if u["UploadId"] == uid][0]["Initiated"].astimezone(datetime.timezone.utc)
    path = "/abort-cond/k?uploadId=" + uid
    for bad in ("Mon, 01 Jan 2001 00:00:00 GMT",
                email.utils.format_datetime(init.replace(year=init.year - 1), usegmt=True)):
        st, body, _ = signed_request(server.port, "DELETE", path, b"",
                                     {"x-amz-if-match-initiated-time": bad})
        assert st == 412, (bad, st, body)
    st, body, _ = signed_request(server.port, "DELETE", path, b"",
                                 {"x-amz-if-match-initiated-time": "yesterday"})
    assert st == 400, body
    assert [u["UploadId"] for u in c.list_multipart_uploads(Bucket="abort-cond")["Uploads"]] \
        == [uid]
    good = email.utils.format_datetime(init, usegmt=True)
    st, body, _ = signed_request(server.port, "DELETE", path, b"",
                                 {"x-amz-if-match-initiated-time": good})
    assert st == 204, body
    assert not c.list_multipart_uploads(Bucket="abort-cond").get("Uploads")
    st, body, _ = signed_request(server.port, "DELETE", path, b"",
                                 {"x-amz-if-match-initiated-time": good})
    assert st == 204, body
    with pytest.raises(ClientError) as e:
        c.abort_multipart_upload(Bucket="abort-cond", Key="k", UploadId=uid)
    assert code(e) == "NoSuchUpload"
