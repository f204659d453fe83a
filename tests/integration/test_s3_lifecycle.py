"""Lifecycle configuration: Put/Get/DeleteBucketLifecycleConfiguration with boto3
(Debian's, and the newest botocore via test_with_newest_botocore) and the aws CLI,
the refusals S3 gives (codes and messages), the digest S3 requires of the body,
the configuration's life with its bucket, and x-amz-expiration on PUT, GET and
HEAD of the objects an enabled Expiration rule covers: with a real day and with
the day a node shortens for tests (--lifecycle-day-seconds)."""
import base64
import calendar
import datetime
import email.utils
import hashlib
import json
import os
import re
import time
import urllib.error
import urllib.request

import pytest
from botocore.exceptions import ClientError

from conftest import AK2, SK2, Server, run_under_newest_botocore, s3_client, signed_request
from test_s3_gateway import aws

NS = 'xmlns="http://s3.amazonaws.com/doc/2006-03-01/"'
DAY = 86400

RULES = [
    {"ID": "logs", "Filter": {"Prefix": "logs/"}, "Status": "Enabled",
     "Expiration": {"Days": 30},
     "NoncurrentVersionExpiration": {"NoncurrentDays": 7, "NewerNoncurrentVersions": 3},
     "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 2}},
    {"ID": "scratch", "Status": "Disabled",
     "Filter": {"And": {"Prefix": "tmp/", "Tags": [{"Key": "class", "Value": "scratch"}],
                        "ObjectSizeGreaterThan": 100, "ObjectSizeLessThan": 1000}},
     "Expiration": {"Date": datetime.datetime(2099, 11, 10, tzinfo=datetime.timezone.utc)}},
    {"Filter": {"Prefix": ""}, "Status": "Enabled",
     "Expiration": {"ExpiredObjectDeleteMarker": True}},
    {"ID": "tagged", "Filter": {"Tag": {"Key": "k", "Value": "v"}}, "Status": "Enabled",
     "Expiration": {"Days": 1}},
    {"ID": "small", "Filter": {"ObjectSizeLessThan": 10}, "Status": "Enabled",
     "Expiration": {"Days": 5}},
]


def code(e):
    return e.value.response["Error"]["Code"]


def md5_header(body):
    return {"Content-MD5": base64.b64encode(hashlib.md5(body).digest()).decode()}


def put_raw(server, bucket, xml, headers=None):
    body = xml.encode() if isinstance(xml, str) else xml
    h = md5_header(body) if headers is None else headers
    return signed_request(server.port, "PUT", "/%s?lifecycle" % bucket, body, h)


def error_of(body):
    c = re.search(rb"<Code>(.*?)</Code>", body)
    m = re.search(rb"<Message>(.*?)</Message>", body)
    return (c.group(1).decode() if c else None, m.group(1).decode() if m else None)


def test_lifecycle_api(server, datadir):
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="lc-api")
    with pytest.raises(ClientError) as e:
        c.get_bucket_lifecycle_configuration(Bucket="lc-api")
    assert code(e) == "NoSuchLifecycleConfiguration"
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
    sent = {}

    def capture(request, **kwargs):
        sent.update({k.lower(): v for k, v in request.headers.items()})
    c.meta.events.register("before-send.s3.PutBucketLifecycleConfiguration", capture)
    c.put_bucket_lifecycle_configuration(Bucket="lc-api",
                                         LifecycleConfiguration={"Rules": RULES})
    # Whichever this botocore sends (Content-MD5, or a flexible checksum since 1.36), it went.
    assert "content-md5" in sent or any(k.startswith("x-amz-checksum-") for k in sent), sent
    got = c.get_bucket_lifecycle_configuration(Bucket="lc-api")["Rules"]
    assert len(got) == 5
    assert got[0] == RULES[0]
    assert got[1]["Filter"] == RULES[1]["Filter"] and got[1]["Status"] == "Disabled"
    assert got[1]["Expiration"]["Date"] == RULES[1]["Expiration"]["Date"]
    # A rule sent without an ID gets one, and keeps it.
    assert got[2]["ID"] == "rule-3"
    assert got[2]["Expiration"] == {"ExpiredObjectDeleteMarker": True}
    assert got[3]["Filter"] == {"Tag": {"Key": "k", "Value": "v"}}
    assert got[4]["Filter"] == {"ObjectSizeLessThan": 10}
    # A second PUT replaces the whole configuration.
    c.put_bucket_lifecycle_configuration(Bucket="lc-api", LifecycleConfiguration={"Rules": [
        {"ID": "only", "Prefix": "a/", "Status": "Enabled", "Expiration": {"Days": 1}}]})
    got = c.get_bucket_lifecycle_configuration(Bucket="lc-api")["Rules"]
    assert got == [{"ID": "only", "Prefix": "a/", "Status": "Enabled", "Expiration": {"Days": 1}}]
    # It survives a restart of the node.
    server.stop()
    server.start()
    c = s3_client(server.endpoint)
    assert c.get_bucket_lifecycle_configuration(Bucket="lc-api")["Rules"] == got
    r = c.delete_bucket_lifecycle(Bucket="lc-api")
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 204
    with pytest.raises(ClientError) as e:
        c.get_bucket_lifecycle_configuration(Bucket="lc-api")
    assert code(e) == "NoSuchLifecycleConfiguration"
    # Deleting what is not there is still 204, as S3.
    assert c.delete_bucket_lifecycle(Bucket="lc-api")["ResponseMetadata"]["HTTPStatusCode"] == 204
    with pytest.raises(ClientError) as e:
        c.get_bucket_lifecycle_configuration(Bucket="no-such-bucket")
    assert code(e) == "NoSuchBucket"


