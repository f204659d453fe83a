"""Additional checksums (x-amz-checksum-*): verified on upload as headers and
as aws-chunked trailers, refused when wrong (nothing becomes visible), kept
and returned on HEAD/GET with x-amz-checksum-mode: ENABLED; checked by the
newest botocore, which validates what it gets back."""
import base64
import hashlib
import os
import subprocess
import zlib

import pytest
from botocore.exceptions import ClientError

from conftest import AK, SK, s3_client, signed_request
from test_s3_gateway import newest_python
from test_s3_mpu_checksums import crc64nvme


def crc32_b64(data):
    return base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()


def test_checksum_headers_debian_boto3(server):
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="cksum")
    data = os.urandom(300_000)
    for algo in ("CRC32", "SHA1", "SHA256"):
        r = c.put_object(Bucket="cksum", Key=algo, Body=data, ChecksumAlgorithm=algo)
        # PutObject's checksum is always over the whole object, and S3 says so.
        assert r["ResponseMetadata"]["HTTPHeaders"]["x-amz-checksum-type"] == "FULL_OBJECT"
        h = c.head_object(Bucket="cksum", Key=algo, ChecksumMode="ENABLED")
        assert h["Checksum" + algo] == r["Checksum" + algo]
        got = c.get_object(Bucket="cksum", Key=algo, ChecksumMode="ENABLED")
        assert hashlib.sha256(got["Body"].read()).digest() == hashlib.sha256(data).digest()
    assert c.head_object(Bucket="cksum", Key="CRC32", ChecksumMode="ENABLED")[
        "ChecksumCRC32"] == crc32_b64(data)
    # Without checksum mode nothing extra is returned.
    assert "ChecksumCRC32" not in c.head_object(Bucket="cksum", Key="CRC32")


def xxhashes(data):
    """XXHASH64, XXHASH3 and XXHASH128 of data as S3 spells them (base64 of the big-endian,
    canonical digest), through Debian's libxxhash (no Python module for it here)."""
    import ctypes
    lib = ctypes.CDLL("libxxhash.so.0")
    lib.XXH64.restype = lib.XXH3_64bits.restype = ctypes.c_uint64
    lib.XXH64.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint64]
    lib.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]

    class H128(ctypes.Structure):
        _fields_ = [("low64", ctypes.c_uint64), ("high64", ctypes.c_uint64)]
    lib.XXH3_128bits.restype = H128
    lib.XXH3_128bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    h128 = lib.XXH3_128bits(data, len(data))
    b64 = base64.b64encode
    return {"xxhash64": b64(lib.XXH64(data, len(data), 0).to_bytes(8, "big")).decode(),
            "xxhash3": b64(lib.XXH3_64bits(data, len(data)).to_bytes(8, "big")).decode(),
            "xxhash128": b64(h128.high64.to_bytes(8, "big") +
                             h128.low64.to_bytes(8, "big")).decode()}


def later_checksums(data):
    """The algorithms S3 added later, each as its header's value for data."""
    b64 = base64.b64encode
    return dict(xxhashes(data), sha512=b64(hashlib.sha512(data).digest()).decode(),
                md5=b64(hashlib.md5(data).digest()).decode())


