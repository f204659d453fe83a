"""Corners of the S3 API real clients find: standard headers kept and
overridden, Owner in listings, presigned expiry bounds, Content-MD5 forms,
UploadPartCopy ranges. Runs under Debian's boto3 and, through
test_with_newest_botocore, again under the newest botocore on this machine."""
import base64
import hashlib
import os
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET

import pytest
from botocore.exceptions import ClientError

from conftest import run_under_newest_botocore, AK, SK, recv_to_close, s3_client, signed_request



def sha(b):
    return hashlib.sha256(b).hexdigest()


def presigner(server):
    import boto3
    from botocore.config import Config
    return boto3.session.Session().client(
        "s3", endpoint_url=server.endpoint, aws_access_key_id=AK, aws_secret_access_key=SK,
        region_name="us-east-1", config=Config(s3={"addressing_style": "path"},
                                               signature_version="s3v4"))


def fetch(url, method="GET"):
    req = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read(), r.headers
    except urllib.error.HTTPError as e:
        return e.code, e.read(), e.headers


STD = {"CacheControl": "max-age=3600, public", "ContentDisposition": 'attachment; filename="a b.txt"',
       "ContentEncoding": "gzip", "ContentLanguage": "de-CH",
       "ContentType": "text/csv; charset=utf-8"}


def check_std(h, want):
    for k, v in want.items():
        assert h.get(k) == v, (k, h.get(k), v)


def test_standard_headers_kept(server):
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="std")
    body = os.urandom(5000)
    c.put_object(Bucket="std", Key="o", Body=body, Expires="Wed, 21 Oct 2037 07:28:00 GMT", **STD)
    for op in (c.head_object, c.get_object):
        r = op(Bucket="std", Key="o")
        check_std(r, STD)
        assert r["ExpiresString"] == "Wed, 21 Oct 2037 07:28:00 GMT" if "ExpiresString" in r \
            else r["ResponseMetadata"]["HTTPHeaders"]["expires"] == "Wed, 21 Oct 2037 07:28:00 GMT"
    assert sha(c.get_object(Bucket="std", Key="o")["Body"].read()) == sha(body)
    # Without a Content-Type: binary/octet-stream.
    signed_request(server.port, "PUT", "/std/plain", b"x")
    assert c.head_object(Bucket="std", Key="plain")["ContentType"] == "binary/octet-stream"
    # Copy keeps them; REPLACE takes the new ones.
    c.copy_object(Bucket="std", Key="copy", CopySource={"Bucket": "std", "Key": "o"})
    check_std(c.head_object(Bucket="std", Key="copy"), STD)
    c.copy_object(Bucket="std", Key="repl", CopySource={"Bucket": "std", "Key": "o"},
                  MetadataDirective="REPLACE", CacheControl="no-cache", ContentType="text/plain")
    h = c.head_object(Bucket="std", Key="repl")
    assert h["CacheControl"] == "no-cache" and h["ContentType"] == "text/plain"
    assert "ContentDisposition" not in h and "ContentLanguage" not in h
    # Multipart uploads keep what CreateMultipartUpload gave.
    up = c.create_multipart_upload(Bucket="std", Key="mp", **STD)["UploadId"]
    part = os.urandom(5 << 20)
    e = c.upload_part(Bucket="std", Key="mp", UploadId=up, PartNumber=1, Body=part)["ETag"]
    c.complete_multipart_upload(Bucket="std", Key="mp", UploadId=up,
                                MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e}]})
    check_std(c.head_object(Bucket="std", Key="mp"), STD)
    # aws-chunked is a transfer detail, not the object's encoding.
    st, _, _ = signed_request(server.port, "PUT", "/std/enc", b"abc",
                              headers={"Content-Encoding": "aws-chunked,gzip"})
    assert st == 200
    assert c.head_object(Bucket="std", Key="enc")["ContentEncoding"] == "gzip"


def test_response_header_overrides(server):
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="ovr")
    c.put_object(Bucket="ovr", Key="o", Body=b"hello", ACL="public-read", **STD)
    r = c.get_object(Bucket="ovr", Key="o", ResponseContentType="application/x-test",
                     ResponseContentLanguage="fr", ResponseCacheControl="no-store",
                     ResponseContentDisposition="inline", ResponseContentEncoding="identity",
                     ResponseExpires="Thu, 01 Jan 2037 00:00:00 GMT")
    assert r["ContentType"] == "application/x-test" and r["ContentLanguage"] == "fr"
    assert r["CacheControl"] == "no-store" and r["ContentDisposition"] == "inline"
    assert r["ContentEncoding"] == "identity"
    assert r["Body"].read() == b"hello"
    # Presigned GETs may override too; anonymous ones may not (S3: 400 InvalidRequest).
    url = presigner(server).generate_presigned_url(
        "get_object", Params={"Bucket": "ovr", "Key": "o", "ResponseContentType": "text/x-p"})
    st, body, h = fetch(url)
    assert st == 200 and h["Content-Type"] == "text/x-p" and body == b"hello"
    st, body, _ = fetch(server.endpoint + "/ovr/o?response-content-type=text%2Fevil")
    assert st == 400 and ET.fromstring(body).findtext("Code") == "InvalidRequest"
    st, body, h = fetch(server.endpoint + "/ovr/o")
    assert st == 200 and h["Content-Type"] == STD["ContentType"]