def test_configuration_goes_with_its_bucket(server):
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="lc-gone")
    c.put_bucket_lifecycle_configuration(Bucket="lc-gone", LifecycleConfiguration={"Rules": [
        {"ID": "r", "Filter": {}, "Status": "Enabled", "Expiration": {"Days": 1}}]})
    c.delete_bucket(Bucket="lc-gone")
    c.create_bucket(Bucket="lc-gone")
    with pytest.raises(ClientError) as e:
        c.get_bucket_lifecycle_configuration(Bucket="lc-gone")
    assert code(e) == "NoSuchLifecycleConfiguration"
    c.put_object(Bucket="lc-gone", Key="k", Body=b"x")
    assert "Expiration" not in c.head_object(Bucket="lc-gone", Key="k")


def test_owner_only(server):
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="lc-owned", ACL="public-read")
    rules = {"Rules": [{"ID": "r", "Filter": {}, "Status": "Enabled", "Expiration": {"Days": 1}}]}
    c.put_bucket_lifecycle_configuration(Bucket="lc-owned", LifecycleConfiguration=rules)
    other = s3_client(server.endpoint, AK2, SK2)
    for call in (lambda: other.get_bucket_lifecycle_configuration(Bucket="lc-owned"),
                 lambda: other.put_bucket_lifecycle_configuration(
                     Bucket="lc-owned", LifecycleConfiguration=rules),
                 lambda: other.delete_bucket_lifecycle(Bucket="lc-owned")):
        with pytest.raises(ClientError) as e:
            call()
        assert code(e) == "AccessDenied"
    # Anonymous, on a public-read bucket: the configuration is not part of what anyone may read.
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(server.endpoint + "/lc-owned?lifecycle", timeout=10)
    assert e.value.code == 403
    assert c.get_bucket_lifecycle_configuration(Bucket="lc-owned")["Rules"][0]["ID"] == "r"