def test_later_checksum_algorithms_and_listings(server):
    """S3 has added checksum algorithms (SHA512, MD5, XXHASH64, XXHASH3, XXHASH128): each is
    verified on upload (BadDigest when wrong, InvalidRequest when no value of its kind, nothing
    stored), kept, returned with checksum mode and in a part's answer; one S3 does not know is
    refused. (They were refused as unsupported.) And listings name each object's checksum
    algorithm and type, as S3's do."""
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="cks-new")
    data = b"checksummed bytes" * 1000
    good = later_checksums(data)
    for name, value in good.items():
        wrong = later_checksums(data + b"!")[name]
        for v, want in ((wrong, "BadDigest"), ("AAAA", "InvalidRequest")):
            hdrs = {"x-amz-checksum-" + name: v, "x-amz-sdk-checksum-algorithm": name.upper()}
            st, body, _ = signed_request(server.port, "PUT", "/cks-new/" + name, data, hdrs)
            assert st == 400 and ("<Code>%s</Code>" % want).encode() in body, (name, v, body)
            with pytest.raises(ClientError):
                c.head_object(Bucket="cks-new", Key=name)
        hdrs = {"x-amz-checksum-" + name: value, "x-amz-sdk-checksum-algorithm": name.upper()}
        st, body, h = signed_request(server.port, "PUT", "/cks-new/" + name, data, hdrs)
        assert st == 200, (name, body)
        assert {k.lower(): v for k, v in h.items()}["x-amz-checksum-" + name] == value
        st, body, h = signed_request(server.port, "HEAD", "/cks-new/" + name,
                                     headers={"x-amz-checksum-mode": "ENABLED"})
        assert {k.lower(): v for k, v in h.items()}["x-amz-checksum-" + name] == value, h
        assert hashlib.sha256(c.get_object(Bucket="cks-new", Key=name)["Body"].read()).digest() \
            == hashlib.sha256(data).digest()
        # A part in an upload made with it (COMPOSITE, the only kind for a non-CRC).
        st, body, _ = signed_request(server.port, "POST", "/cks-new/mp-%s?uploads" % name,
                                     b"", {"x-amz-checksum-algorithm": name.upper()})
        assert st == 200, body
        up = body.split(b"<UploadId>")[1].split(b"</UploadId>")[0].decode()
        st, body, h = signed_request(server.port, "PUT", "/cks-new/mp-%s?partNumber=1&uploadId=%s"
                                     % (name, up), data, {"x-amz-checksum-" + name: value})
        assert st == 200, body
        etag = {k.lower(): v for k, v in h.items()}["etag"]
        xml = ("<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>%s</ETag>"
               "<Checksum%s>%s</Checksum%s></Part></CompleteMultipartUpload>"
               % (etag, name.upper(), value, name.upper())).encode()
        st, body, _ = signed_request(server.port, "POST", "/cks-new/mp-%s?uploadId=%s"
                                     % (name, up), xml)
        assert st == 200, body
        # COMPOSITE: the checksum of the parts' digests, and their count.
        comp = later_checksums(base64.b64decode(value))[name] + "-1"
        assert ("<Checksum%s>%s</Checksum%s>" % (name.upper(), comp, name.upper())).encode() \
            in body, body
    hdrs = {"x-amz-checksum-foo": "AAAA", "x-amz-sdk-checksum-algorithm": "FOO"}
    st, body, _ = signed_request(server.port, "PUT", "/cks-new/foo", data, hdrs)
    assert st == 400 and b"<Code>InvalidRequest</Code>" in body and b"unsupported" in body
    with pytest.raises(ClientError):
        c.head_object(Bucket="cks-new", Key="foo")
    # Listings: the algorithm and type of each object's checksum, none for an object without.
    c.put_object(Bucket="cks-new", Key="with", Body=data, ChecksumAlgorithm="SHA256")
    st, _, _ = signed_request(server.port, "PUT", "/cks-new/without", data)
    assert st == 200
    for listed in (c.list_objects_v2(Bucket="cks-new")["Contents"],
                   c.list_objects(Bucket="cks-new")["Contents"],
                   c.list_object_versions(Bucket="cks-new")["Versions"]):
        by_key = {o["Key"]: o for o in listed}
        assert by_key["with"]["ChecksumAlgorithm"] == ["SHA256"], by_key["with"]
        # Written without one: S3's default (test_default_crc64nvme).
        assert by_key["without"]["ChecksumAlgorithm"] == ["CRC64NVME"], by_key["without"]
    st, body, _ = signed_request(server.port, "GET", "/cks-new?list-type=2")
    assert b"<ChecksumType>FULL_OBJECT</ChecksumType>" in body, body


def crc64nvme_b64(data):
    return base64.b64encode(crc64nvme(data).to_bytes(8, "big")).decode()