def test_owner_in_listings(server):
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="own")
    c.put_object(Bucket="own", Key="k", Body=b"1")
    v1 = c.list_objects(Bucket="own")["Contents"][0]
    assert v1["Owner"]["ID"] == AK
    v2 = c.list_objects_v2(Bucket="own")["Contents"][0]
    assert "Owner" not in v2
    v2 = c.list_objects_v2(Bucket="own", FetchOwner=True)["Contents"][0]
    assert v2["Owner"]["ID"] == AK


def test_presigned_expiry(server):
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="exp")
    c.put_object(Bucket="exp", Key="o", Body=b"data")
    p = presigner(server)
    url = p.generate_presigned_url("get_object", Params={"Bucket": "exp", "Key": "o"},
                                   ExpiresIn=60)
    assert fetch(url)[:2] == (200, b"data")
    for bad in ("604801", "abc", "-5"):
        u = url.replace("X-Amz-Expires=60", "X-Amz-Expires=" + bad)
        st, body, _ = fetch(u)
        assert st == 400 and ET.fromstring(body).findtext("Code") == \
            "AuthorizationQueryParametersError", bad
    # 0 is well-formed, and expired at once (ceph's s3-tests: 403; it was 400).
    st, body, _ = fetch(p.generate_presigned_url("get_object", Params={"Bucket": "exp", "Key": "o"},
                                                 ExpiresIn=0))
    assert st == 403 and ET.fromstring(body).findtext("Code") == "AccessDenied", body
    # Expired: signed for a time long past (the signature is valid for that time).
    import datetime
    from unittest import mock
    import botocore.auth
    past = datetime.datetime.utcnow() - datetime.timedelta(hours=2)
    if hasattr(botocore.auth, "get_current_datetime"):  # newer botocore
        patch = mock.patch.object(botocore.auth, "get_current_datetime", return_value=past)
    else:
        patch = mock.patch("botocore.auth.datetime")
    with patch as dt:
        if not hasattr(botocore.auth, "get_current_datetime"):
            dt.datetime.utcnow.return_value = past
            dt.datetime.now.return_value = past
        old = p.generate_presigned_url("get_object", Params={"Bucket": "exp", "Key": "o"},
                                       ExpiresIn=60)
    assert "X-Amz-Date=" + past.strftime("%Y%m%dT%H%M") in old
    st, body, _ = fetch(old)
    root = ET.fromstring(body)
    assert st == 403 and root.findtext("Code") == "AccessDenied"
    assert "expired" in root.findtext("Message")


def test_presigned_parameters_count_once(server):
    """A presigned URL with an X-Amz-* parameter twice (another X-Amz-Signature added to a
    valid URL was taken, the first one checked): 400 AuthorizationQueryParametersError."""
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="dupq")
    c.put_object(Bucket="dupq", Key="o", Body=b"data")
    url = presigner(server).generate_presigned_url(
        "get_object", Params={"Bucket": "dupq", "Key": "o"}, ExpiresIn=60)
    assert fetch(url)[:2] == (200, b"data")
    sig = url.split("X-Amz-Signature=")[1].split("&")[0]
    for extra in ("X-Amz-Signature=" + "0" * 64, "X-Amz-Signature=" + sig,
                  "X-Amz-Expires=60", "X-Amz-Algorithm=AWS4-HMAC-SHA256"):
        st, body, _ = fetch(url + "&" + extra)
        assert st == 400 and ET.fromstring(body).findtext("Code") == \
            "AuthorizationQueryParametersError", (extra, st, body)


