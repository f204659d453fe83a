"""Answers a fourth hostile probe (session 41) found wrong; each test says what S3 does."""
import hashlib
import http.client
import xml.etree.ElementTree as ET

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from conftest import AK, SK, s3_client


def presigner(server):
    return boto3.session.Session().client(
        "s3", endpoint_url=server.endpoint, aws_access_key_id=AK, aws_secret_access_key=SK,
        region_name="us-east-1",
        config=Config(signature_version="s3v4", s3={"addressing_style": "path"}))


def send(port, method, path, body, headers):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        c.request(method, path, body=body, headers=headers)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def test_a_presigned_puts_declared_body_hash_is_checked(server):
    """A presigned PUT's canonical request says UNSIGNED-PAYLOAD, but a client that sends
    x-amz-content-sha256 says what its body is: a body that does not match it was stored
    (200); it is refused as with header auth (400 XAmzContentSHA256Mismatch), nothing is
    stored, and a body that matches is."""
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="psha")
    url = presigner(server).generate_presigned_url(
        "put_object", Params={"Bucket": "psha", "Key": "k"}, ExpiresIn=600)
    path = url.split(str(server.port), 1)[1]
    declared = hashlib.sha256(b"abc").hexdigest()
    st, out = send(server.port, "PUT", path, b"abd", {"x-amz-content-sha256": declared})
    assert st == 400 and ET.fromstring(out).findtext("Code") == "XAmzContentSHA256Mismatch", out
    try:
        c.head_object(Bucket="psha", Key="k")
        assert False, "a refused body was stored"
    except ClientError as e:
        assert e.response["Error"]["Code"] in ("404", "NoSuchKey")
    st, out = send(server.port, "PUT", path, b"abc", {"x-amz-content-sha256": declared})
    assert st == 200, out
    got = c.get_object(Bucket="psha", Key="k")["Body"].read()
    assert hashlib.sha256(got).hexdigest() == declared
    # Without the header, or with UNSIGNED-PAYLOAD, a presigned PUT is unsigned as before.
    for extra in ({}, {"x-amz-content-sha256": "UNSIGNED-PAYLOAD"}):
        st, out = send(server.port, "PUT", path, b"free", extra)
        assert st == 200, out
        assert c.get_object(Bucket="psha", Key="k")["Body"].read() == b"free"


def test_a_copy_sources_errors_name_the_source(server):
    """A CopyObject whose source bucket or key is missing said NoSuchBucket naming the
    destination bucket, NoSuchKey naming the destination key: the error names what is
    missing, the source."""
    c = s3_client(server.endpoint, retry=False)
    c.create_bucket(Bucket="cpdst")
    for src, code, field, want in (({"Bucket": "cpnobucket", "Key": "src"}, "NoSuchBucket",
                                    "BucketName", "cpnobucket"),
                                   ({"Bucket": "cpdst", "Key": "nosrc"}, "NoSuchKey", "Key",
                                    "nosrc")):
        try:
            c.copy_object(Bucket="cpdst", Key="dst", CopySource=src)
            assert False, "copied from nothing"
        except ClientError as e:
            assert e.response["Error"]["Code"] == code
            assert e.response["Error"].get(field) == want, e.response["Error"]


def test_a_date_that_is_no_date_is_refused(server):
    """X-Amz-Date 20260230T...: strptime took February 30th and timegm rolled it over to
    March 2nd, a date the client never wrote. It is no valid date (403, S3's message for one),
    not a date whose skew or expiry is then weighed."""
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="pdate")
    url = presigner(server).generate_presigned_url(
        "get_object", Params={"Bucket": "pdate", "Key": "k"}, ExpiresIn=604800)
    path = url.split(str(server.port), 1)[1]
    import re
    bad = re.sub(r"X-Amz-Date=\d{8}T", "X-Amz-Date=20260230T", path)
    assert bad != path
    st, out = send(server.port, "GET", bad, None, {})
    assert st == 403, out
    assert b"requires a valid Date" in out, out