def test_default_crc64nvme(server):
    """An object written without a checksum gets S3's default (AWS since December 2024):
    CRC-64/NVME of the whole object, in PutObject's answer, to HEAD and GET with checksum
    mode, in GetObjectAttributes and in listings; inline (kept nowhere, computed from the
    bytes) and erasure-coded (kept) alike, and the copy of such an object too. None covers
    a range; an explicit algorithm is the only one."""
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="ckdef")
    for size in (0, 1, 1000, 64 << 10, (64 << 10) + 1, 300_000, (1 << 20) + 3):
        data = os.urandom(size)
        key = "d%d" % size
        st, _, h = signed_request(server.port, "PUT", "/ckdef/" + key, data)
        want = crc64nvme_b64(data)
        assert st == 200 and h.get("x-amz-checksum-crc64nvme") == want, (size, h)
        assert h.get("x-amz-checksum-type") == "FULL_OBJECT"
        for method in ("HEAD", "GET"):
            st, body, h = signed_request(server.port, method, "/ckdef/" + key,
                                         headers={"x-amz-checksum-mode": "ENABLED"})
            assert st == 200 and h.get("x-amz-checksum-crc64nvme") == want, (size, method, h)
            assert h.get("x-amz-checksum-type") == "FULL_OBJECT"
            if method == "GET":
                assert hashlib.sha256(body).digest() == hashlib.sha256(data).digest()
        st, _, h = signed_request(server.port, "HEAD", "/ckdef/" + key)
        assert "x-amz-checksum-crc64nvme" not in h  # not asked for
        if size > 10:
            st, _, h = signed_request(server.port, "GET", "/ckdef/" + key,
                                      headers={"x-amz-checksum-mode": "ENABLED",
                                               "Range": "bytes=0-9"})
            assert st == 206 and "x-amz-checksum-crc64nvme" not in h
        st, body, _ = signed_request(server.port, "GET", "/ckdef/%s?attributes" % key,
                                     headers={"x-amz-object-attributes": "Checksum"})
        assert st == 200 and ("<ChecksumCRC64NVME>%s</ChecksumCRC64NVME>" % want).encode() in body
        # The copy of it has it too.
        st, body, _ = signed_request(server.port, "PUT", "/ckdef/c" + key,
                                     headers={"x-amz-copy-source": "/ckdef/" + key})
        assert st == 200 and ("<ChecksumCRC64NVME>%s</ChecksumCRC64NVME>" % want).encode() in body
        st, _, h = signed_request(server.port, "HEAD", "/ckdef/c" + key,
                                  headers={"x-amz-checksum-mode": "ENABLED"})
        assert h.get("x-amz-checksum-crc64nvme") == want, (size, h)
    listed = c.list_objects_v2(Bucket="ckdef")["Contents"]
    assert all(o.get("ChecksumAlgorithm") == ["CRC64NVME"] for o in listed), listed
    # An algorithm asked for is the object's only one.
    data = os.urandom(5000)
    c.put_object(Bucket="ckdef", Key="crc32", Body=data, ChecksumAlgorithm="CRC32")
    st, _, h = signed_request(server.port, "HEAD", "/ckdef/crc32",
                              headers={"x-amz-checksum-mode": "ENABLED"})
    assert h.get("x-amz-checksum-crc32") == crc32_b64(data)
    assert "x-amz-checksum-crc64nvme" not in h


def raw_put(server, key, body, headers, payload_hash):
    return signed_request(server.port, "PUT", "/cksum/" + key, body, headers, payload_hash)


def chunked(data, trailer):
    body = b""
    for i in range(0, len(data), 65536):
        piece = data[i:i + 65536]
        body += b"%x\r\n" % len(piece) + piece + b"\r\n"
    return body + b"0\r\n" + trailer + b"\r\n\r\n"