def test_xml_bodies_are_what_they_name(server):
    """DeleteObjects with another root element than Delete deleted the keys it listed, and
    PutBucketVersioning with two Status elements took the last: both MalformedXML."""
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="xmlroot")
    c.put_object(Bucket="xmlroot", Key="a", Body=b"1")
    for root in ("Remove", "Deletex", "BatchGet"):
        body = ("<%s><Object><Key>a</Key></Object></%s>" % (root, root)).encode()
        st, out, _ = signed_request(server.port, "POST", "/xmlroot?delete", body, headers={
            "Content-MD5": base64.b64encode(hashlib.md5(body).digest()).decode()})
        assert st == 400 and code_of(out) == "MalformedXML", (root, st, out)
    assert c.get_object(Bucket="xmlroot", Key="a")["Body"].read() == b"1"
    for twice in ("<Status>Enabled</Status><Status>Suspended</Status>",
                  "<Status>Enabled</Status><Status>Enabled</Status>",
                  "<Status>Enabled</Status><MfaDelete>Disabled</MfaDelete>"
                  "<MfaDelete>Disabled</MfaDelete>"):
        body = ("<VersioningConfiguration>%s</VersioningConfiguration>" % twice).encode()
        st, out, _ = signed_request(server.port, "PUT", "/xmlroot?versioning", body)
        assert st == 400 and code_of(out) == "MalformedXML", (twice, st, out)
    assert "Status" not in c.get_bucket_versioning(Bucket="xmlroot")
    r = c.delete_objects(Bucket="xmlroot", Delete={"Objects": [{"Key": "a"}]})
    assert [d["Key"] for d in r["Deleted"]] == ["a"]
    # CompleteMultipartUpload under another root completed the upload (a hostile probe).
    up = c.create_multipart_upload(Bucket="xmlroot", Key="m")["UploadId"]
    et = c.upload_part(Bucket="xmlroot", Key="m", UploadId=up, PartNumber=1, Body=b"p")["ETag"]
    for root in ("Foo", "CompleteMultipartUploadx", "Delete"):
        body = ("<%s><Part><PartNumber>1</PartNumber><ETag>%s</ETag></Part></%s>" % (
            root, et, root)).encode()
        st, out, _ = signed_request(server.port, "POST", "/xmlroot/m?uploadId=" + up, body)
        assert st == 400 and code_of(out) == "MalformedXML", (root, st, out)
    with pytest.raises(ClientError):
        c.head_object(Bucket="xmlroot", Key="m")
    c.complete_multipart_upload(Bucket="xmlroot", Key="m", UploadId=up, MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": et}]})
    assert c.get_object(Bucket="xmlroot", Key="m")["Body"].read() == b"p"


def test_content_md5_forms(server):
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="md5")
    body = b"the body"
    good = base64.b64encode(hashlib.md5(body).digest()).decode()
    other = base64.b64encode(hashlib.md5(b"else").digest()).decode()
    assert signed_request(server.port, "PUT", "/md5/ok", body, {"Content-MD5": good})[0] == 200
    for bad in ("", "abc", base64.b64encode(b"short").decode(), good[:-2],
                base64.b64encode(hashlib.sha1(body).digest()).decode(), "!" * 24):
        st, resp, _ = signed_request(server.port, "PUT", "/md5/x", body, {"Content-MD5": bad})
        assert st == 400 and ET.fromstring(resp).findtext("Code") == "InvalidDigest", bad
    st, resp, _ = signed_request(server.port, "PUT", "/md5/x", body, {"Content-MD5": other})
    assert st == 400 and ET.fromstring(resp).findtext("Code") == "BadDigest"
    with pytest.raises(ClientError):
        c.head_object(Bucket="md5", Key="x")
    assert c.get_object(Bucket="md5", Key="ok")["Body"].read() == body


def test_upload_part_copy_range_outside_source(server):
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="upc")
    c.put_object(Bucket="upc", Key="src", Body=os.urandom(1000))
    up = c.create_multipart_upload(Bucket="upc", Key="dst")["UploadId"]
    # Past the source's end: 400 InvalidArgument naming its size, as S3 answers (not GET's
    # 416: versitygw#610 compared the two, s3fs#321 quotes S3's message).
    for rng, msg in (("bytes=0-1000", "source object of size: 1000"),
                     ("bytes=2000-3000", "source object of size: 1000"),
                     ("bytes=5-2", "bytes=first-last"), ("bytes=x-3", "bytes=first-last")):
        with pytest.raises(ClientError) as e:
            c.upload_part_copy(Bucket="upc", Key="dst", UploadId=up, PartNumber=1,
                               CopySource={"Bucket": "upc", "Key": "src"}, CopySourceRange=rng)
        err = e.value.response["Error"]
        assert (err["Code"], msg in err["Message"]) == ("InvalidArgument", True), (rng, err)
        assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    r = c.upload_part_copy(Bucket="upc", Key="dst", UploadId=up, PartNumber=1,
                           CopySource={"Bucket": "upc", "Key": "src"}, CopySourceRange="bytes=0-999")
    assert r["CopyPartResult"]["ETag"]


def test_storage_classes(server):
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="scl")
    c.put_object(Bucket="scl", Key="std", Body=b"s", StorageClass="STANDARD")
    assert c.list_objects_v2(Bucket="scl")["Contents"][0]["StorageClass"] == "STANDARD"
    for sc in ("GLACIER", "STANDARD_IA", "NOT_A_CLASS"):
        with pytest.raises(ClientError) as e:
            c.put_object(Bucket="scl", Key="x", Body=b"x", StorageClass=sc)
        assert e.value.response["Error"]["Code"] == "InvalidStorageClass"
        with pytest.raises(ClientError) as e:
            c.create_multipart_upload(Bucket="scl", Key="x", StorageClass=sc)
        assert e.value.response["Error"]["Code"] == "InvalidStorageClass"
        with pytest.raises(ClientError) as e:
            c.copy_object(Bucket="scl", Key="x", CopySource="scl/std", StorageClass=sc)
        assert e.value.response["Error"]["Code"] == "InvalidStorageClass"
    assert [o["Key"] for o in c.list_objects_v2(Bucket="scl")["Contents"]] == ["std"]


def test_with_newest_botocore(server):
    """This module again under the newest botocore."""
    run_under_newest_botocore("test_s3_corners.py")