# (rules, code, message): what boto3 can send; S3's codes and wording.
BOTO_REFUSALS = [
    ([{"ID": "a" * 256, "Filter": {}, "Status": "Enabled", "Expiration": {"Days": 1}}],
     "InvalidArgument", "ID length should not exceed allowed limit of 255"),
    ([{"ID": "x", "Filter": {"Prefix": "a"}, "Status": "Enabled", "Expiration": {"Days": 1}},
      {"ID": "x", "Filter": {"Prefix": "b"}, "Status": "Disabled", "Expiration": {"Days": 2}}],
     "InvalidArgument", "Rule ID must be unique. Found same ID for more than one rule"),
    ([{"ID": "x", "Filter": {}, "Status": "invalid", "Expiration": {"Days": 1}}],
     "MalformedXML", None),
    ([{"ID": "x", "Filter": {}, "Status": "Enabled", "Expiration": {"Days": 0}}],
     "InvalidArgument", "'Days' for Expiration action must be a positive integer"),
    ([{"ID": "x", "Filter": {}, "Status": "Enabled", "Expiration": {
        "Date": datetime.datetime(2099, 11, 10, 12, tzinfo=datetime.timezone.utc)}}],
     "InvalidArgument", "'Date' must be at midnight GMT"),
    ([{"ID": "x", "Filter": {}, "Status": "Enabled"}],
     "InvalidRequest", "At least one action needs to be specified in a rule"),
    ([{"ID": "x", "Status": "Enabled", "Expiration": {"Days": 1}}], "MalformedXML", None),
    ([{"ID": "x", "Prefix": "a", "Filter": {"Prefix": "a"}, "Status": "Enabled",
       "Expiration": {"Days": 1}}], "MalformedXML", None),
    ([{"ID": "x", "Filter": {}, "Status": "Enabled",
       "Expiration": {"Days": 1, "ExpiredObjectDeleteMarker": True}}], "MalformedXML", None),
    ([{"ID": "x", "Filter": {}, "Status": "Enabled",
       "NoncurrentVersionExpiration": {"NoncurrentDays": 0}}], "InvalidArgument",
     "'NoncurrentDays' for NoncurrentVersionExpiration action must be a positive integer"),
    ([{"ID": "x", "Filter": {}, "Status": "Enabled",
       "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 0}}], "InvalidArgument",
     "'DaysAfterInitiation' for AbortIncompleteMultipartUpload action must be a positive "
     "integer"),
    ([{"ID": "x", "Filter": {"ObjectSizeGreaterThan": 10, "ObjectSizeLessThan": 5},
       "Status": "Enabled", "Expiration": {"Days": 1}}], "MalformedXML", None),
    ([{"ID": "x", "Filter": {"And": {"ObjectSizeGreaterThan": 10, "ObjectSizeLessThan": 5}},
       "Status": "Enabled", "Expiration": {"Days": 1}}], "InvalidArgument",
     "'ObjectSizeGreaterThan' must be less than 'ObjectSizeLessThan'"),
    ([{"ID": "r%d" % i, "Filter": {}, "Status": "Enabled", "Expiration": {"Days": 1}}
      for i in range(1001)], "InvalidArgument",
     "Lifecycle configuration allows a maximum of 1000 rules"),
    ([{"ID": "x", "Filter": {}, "Status": "Enabled",
       "Transitions": [{"Days": 30, "StorageClass": "GLACIER"}]}], "NotImplemented", None),
]


@pytest.mark.parametrize("rules,want,msg", BOTO_REFUSALS)
def test_refusals(server, rules, want, msg):
    c = s3_client(server.endpoint)
    try:
        c.create_bucket(Bucket="lc-bad")
    except ClientError:
        pass
    with pytest.raises(ClientError) as e:
        c.put_bucket_lifecycle_configuration(Bucket="lc-bad",
                                             LifecycleConfiguration={"Rules": rules})
    assert code(e) == want
    if msg:
        assert e.value.response["Error"]["Message"] == msg
    # Nothing was stored.
    with pytest.raises(ClientError) as e:
        c.get_bucket_lifecycle_configuration(Bucket="lc-bad")
    assert code(e) == "NoSuchLifecycleConfiguration"


RAW_REFUSALS = [
    ("<LifecycleConfiguration %s><Rule>" % NS, "MalformedXML"),
    ("<LifecycleConfiguration %s></LifecycleConfiguration>" % NS, "MalformedXML"),
    ('<!DOCTYPE d [<!ENTITY e "x">]><LifecycleConfiguration><Rule><ID>&e;</ID><Filter/>'
     "<Status>Enabled</Status><Expiration><Days>1</Days></Expiration></Rule>"
     "</LifecycleConfiguration>", "MalformedXML"),
    # A Filter holds one predicate: several need an And.
    ("<LifecycleConfiguration><Rule><Filter><Prefix>a</Prefix><Tag><Key>k</Key>"
     "<Value>v</Value></Tag></Filter><Status>Enabled</Status><Expiration><Days>1</Days>"
     "</Expiration></Rule></LifecycleConfiguration>", "MalformedXML"),
    ("<LifecycleConfiguration><Rule><Filter/><Status>Enabled</Status><Expiration><Days>1</Days>"
     "<Date>2099-01-01T00:00:00Z</Date></Expiration></Rule></LifecycleConfiguration>",
     "MalformedXML"),
    ("<LifecycleConfiguration><Rule><Filter/><Status>Enabled</Status><Expiration><Days>x</Days>"
     "</Expiration></Rule></LifecycleConfiguration>", "MalformedXML"),
    ("<LifecycleConfiguration><Rule><Filter><Tag><Key>k</Key><Value>v</Value></Tag></Filter>"
     "<Status>Enabled</Status><Expiration><ExpiredObjectDeleteMarker>true"
     "</ExpiredObjectDeleteMarker></Expiration></Rule></LifecycleConfiguration>",
     "InvalidRequest"),
]


@pytest.mark.parametrize("xml,want", RAW_REFUSALS)
def test_raw_refusals(server, xml, want):
    s3_client(server.endpoint).create_bucket(Bucket="lc-raw")
    st, body, _ = put_raw(server, "lc-raw", xml)
    assert st == 400 and error_of(body)[0] == want, body


def test_body_digest_required(server):
    """S3 wants the body's Content-MD5 or an x-amz-checksum-*, and checks it."""
    s3_client(server.endpoint).create_bucket(Bucket="lc-md5")
    xml = ("<LifecycleConfiguration %s><Rule><ID>r</ID><Filter></Filter><Status>Enabled</Status>"
           "<Expiration><Days>1</Days></Expiration></Rule></LifecycleConfiguration>" % NS)
    body = xml.encode()
    st, resp, _ = put_raw(server, "lc-md5", body, {})
    assert st == 400
    assert error_of(resp) == ("InvalidRequest", "Missing required header for this request: "
                                                "Content-MD5 OR x-amz-checksum-*")
    st, resp, _ = put_raw(server, "lc-md5", body, md5_header(body + b" "))
    assert st == 400 and error_of(resp)[0] == "BadDigest"
    st, resp, _ = put_raw(server, "lc-md5", body, {"Content-MD5": "nope"})
    assert st == 400 and error_of(resp)[0] == "InvalidDigest"
    st, resp, _ = put_raw(server, "lc-md5", body, {"x-amz-checksum-crc32": "AAAAAA=="})
    assert st == 400 and error_of(resp)[0] == "BadDigest"
    sha = base64.b64encode(hashlib.sha256(body).digest()).decode()
    st, resp, _ = put_raw(server, "lc-md5", body, {"x-amz-checksum-sha256": sha})
    assert st == 200, resp
    # Too big for any configuration S3 takes.
    big = body.replace(b"<ID>r</ID>", b"<ID>" + b"a" * (1 << 20) + b"</ID>")
    st, resp, _ = put_raw(server, "lc-md5", big)
    assert st == 400 and error_of(resp)[0] == "MalformedXML"
    # The stored configuration is the canonical form of what was sent.
    st, resp, hdrs = signed_request(server.port, "GET", "/lc-md5?lifecycle")
    assert st == 200 and resp.startswith(b"<?xml")
    assert b"<Rule><ID>r</ID><Filter></Filter><Status>Enabled</Status>" in resp


def expiry_of(header):
    m = re.fullmatch(r'expiry-date="([^"]+)", rule-id="([^"]*)"', header)
    assert m, header
    return calendar.timegm(email.utils.parsedate_tz(m.group(1))[:9]), m.group(2)


def next_midnight(t, days, day=DAY):
    return ((t + days * day) // day + 1) * day


def test_expiration_header(server):
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="lc-exp")
    c.put_bucket_lifecycle_configuration(Bucket="lc-exp", LifecycleConfiguration={"Rules": [
        {"ID": "pics rule/1", "Filter": {"Prefix": "pics/"}, "Status": "Enabled",
         "Expiration": {"Days": 3}},
        {"ID": "off", "Filter": {"Prefix": "off/"}, "Status": "Disabled",
         "Expiration": {"Days": 1}},
        {"ID": "tagged", "Filter": {"And": {"Prefix": "t/", "Tags": [
            {"Key": "class", "Value": "tmp + co"}]}}, "Status": "Enabled",
         "Expiration": {"Days": 1}},
        {"ID": "big", "Filter": {"ObjectSizeGreaterThan": 100}, "Status": "Enabled",
         "Expiration": {"Date": datetime.datetime(2099, 11, 10,
                                                  tzinfo=datetime.timezone.utc)}},
        {"ID": "markers", "Filter": {}, "Status": "Enabled",
         "Expiration": {"ExpiredObjectDeleteMarker": True}},
    ]})
    r = c.put_object(Bucket="lc-exp", Key="pics/a.jpg", Body=b"img")
    t, rule = expiry_of(r["Expiration"])
    assert rule == "pics%20rule%2F1"  # URL-encoded, as S3 says it is
    h = c.head_object(Bucket="lc-exp", Key="pics/a.jpg")
    mtime = calendar.timegm(h["LastModified"].utctimetuple())
    assert t == next_midnight(mtime, 3)
    assert expiry_of(h["Expiration"]) == (t, rule)
    g = c.get_object(Bucket="lc-exp", Key="pics/a.jpg")
    assert expiry_of(g["Expiration"]) == (t, rule) and g["Body"].read() == b"img"
    # Not covered: another prefix, a disabled rule, a delete-marker rule only.
    for key in ("other/a", "off/a"):
        assert "Expiration" not in c.put_object(Bucket="lc-exp", Key=key, Body=b"x")
        assert "Expiration" not in c.head_object(Bucket="lc-exp", Key=key)
    # Tags: covered once the object carries the rule's tag (at PUT, or set later).
    assert "Expiration" not in c.put_object(Bucket="lc-exp", Key="t/1", Body=b"x")
    r = c.put_object(Bucket="lc-exp", Key="t/2", Body=b"x", Tagging="class=tmp%20%2B%20co")
    assert expiry_of(r["Expiration"])[1] == "tagged"
    c.put_object_tagging(Bucket="lc-exp", Key="t/1", Tagging={"TagSet": [
        {"Key": "class", "Value": "tmp + co"}]})
    assert expiry_of(c.head_object(Bucket="lc-exp", Key="t/1")["Expiration"])[1] == "tagged"
    c.delete_object_tagging(Bucket="lc-exp", Key="t/1")
    assert "Expiration" not in c.head_object(Bucket="lc-exp", Key="t/1")
    # Size and Date: the date itself. Where two rules cover an object, the earlier date.
    r = c.put_object(Bucket="lc-exp", Key="big", Body=b"x" * 101)
    assert expiry_of(r["Expiration"]) == (
        calendar.timegm((2099, 11, 10, 0, 0, 0)), "big")
    r = c.put_object(Bucket="lc-exp", Key="pics/big", Body=b"x" * 101)
    assert expiry_of(r["Expiration"])[1] == "pics%20rule%2F1"
    # CompleteMultipartUpload answers with it too, as S3 does.
    up = c.create_multipart_upload(Bucket="lc-exp", Key="pics/mpu")["UploadId"]
    etag = c.upload_part(Bucket="lc-exp", Key="pics/mpu", UploadId=up, PartNumber=1,
                         Body=b"p")["ETag"]
    r = c.complete_multipart_upload(Bucket="lc-exp", Key="pics/mpu", UploadId=up,
                                    MultipartUpload={"Parts": [{"ETag": etag, "PartNumber": 1}]})
    assert expiry_of(r["Expiration"])[1] == "pics%20rule%2F1"
    assert expiry_of(c.head_object(Bucket="lc-exp", Key="pics/mpu")["Expiration"]) == \
        expiry_of(r["Expiration"])
    # Raw header text, as a client sees it.
    st, _, hdrs = signed_request(server.port, "HEAD", "/lc-exp/big")
    assert st == 200
    assert hdrs["x-amz-expiration"] == \
        'expiry-date="Tue, 10 Nov 2099 00:00:00 GMT", rule-id="big"'
    # A new configuration is seen at once (the parsed one is cached by its version).
    c.put_bucket_lifecycle_configuration(Bucket="lc-exp", LifecycleConfiguration={"Rules": [
        {"ID": "five", "Filter": {"Prefix": "pics/"}, "Status": "Enabled",
         "Expiration": {"Days": 5}}]})
    h = c.head_object(Bucket="lc-exp", Key="pics/a.jpg")
    assert expiry_of(h["Expiration"]) == (next_midnight(mtime, 5), "five")
    # The configuration gone, the header goes.
    c.delete_bucket_lifecycle(Bucket="lc-exp")
    assert "Expiration" not in c.head_object(Bucket="lc-exp", Key="pics/a.jpg")
    assert "Expiration" not in c.put_object(Bucket="lc-exp", Key="pics/b", Body=b"x")


@pytest.mark.parametrize("how", ["flag", "ini"])
def test_short_lifecycle_day(datadir, how):
    """--lifecycle-day-seconds 2 (or [server] lifecycle_day_seconds = 2): the worker's day
    lasts 2 s; x-amz-expiration keeps S3's real dates (as RGW's rgw_lc_debug_interval:
    clients and suites compare it with real days)."""
    extra = ["--lifecycle-day-seconds", "2"]
    if how == "ini":
        ini = os.path.join(datadir, "lc.ini")
        with open(ini, "w") as f:
            f.write("[server]\nlifecycle_day_seconds = 2\n")
        extra = ["--config", ini]
    s = Server(datadir, extra=extra).start()
    try:
        c = s3_client(s.endpoint)
        c.create_bucket(Bucket="lc-short")
        c.put_bucket_lifecycle_configuration(Bucket="lc-short", LifecycleConfiguration={
            "Rules": [{"ID": "two", "Filter": {}, "Status": "Enabled",
                       "Expiration": {"Days": 2}}]})
        c.put_object(Bucket="lc-short", Key="k", Body=b"x")
        h = c.head_object(Bucket="lc-short", Key="k")
        mtime = calendar.timegm(h["LastModified"].utctimetuple())
        t, rule = expiry_of(h["Expiration"])
        assert rule == "two" and t == next_midnight(mtime, 2)
        deadline = time.time() + 60  # gone after two 2-second days; the bound ends a failure
        while c.list_objects_v2(Bucket="lc-short")["KeyCount"] and time.time() < deadline:
            time.sleep(0.25)
        assert c.list_objects_v2(Bucket="lc-short")["KeyCount"] == 0
    finally:
        s.stop()


def test_aws_cli_lifecycle(server, datadir):
    assert aws(server, datadir, "s3api", "create-bucket", "--bucket", "lc-cli").returncode == 0
    r = aws(server, datadir, "s3api", "get-bucket-lifecycle-configuration", "--bucket", "lc-cli")
    assert r.returncode != 0 and b"NoSuchLifecycleConfiguration" in r.stderr
    cfg = {"Rules": [{"ID": "cli", "Filter": {"Prefix": "logs/"}, "Status": "Enabled",
                      "Expiration": {"Days": 7}}]}
    r = aws(server, datadir, "s3api", "put-bucket-lifecycle-configuration", "--bucket", "lc-cli",
            "--lifecycle-configuration", json.dumps(cfg))
    assert r.returncode == 0, r.stderr
    r = aws(server, datadir, "s3api", "get-bucket-lifecycle-configuration", "--bucket", "lc-cli")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["Rules"] == cfg["Rules"]
    bad = {"Rules": [{"ID": "cli", "Filter": {}, "Status": "Enabled", "Expiration": {"Days": 0}}]}
    r = aws(server, datadir, "s3api", "put-bucket-lifecycle-configuration", "--bucket", "lc-cli",
            "--lifecycle-configuration", json.dumps(bad))
    assert r.returncode != 0 and b"InvalidArgument" in r.stderr
    body = os.path.join(datadir, "obj")
    with open(body, "wb") as f:
        f.write(b"cli")
    r = aws(server, datadir, "s3api", "put-object", "--bucket", "lc-cli", "--key", "logs/x",
            "--body", body)
    assert r.returncode == 0 and 'rule-id=\\"cli\\"' in r.stdout.decode(), r.stdout
    r = aws(server, datadir, "s3api", "delete-bucket-lifecycle", "--bucket", "lc-cli")
    assert r.returncode == 0, r.stderr
    r = aws(server, datadir, "s3api", "get-bucket-lifecycle-configuration", "--bucket", "lc-cli")
    assert r.returncode != 0 and b"NoSuchLifecycleConfiguration" in r.stderr


def test_with_newest_botocore(server):
    """This module again under the newest botocore (flexible checksums instead of
    Content-MD5 since botocore 1.36)."""
    # (Not the lifecycle day tests: they wait on the server's worker, whatever the client.)
    run_under_newest_botocore("test_s3_lifecycle.py", "aws_cli or short_lifecycle_day")