def test_checksum_trailers_and_mismatches(server):
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="cksum")
    data = os.urandom(200_000)
    good = crc32_b64(data)
    hdrs = {"x-amz-trailer": "x-amz-checksum-crc32", "content-encoding": "aws-chunked",
            "x-amz-decoded-content-length": str(len(data))}
    body = chunked(data, b"x-amz-checksum-crc32:" + good.encode())
    st, msg, h = raw_put(server, "trailer-ok", body, hdrs, "STREAMING-UNSIGNED-PAYLOAD-TRAILER")
    assert st == 200, msg
    assert h.get("x-amz-checksum-crc32") == good
    got = c.get_object(Bucket="cksum", Key="trailer-ok")["Body"].read()
    assert got == data
    # A wrong trailer value: 400 BadDigest and no object.
    bad = crc32_b64(data + b"x")
    body = chunked(data, b"x-amz-checksum-crc32:" + bad.encode())
    st, msg, _ = raw_put(server, "trailer-bad", body, hdrs, "STREAMING-UNSIGNED-PAYLOAD-TRAILER")
    assert st == 400 and b"<Code>BadDigest</Code>" in msg
    # A trailer value that is no CRC32 at all (not base64, or not 4 bytes): S3 answers
    # InvalidRequest (nothing was compared), not BadDigest.
    for junk in (b"!!!notbase64", base64.b64encode(b"\0" * 7)):
        body = chunked(data, b"x-amz-checksum-crc32:" + junk)
        st, msg, _ = raw_put(server, "trailer-junk", body, hdrs,
                             "STREAMING-UNSIGNED-PAYLOAD-TRAILER")
        assert st == 400 and b"<Code>InvalidRequest</Code>" in msg, (junk, msg)
        assert b"trailing header is invalid" in msg, msg
    # A checksum header as well as a checksum trailer: two checksums, refused as two
    # headers are (S3: "Expecting a single x-amz-checksum- header"), even when both hold.
    body = chunked(data, b"x-amz-checksum-crc32:" + good.encode())
    st, msg, _ = raw_put(server, "trailer-and-header", body,
                         dict(hdrs, **{"x-amz-checksum-crc32": good}),
                         "STREAMING-UNSIGNED-PAYLOAD-TRAILER")
    assert st == 400 and b"<Code>InvalidRequest</Code>" in msg, msg
    assert b"Expecting a single x-amz-checksum- header" in msg, msg
    # An announced trailer that never comes.
    body = chunked(data, b"")
    st, msg, _ = raw_put(server, "trailer-missing", body, hdrs, "STREAMING-UNSIGNED-PAYLOAD-TRAILER")
    assert st == 400
    # A wrong header value, and a SHA256 that does not match.
    st, msg, _ = raw_put(server, "hdr-bad", data, {"x-amz-checksum-crc32": bad}, "UNSIGNED-PAYLOAD")
    assert st == 400 and b"BadDigest" in msg
    wrong_sha = base64.b64encode(hashlib.sha256(b"other").digest()).decode()
    st, msg, _ = raw_put(server, "sha-bad", data, {"x-amz-checksum-sha256": wrong_sha},
                         "UNSIGNED-PAYLOAD")
    assert st == 400 and b"BadDigest" in msg
    # A checksum trailer x-amz-trailer did not announce (a wrong one, beside the announced
    # one, or with none announced) is refused, not passed unchecked.
    for key, extra, trailer in (
            ("undeclared-extra", hdrs,
             b"x-amz-checksum-crc32:" + good.encode() + b"\r\nx-amz-checksum-sha256:" +
             wrong_sha.encode()),
            ("undeclared-only", {k: v for k, v in hdrs.items() if k != "x-amz-trailer"},
             b"x-amz-checksum-crc32:" + bad.encode())):
        st, msg, _ = raw_put(server, key, chunked(data, trailer), extra,
                             "STREAMING-UNSIGNED-PAYLOAD-TRAILER")
        assert st == 400 and b"<Code>InvalidRequest</Code>" in msg, (key, msg)
        assert b"not announced" in msg, msg
    # The same in the body of a bucket setting (read whole, not streamed).
    tagging = (b'<Tagging><TagSet><Tag><Key>a</Key><Value>b</Value></Tag></TagSet>'
               b'</Tagging>')
    st, msg, _ = signed_request(
        server.port, "PUT", "/cksum?tagging", chunked(tagging, b"x-amz-checksum-crc32:" +
                                                      crc32_b64(b"other").encode()),
        {"content-encoding": "aws-chunked", "x-amz-decoded-content-length": str(len(tagging))},
        "STREAMING-UNSIGNED-PAYLOAD-TRAILER")
    assert st == 400 and b"not announced" in msg, msg
    # And a wrong Content-MD5 or checksum header on a setting's body: BadDigest.
    for h in ({"Content-MD5": base64.b64encode(hashlib.md5(b"other").digest()).decode()},
              {"x-amz-checksum-crc32": crc32_b64(b"other")}):
        st, msg, _ = signed_request(server.port, "PUT", "/cksum?tagging", tagging, h)
        assert st == 400 and b"<Code>BadDigest</Code>" in msg, (h, msg)
    with pytest.raises(ClientError) as e:  # none of them was applied
        c.get_bucket_tagging(Bucket="cksum")
    assert e.value.response["Error"]["Code"] == "NoSuchTagSet"
    keys = [o["Key"] for o in c.list_objects_v2(Bucket="cksum").get("Contents", [])]
    assert keys == ["trailer-ok"]
    # A trailer naming no checksum is refused.
    st, _, _ = raw_put(server, "odd", chunked(data, b"x-foo:1"), dict(hdrs, **{"x-amz-trailer": "x-foo"}),
                       "STREAMING-UNSIGNED-PAYLOAD-TRAILER")
    assert st == 400