def test_get_object_attributes(server):
    import base64
    import zlib
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="attr")
    body = os.urandom(3000)
    crc = base64.b64encode(zlib.crc32(body).to_bytes(4, "big")).decode()
    c.put_object(Bucket="attr", Key="plain", Body=body, ChecksumCRC32=crc)
    r = c.get_object_attributes(Bucket="attr", Key="plain", ObjectAttributes=[
        "ETag", "Checksum", "StorageClass", "ObjectSize", "ObjectParts"])
    assert r["ETag"] == hashlib.md5(body).hexdigest()
    assert r["Checksum"]["ChecksumCRC32"] == crc
    assert r["StorageClass"] == "STANDARD" and r["ObjectSize"] == 3000
    assert "ObjectParts" not in r
    up = c.create_multipart_upload(Bucket="attr", Key="mp")["UploadId"]
    sizes = [5 << 20, 5 << 20, 1234]
    parts = []
    for i, n in enumerate(sizes, 1):
        e = c.upload_part(Bucket="attr", Key="mp", UploadId=up, PartNumber=i, Body=os.urandom(n))
        parts.append({"PartNumber": i, "ETag": e["ETag"]})
    c.complete_multipart_upload(Bucket="attr", Key="mp", UploadId=up,
                                MultipartUpload={"Parts": parts})
    # Without an additional checksum, S3 lists no part of a general purpose bucket's
    # object: their count only.
    r = c.get_object_attributes(Bucket="attr", Key="mp", ObjectAttributes=["ObjectParts"],
                                MaxParts=2)
    assert r["ObjectParts"]["TotalPartsCount"] == 3 and "Parts" not in r["ObjectParts"]
    assert not r["ObjectParts"].get("IsTruncated")
    up = c.create_multipart_upload(Bucket="attr", Key="mp", ChecksumAlgorithm="CRC32")["UploadId"]
    parts = []
    for i, n in enumerate(sizes, 1):
        e = c.upload_part(Bucket="attr", Key="mp", UploadId=up, PartNumber=i, Body=os.urandom(n),
                          ChecksumAlgorithm="CRC32")
        parts.append({"PartNumber": i, "ETag": e["ETag"], "ChecksumCRC32": e["ChecksumCRC32"]})
    c.complete_multipart_upload(Bucket="attr", Key="mp", UploadId=up,
                                MultipartUpload={"Parts": parts})
    r = c.get_object_attributes(Bucket="attr", Key="mp", ObjectAttributes=["ObjectParts"],
                                MaxParts=2)
    op = r["ObjectParts"]
    assert op["TotalPartsCount"] == 3 and op["IsTruncated"]
    assert [p["Size"] for p in op["Parts"]] == sizes[:2]
    assert [p["ChecksumCRC32"] for p in op["Parts"]] == [p["ChecksumCRC32"] for p in parts[:2]]
    r = c.get_object_attributes(Bucket="attr", Key="mp", ObjectAttributes=["ObjectParts"],
                                PartNumberMarker=op["NextPartNumberMarker"])
    assert [p["Size"] for p in r["ObjectParts"]["Parts"]] == sizes[2:]
    assert not r["ObjectParts"]["IsTruncated"]
    st, body, _ = signed_request(server.port, "GET", "/attr/plain?attributes", headers={
        "x-amz-object-attributes": "ETag,Bogus"})
    assert st == 400 and ET.fromstring(body).findtext("Code") == "InvalidArgument"
    # None named (the header missing or empty): InvalidRequest, as S3.
    for hdrs in ({}, {"x-amz-object-attributes": ""}):
        st, body, _ = signed_request(server.port, "GET", "/attr/plain?attributes", headers=hdrs)
        assert st == 400 and ET.fromstring(body).findtext("Code") == "InvalidRequest", hdrs
    with pytest.raises(ClientError) as e:
        c.get_object_attributes(Bucket="attr", Key="missing", ObjectAttributes=["ETag"])
    assert e.value.response["Error"]["Code"] == "NoSuchKey"


def test_control_characters_in_keys(server):
    """S3 takes any UTF-8 but NUL in a key, control characters too: they round-trip, are
    listed exactly with encoding-type=url (boto3's default), and as character references
    (&#x1;, as S3 writes them) without it."""
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="ctl")
    keys = ["a\x01b", "x\x1fy", "esc\x1b[0m", "tab\tnl\ncr\r", "bell\x07/ok"]
    for i, k in enumerate(keys):
        data = os.urandom(100 + i)
        c.put_object(Bucket="ctl", Key=k, Body=data)
        assert sha(c.get_object(Bucket="ctl", Key=k)["Body"].read()) == sha(data)
        assert c.head_object(Bucket="ctl", Key=k)["ContentLength"] == len(data)
    listed = [o["Key"] for o in c.list_objects_v2(Bucket="ctl")["Contents"]]
    assert listed == sorted(keys, key=lambda k: k.encode())
    got = c.list_objects_v2(Bucket="ctl", Prefix="a\x01")["Contents"]
    assert [o["Key"] for o in got] == ["a\x01b"]
    st, body, _ = signed_request(server.port, "GET", "/ctl?list-type=2")
    assert st == 200
    for ref in (b"a&#x1;b", b"x&#x1F;y", b"esc&#x1B;[0m", b"tab\tnl\ncr&#13;", b"bell&#x7;/ok"):
        assert ref in body, (ref, body)
    # A NUL is still refused (no S3 key holds one).
    st, body, _ = signed_request(server.port, "PUT", "/ctl/nul%00key", body=b"x")
    assert st == 400
    for k in keys:
        c.delete_object(Bucket="ctl", Key=k)
    assert "Contents" not in c.list_objects_v2(Bucket="ctl")


def code_of(body):
    return ET.fromstring(body).findtext("Code")


def test_etag_conditions_take_quotes_or_not(server):
    """If-Match / If-None-Match name ETags quoted or not, in lists, W/ or not: S3 takes them
    all (an unquoted If-Match on GET was 412)."""
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="etq")
    etag = c.put_object(Bucket="etq", Key="k", Body=b"hello")["ETag"].strip('"')
    for im in (etag, '"%s"' % etag, '"other", %s' % etag, "*"):
        st, body, _ = signed_request(server.port, "GET", "/etq/k", headers={"If-Match": im})
        assert st == 200 and body == b"hello", im
        st, _, _ = signed_request(server.port, "GET", "/etq/k", headers={"If-None-Match": im})
        assert st == 304, im
    # A weak tag: If-None-Match compares weakly (304), If-Match strongly (412), RFC 9110.
    st, _, _ = signed_request(server.port, "GET", "/etq/k", headers={"If-None-Match": 'W/"%s"' % etag})
    assert st == 304
    st, _, _ = signed_request(server.port, "GET", "/etq/k", headers={"If-Match": 'W/"%s"' % etag})
    assert st == 412
    for im in ("other", '"%s"' % etag[:-1], ""):
        st, _, _ = signed_request(server.port, "GET", "/etq/k", headers={"If-Match": im})
        assert st == 412, im
    c.copy_object(Bucket="etq", Key="c", CopySource="etq/k", CopySourceIfMatch=etag)
    # A write conditioned on the unquoted ETag.
    st, _, _ = signed_request(server.port, "PUT", "/etq/k", b"again", headers={"If-Match": etag})
    assert st == 200
    assert c.get_object(Bucket="etq", Key="k")["Body"].read() == b"again"


def test_checksum_headers_are_checked_before_the_body(server):
    """What a PUT says of its checksum is one algorithm, well formed: else 400 InvalidRequest
    (an unknown algorithm, or one disagreeing with the header, was taken without a check; so
    was an algorithm named with no checksum in a header or a trailer, on a part too)."""
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="ckh")
    data = b"checksummed"
    crc = base64.b64encode(__import__("zlib").crc32(data).to_bytes(4, "big")).decode()
    for hdrs in ({"x-amz-sdk-checksum-algorithm": "BOGUS"},
                 {"x-amz-sdk-checksum-algorithm": "SHA256", "x-amz-checksum-crc32": crc},
                 {"x-amz-checksum-crc32": "!!!!"},
                 {"x-amz-checksum-crc32": "AAAA"}):
        st, body, _ = signed_request(server.port, "PUT", "/ckh/k", data, headers=hdrs)
        assert st == 400 and code_of(body) == "InvalidRequest", (hdrs, body)
    uid = c.create_multipart_upload(Bucket="ckh", Key="k")["UploadId"]
    for path in ("/ckh/k", "/ckh/k?partNumber=1&uploadId=" + uid):
        st, body, _ = signed_request(server.port, "PUT", path, data,
                                     headers={"x-amz-sdk-checksum-algorithm": "CRC32"})
        assert st == 400 and code_of(body) == "InvalidRequest", (path, body)
        assert b"no corresponding x-amz-checksum-* or x-amz-trailer" in body
    assert c.list_parts(Bucket="ckh", Key="k", UploadId=uid).get("Parts", []) == []
    with pytest.raises(ClientError):
        c.head_object(Bucket="ckh", Key="k")
    st, _, h = signed_request(server.port, "PUT", "/ckh/k", data, headers={
        "x-amz-sdk-checksum-algorithm": "crc32", "x-amz-checksum-crc32": crc})
    assert st == 200 and h.get("x-amz-checksum-crc32") == crc


def test_zero_sized_pages_end(server):
    """max-uploads=0 and max-parts=0 answer an empty page that is not truncated: a client
    paging on IsTruncated with markers that cannot move would loop for ever."""
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="zpages")
    up = c.create_multipart_upload(Bucket="zpages", Key="k")["UploadId"]
    for n in (1, 2):
        c.upload_part(Bucket="zpages", Key="k", UploadId=up, PartNumber=n, Body=b"p" * 10)
    r = c.list_multipart_uploads(Bucket="zpages", MaxUploads=0)
    assert r["IsTruncated"] is False and not r.get("Uploads")
    r = c.list_parts(Bucket="zpages", Key="k", UploadId=up, MaxParts=0)
    assert r["IsTruncated"] is False and not r.get("Parts")
    r = c.list_parts(Bucket="zpages", Key="k", UploadId=up, PartNumberMarker=99999)
    assert r["IsTruncated"] is False and not r.get("Parts")
    r = c.list_parts(Bucket="zpages", Key="k", UploadId=up, MaxParts=1)
    assert r["IsTruncated"] is True and r["NextPartNumberMarker"] == 1