NEWEST = r"""
import hashlib, os, sys, boto3
from botocore.config import Config
ep, ak, sk = sys.argv[1:4]
c = boto3.session.Session().client("s3", endpoint_url=ep, aws_access_key_id=ak,
    aws_secret_access_key=sk, region_name="us-east-1",
    config=Config(s3={"addressing_style": "path"}, response_checksum_validation="when_supported"))
c.create_bucket(Bucket="nkbucket")
data = os.urandom(1_500_000)
# SHA512: one of the algorithms S3 added later that this botocore computes itself (a trailer).
for algo in ("CRC32", "SHA1", "SHA256", "SHA512"):
    c.put_object(Bucket="nkbucket", Key=algo, Body=data, ChecksumAlgorithm=algo)
    # botocore validates the returned checksum against the body it reads.
    r = c.get_object(Bucket="nkbucket", Key=algo, ChecksumMode="ENABLED")
    assert hashlib.sha256(r["Body"].read()).digest() == hashlib.sha256(data).digest()
    assert r.get("Checksum" + algo), r
# The default: the newest botocore adds a CRC32 by itself.
c.put_object(Bucket="nkbucket", Key="default", Body=data)
h = c.head_object(Bucket="nkbucket", Key="default", ChecksumMode="ENABLED")
assert h.get("ChecksumCRC32"), h
# A multipart upload in SHA512 (COMPOSITE), parts and Complete through the SDK.
up = c.create_multipart_upload(Bucket="nkbucket", Key="mp512", ChecksumAlgorithm="SHA512")
parts = []
for n, piece in enumerate((data * 4, data[:123_457]), 1):
    r = c.upload_part(Bucket="nkbucket", Key="mp512", UploadId=up["UploadId"], PartNumber=n,
                      Body=piece, ChecksumAlgorithm="SHA512")
    parts.append({"PartNumber": n, "ETag": r["ETag"], "ChecksumSHA512": r["ChecksumSHA512"]})
r = c.complete_multipart_upload(Bucket="nkbucket", Key="mp512", UploadId=up["UploadId"],
                                MultipartUpload={"Parts": parts})
assert r["ChecksumSHA512"].endswith("-2"), r
got = c.get_object(Bucket="nkbucket", Key="mp512")["Body"].read()
assert got == data * 4 + data[:123_457]
print("ok")
"""


def test_checksums_newest_botocore(server):
    py = newest_python()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([py, "-c", NEWEST, server.endpoint, AK, SK], env=env,
                         capture_output=True, timeout=300)
    assert out.returncode == 0, out.stderr.decode()[-3000:]
    assert out.stdout.startswith(b"ok")