def test_website_redirect_location_is_kept(server):
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="wredir")
    c.put_object(Bucket="wredir", Key="k", Body=b"x", WebsiteRedirectLocation="/elsewhere")
    assert c.head_object(Bucket="wredir", Key="k")["WebsiteRedirectLocation"] == "/elsewhere"
    assert c.get_object(Bucket="wredir", Key="k")["WebsiteRedirectLocation"] == "/elsewhere"
    # Not copied (S3: "you must specify x-amz-website-redirect-location in the request").
    c.copy_object(Bucket="wredir", Key="c", CopySource="wredir/k")
    assert "WebsiteRedirectLocation" not in c.head_object(Bucket="wredir", Key="c")
    c.copy_object(Bucket="wredir", Key="c2", CopySource="wredir/k", WebsiteRedirectLocation="/b")
    assert c.head_object(Bucket="wredir", Key="c2")["WebsiteRedirectLocation"] == "/b"
    # Onto itself, setting only the redirect: a change, allowed.
    c.copy_object(Bucket="wredir", Key="k", CopySource="wredir/k", WebsiteRedirectLocation="/c")
    h = c.head_object(Bucket="wredir", Key="k")
    assert h["WebsiteRedirectLocation"] == "/c" and h["ContentLength"] == 1
    # Onto itself changing nothing: refused, with S3's message naming what would count.
    with pytest.raises(ClientError) as e:
        c.copy_object(Bucket="wredir", Key="k", CopySource="wredir/k")
    err = e.value.response["Error"]
    assert err["Code"] == "InvalidRequest" and "storage class" in err["Message"], err
    # Naming a storage class counts as a change (S3 takes it, STANDARD included: `aws s3 cp`
    # with --storage-class rewrites an object in place); the body stays, the redirect goes.
    before = c.head_object(Bucket="wredir", Key="k")["LastModified"]
    c.copy_object(Bucket="wredir", Key="k", CopySource="wredir/k", StorageClass="STANDARD")
    h = c.head_object(Bucket="wredir", Key="k")
    assert c.get_object(Bucket="wredir", Key="k")["Body"].read() == b"x"
    assert "WebsiteRedirectLocation" not in h and h["LastModified"] >= before
    with pytest.raises(ClientError) as e:
        c.put_object(Bucket="wredir", Key="bad", Body=b"x", WebsiteRedirectLocation="ftp://x")
    assert e.value.response["Error"]["Code"] == "InvalidArgument"


def test_request_and_host_ids(server):
    """Every response carries x-amz-request-id and x-amz-id-2, as S3's do; an error's body
    names both (RequestId, HostId), and botocore hands them to the caller."""
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="ids")
    meta = c.put_object(Bucket="ids", Key="k", Body=b"x")["ResponseMetadata"]
    assert meta["RequestId"] and meta["HostId"]
    assert base64.b64decode(meta["HostId"]).decode().endswith("/" + meta["RequestId"])
    st, body, hdrs = signed_request(server.port, "GET", "/ids/missing")
    assert st == 404
    hdrs = {k.lower(): v for k, v in hdrs.items()}
    root = ET.fromstring(body)
    assert root.findtext("Code") == "NoSuchKey"
    assert root.findtext("RequestId") == hdrs["x-amz-request-id"]
    assert root.findtext("HostId") == hdrs["x-amz-id-2"]
    with pytest.raises(ClientError) as e:
        c.head_object(Bucket="ids", Key="missing")
    assert e.value.response["ResponseMetadata"]["HostId"]


def put_with_lines(server, path, lines, body=b"x", date=None):
    """A PUT whose header lines are lines as given (repeats kept), signed as SigV4 signs
    repeats (one canonical line, values joined by commas): (status, body). date: (header,
    value, the instant in ISO 8601 basic form) in place of an x-amz-date of now."""
    import datetime
    import hmac
    import socket
    amz = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    date = date or ("x-amz-date", amz, amz)
    amz = date[2]
    ph = hashlib.sha256(body).hexdigest()
    base = [("host", "127.0.0.1:%d" % server.port), ("x-amz-content-sha256", ph),
            (date[0], date[1])] + lines
    names = sorted(set(k.lower() for k, _ in base))
    canon = "".join("%s:%s\n" % (n, ",".join(" ".join(v.split()) for k, v in base
                                             if k.lower() == n)) for n in names)
    scope = "%s/us-east-1/s3/aws4_request" % amz[:8]
    creq = "\n".join(["PUT", path, "", canon, ";".join(names), ph])
    sts = "\n".join(["AWS4-HMAC-SHA256", amz, scope, sha(creq.encode())])
    k = ("AWS4" + SK).encode()
    for part in (amz[:8], "us-east-1", "s3", "aws4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    sig = hmac.new(k, sts.encode(), hashlib.sha256).hexdigest()
    head = "".join("%s: %s\r\n" % kv for kv in base)
    head += ("Authorization: AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%s\r\n"
             "Content-Length: %d\r\nConnection: close\r\n" % (AK, scope, ";".join(names), sig,
                                                             len(body)))
    s = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    try:
        s.sendall(("PUT %s HTTP/1.1\r\n" % path).encode() + head.encode() + b"\r\n" + body)
        out = recv_to_close(s)
    finally:
        s.close()
    return int(out.split(b" ", 2)[1]), out.split(b"\r\n\r\n", 1)[1]


def test_sigv4_dated_by_the_date_header(server):
    """Without x-amz-date, SigV4 takes the request's date from its Date header (AWS looks
    for x-amz-date, then Date), in ISO 8601 basic form or as an HTTP-date; the string to sign
    carries the ISO form. Such requests were refused 403. A Date too far off is still
    RequestTimeTooSkewed, and one that is neither form is refused."""
    import datetime
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="dated")
    now = datetime.datetime.now(datetime.timezone.utc)
    iso = now.strftime("%Y%m%dT%H%M%SZ")
    http_date = now.strftime("%a, %d %b %Y %H:%M:%S GMT")
    for key, date in (("iso", ("Date", iso, iso)), ("http", ("Date", http_date, iso))):
        body = os.urandom(1000)
        st, out = put_with_lines(server, "/dated/" + key, [], body=body, date=date)
        assert st == 200, (key, out)
        got = c.get_object(Bucket="dated", Key=key)["Body"].read()
        assert sha(got) == sha(body), key
    old = now - datetime.timedelta(hours=1)
    st, out = put_with_lines(server, "/dated/old", [], date=(
        "Date", old.strftime("%a, %d %b %Y %H:%M:%S GMT"), old.strftime("%Y%m%dT%H%M%SZ")))
    assert st == 403 and b"RequestTimeTooSkewed" in out, out
    st, out = put_with_lines(server, "/dated/odd", [], date=("Date", now.isoformat(), iso))
    assert st == 403 and b"AccessDenied" in out, out
    keys = sorted(o["Key"] for o in c.list_objects_v2(Bucket="dated")["Contents"])
    assert keys == ["http", "iso"]


def test_repeated_header_lines_are_one_field(server):
    """Header lines of one name are one field, their values joined by commas (RFC 9110 5.3),
    which is what SigV4 signs: metadata keeps every value (S3 joins them so), and a joined
    value that is not well-formed is refused, never one line of it checked or applied while
    the other is ignored (a right checksum then a wrong one was accepted; of two canned ACLs
    the first was applied)."""
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="dups")
    st, _ = put_with_lines(server, "/dups/m", [("x-amz-meta-d", "1"), ("X-Amz-Meta-D", "2")])
    assert st == 200
    assert c.head_object(Bucket="dups", Key="m")["Metadata"] == {"d": "1,2"}
    right = base64.b64encode(__import__("zlib").crc32(b"x").to_bytes(4, "big")).decode()
    st, out = put_with_lines(server, "/dups/ck", [("x-amz-checksum-crc32", right),
                                                  ("x-amz-checksum-crc32", "AAAAAA==")])
    assert st == 400, out
    st, out = put_with_lines(server, "/dups/acl", [("x-amz-acl", "private"),
                                                   ("x-amz-acl", "public-read")])
    assert st == 400, out
    for key in ("ck", "acl"):
        with pytest.raises(ClientError):
            c.head_object(Bucket="dups", Key=key)


def test_complete_part_list_errors(server):
    """A CompleteMultipartUpload's part list is checked as S3 checks it: a Part without its
    PartNumber or ETag, or whose PartNumber is no integer, does not fit the schema
    (MalformedXML); a number below 1 is InvalidArgument, part by part in list order with the
    order itself (InvalidPartOrder); a number past 10,000 names no part (InvalidPart). The
    upload stays usable through all of it. (Before: InvalidPart for every one.)"""
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="cmpl")
    up = c.create_multipart_upload(Bucket="cmpl", Key="k")["UploadId"]
    et = c.upload_part(Bucket="cmpl", Key="k", UploadId=up, PartNumber=1, Body=b"abc")["ETag"]

    def complete(parts_xml):
        body = ('<CompleteMultipartUpload xmlns="http://s3.amazonaws.com/doc/2006-03-01/">%s'
                "</CompleteMultipartUpload>" % parts_xml).encode()
        st, out, _ = signed_request(server.port, "POST", "/cmpl/k?uploadId=%s" % up, body)
        code = ET.fromstring(out).findtext("Code") if st != 200 else None
        return st, code

    def part(num=None, etag=None):
        return "<Part>%s%s</Part>" % ("" if num is None else "<PartNumber>%s</PartNumber>" % num,
                                      "" if etag is None else "<ETag>%s</ETag>" % etag)

    for bad in (part(etag=et), part(num=1), part(num="abc", etag=et), part(num="1x", etag=et),
                part(num="", etag=et), part(num="2147483648", etag=et), part(1, et) + "<Part/>"):
        assert complete(bad) == (400, "MalformedXML"), bad
    for bad in (part(0, et), part(-4, et), part(1, et) + part(-1, et)):
        assert complete(bad) == (400, "InvalidArgument"), bad
    assert complete(part(2, et) + part(1, et)) == (400, "InvalidPartOrder")
    assert complete(part(10001, et)) == (400, "InvalidPart")
    assert complete(part(2, et)) == (400, "InvalidPart")
    # Through boto3 too (which sends what it is given).
    with pytest.raises(ClientError) as e:
        c.complete_multipart_upload(Bucket="cmpl", Key="k", UploadId=up,
                                    MultipartUpload={"Parts": [{"PartNumber": 0, "ETag": et}]})
    assert e.value.response["Error"]["Code"] == "InvalidArgument"
    with pytest.raises(ClientError) as e:
        c.complete_multipart_upload(Bucket="cmpl", Key="k", UploadId=up,
                                    MultipartUpload={"Parts": [{"ETag": et}]})
    assert e.value.response["Error"]["Code"] == "MalformedXML"
    assert complete(" " + part(" 1 ", et)) == (200, None)
    assert c.get_object(Bucket="cmpl", Key="k")["Body"].read() == b"abc"


def test_bucket_subresources_asked_of_a_key(server):
    """A bucket's listings (?uploads, ?versions) asked of a key are S3's InvalidRequest, each
    with its own words (they were 405); an unknown x-amz-tagging-directive is InvalidArgument
    before anything else is looked at, a copy onto itself included."""
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="subr")
    c.put_object(Bucket="subr", Key="k", Body=b"x")
    for q, words in (("uploads", b"?uploads subresource"), ("versions", b"?versions sub-resource")):
        st, out, _ = signed_request(server.port, "GET", "/subr/k?" + q)
        assert st == 400 and ET.fromstring(out).findtext("Code") == "InvalidRequest", out
        assert words in out
    for dst in ("k", "other"):
        st, out, _ = signed_request(server.port, "PUT", "/subr/" + dst, headers={
            "x-amz-copy-source": "/subr/k", "x-amz-tagging-directive": "invalid"})
        assert st == 400 and ET.fromstring(out).findtext("Code") == "InvalidArgument", out
    assert c.get_object(Bucket="subr", Key="k")["Body"].read() == b"x"
    # A part number that is none is refused as such before the upload it names is looked for.
    for pn, want in (("-10", "InvalidArgument"), ("0", "InvalidArgument"), ("x", "InvalidArgument"),
                     ("1", "NoSuchUpload")):
        for hdrs in ({}, {"x-amz-copy-source": "/subr/k"}):
            st, out, _ = signed_request(server.port, "PUT",
                                        "/subr/k?partNumber=%s&uploadId=bogus" % pn, b"x", hdrs)
            assert ET.fromstring(out).findtext("Code") == want, (pn, hdrs, out)


def test_create_bucket_with_tags(server):
    """A CreateBucketConfiguration may carry the bucket's Tags (the newest SDKs send them):
    they are its tagging from the start, under the bucket tags' rules (InvalidTag: nothing
    made); a Tag without its Key or Value is MalformedXML. The 200 names the bucket's ARN."""
    c = s3_client(server.endpoint)

    def create(name, tags_xml):
        body = ('<CreateBucketConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
                "<Tags>%s</Tags></CreateBucketConfiguration>" % tags_xml).encode()
        st, out, h = signed_request(server.port, "PUT", "/" + name, body)
        return st, (ET.fromstring(out).findtext("Code") if st != 200 else None), h

    def tag(k, v):
        return "<Tag><Key>%s</Key><Value>%s</Value></Tag>" % (k, v)

    st, code, h = create("tagged", tag("team", "ml") + tag("cost", "42"))
    assert (st, code) == (200, None)
    assert {k.lower(): v for k, v in h.items()}["x-amz-bucket-arn"] == "arn:aws:s3:::tagged"
    got = {t["Key"]: t["Value"] for t in c.get_bucket_tagging(Bucket="tagged")["TagSet"]}
    assert got == {"team": "ml", "cost": "42"}
    bad = [tag("aws:x", "1"), tag("d", "1") + tag("d", "2"), tag("k" * 129, "v")]
    for i, tags in enumerate(bad):
        assert create("badtags%d" % i, tags)[:2] == (400, "InvalidTag"), tags
    assert create("badtags9", "".join(tag("k%d" % i, "v") for i in range(51)))[:2] == \
        (400, "BadRequest")
    for i, tags in enumerate(("<Tag><Key>k</Key></Tag>", "<Tag><Value>v</Value></Tag>",
                              "<Oops/>")):
        assert create("maltags%d" % i, tags)[:2] == (400, "MalformedXML"), tags
    names = [b["Name"] for b in c.list_buckets()["Buckets"]]
    assert not [n for n in names if n.startswith(("badtags", "maltags"))]
    assert create("untagged", "")[:2] == (200, None)
    with pytest.raises(ClientError) as e:
        c.get_bucket_tagging(Bucket="untagged")
    assert e.value.response["Error"]["Code"] == "NoSuchTagSet"
