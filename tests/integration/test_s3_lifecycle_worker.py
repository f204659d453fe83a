"""The lifecycle worker carries the rules out: on a node whose lifecycle day lasts 2
seconds (--lifecycle-day-seconds 2), objects a rule with Days=1 covers are gone within
a few days' worth of seconds, and nothing else is: expiration by prefix, tag and size,
delete markers in versioned buckets, noncurrent versions (NoncurrentDays,
NewerNoncurrentVersions), expired delete markers, incomplete uploads. Each test waits
for a state (bounded), never for a time. Debian's boto3 only: what the worker does does not
depend on the client, and the configuration requests the newest botocore shapes
differently (checksums instead of Content-MD5) run again in test_s3_lifecycle.py."""
import hashlib
import json
import time

import pytest

from conftest import Server, s3_client, signed_request

DAY_S = 2
WAIT_S = 60  # the state must come long before this; the bound only ends a failing test


@pytest.fixture
def lcserver(datadir):
    s = Server(datadir, extra=["--lifecycle-day-seconds", str(DAY_S)]).start()
    yield s
    s.stop()


def rules(c, bucket, *rs):
    c.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration={"Rules": list(rs)})


def wait_for(what, pred):
    deadline = time.time() + WAIT_S
    while time.time() < deadline:
        if pred():
            return
        time.sleep(0.25)
    pytest.fail("lifecycle did not get to: " + what)


def keys(c, bucket):
    return sorted(o["Key"] for o in c.list_objects_v2(Bucket=bucket).get("Contents", []))


def versions(c, bucket):
    r = c.list_object_versions(Bucket=bucket)
    return ([(v["Key"], v["VersionId"], v["IsLatest"]) for v in r.get("Versions", [])],
            [(d["Key"], d["VersionId"], d["IsLatest"]) for d in r.get("DeleteMarkers", [])])


def test_expiration_by_prefix_tag_and_size(lcserver):
    c = s3_client(lcserver.endpoint)
    c.create_bucket(Bucket="lcexp")
    rules(c, "lcexp",
          {"ID": "tmp", "Filter": {"Prefix": "tmp/"}, "Status": "Enabled",
           "Expiration": {"Days": 1}},
          {"ID": "tagged", "Filter": {"Tag": {"Key": "ttl", "Value": "short"}},
           "Status": "Enabled", "Expiration": {"Days": 1}},
          {"ID": "big", "Filter": {"And": {"Prefix": "data/", "ObjectSizeGreaterThan": 1000}},
           "Status": "Enabled", "Expiration": {"Days": 1}},
          {"ID": "off", "Filter": {"Prefix": "keep/"}, "Status": "Disabled",
           "Expiration": {"Days": 1}})
    body = b"k" * 5000
    for k in ("tmp/a", "tmp/b", "keep/a", "data/big", "data/small", "other"):
        c.put_object(Bucket="lcexp", Key=k, Body=body if k != "data/small" else b"small")
    c.put_object(Bucket="lcexp", Key="tagged", Body=b"t", Tagging="ttl=short")
    c.put_object(Bucket="lcexp", Key="other-tag", Body=b"t", Tagging="ttl=long")
    survivors = ["data/small", "keep/a", "other", "other-tag"]
    wait_for("only the uncovered objects left", lambda: keys(c, "lcexp") == survivors)
    for k in survivors:  # untouched, bytes and all
        got = c.get_object(Bucket="lcexp", Key=k)["Body"].read()
        assert hashlib.md5(got).hexdigest() == hashlib.md5(
            b"small" if k == "data/small" else b"t" if k == "other-tag" else body).hexdigest()


def test_versioned_expiration_leaves_a_marker_then_noncurrent_versions_go(lcserver):
    c = s3_client(lcserver.endpoint)
    c.create_bucket(Bucket="lcver")
    c.put_bucket_versioning(Bucket="lcver", VersioningConfiguration={"Status": "Enabled"})
    v1 = c.put_object(Bucket="lcver", Key="logs/a", Body=b"a")["VersionId"]
    # Expiring the current version of a versioned object makes it noncurrent (a marker on top).
    rules(c, "lcver", {"ID": "cur", "Filter": {"Prefix": "logs/"}, "Status": "Enabled",
                       "Expiration": {"Days": 1}})
    wait_for("a delete marker over logs/a", lambda: versions(c, "lcver")[1] != [])
    vs, dms = versions(c, "lcver")
    assert vs == [("logs/a", v1, False)] and dms[0][0] == "logs/a" and dms[0][2] is True
    assert c.get_object(Bucket="lcver", Key="logs/a", VersionId=v1)["Body"].read() == b"a"
    # Then: noncurrent versions after a day, keeping the newest one of them; and the
    # expired marker once it is alone.
    ids = [c.put_object(Bucket="lcver", Key="n", Body=b"%d" % i)["VersionId"] for i in range(4)]
    rules(c, "lcver",
          {"ID": "nc", "Filter": {"Prefix": "n"}, "Status": "Enabled",
           "NoncurrentVersionExpiration": {"NoncurrentDays": 1, "NewerNoncurrentVersions": 1}},
          {"ID": "logs", "Filter": {"Prefix": "logs/"}, "Status": "Enabled",
           "NoncurrentVersionExpiration": {"NoncurrentDays": 1},
           "Expiration": {"ExpiredObjectDeleteMarker": True}})
    wait_for("two versions of n and nothing of logs/a", lambda: versions(c, "lcver") == (
        [("n", ids[3], True), ("n", ids[2], False)], []))
    assert c.get_object(Bucket="lcver", Key="n", VersionId=ids[2])["Body"].read() == b"2"


def test_incomplete_uploads_are_aborted(lcserver):
    c = s3_client(lcserver.endpoint)
    c.create_bucket(Bucket="lcmpu")
    rules(c, "lcmpu", {"ID": "abort", "Filter": {"Prefix": "up/"}, "Status": "Enabled",
                       "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1}})
    gone = c.create_multipart_upload(Bucket="lcmpu", Key="up/x")["UploadId"]
    c.upload_part(Bucket="lcmpu", Key="up/x", UploadId=gone, PartNumber=1, Body=b"p" * 1000)
    kept = c.create_multipart_upload(Bucket="lcmpu", Key="other/x")["UploadId"]

    def uploads():
        return sorted(u["UploadId"] for u in c.list_multipart_uploads(Bucket="lcmpu")
                      .get("Uploads", []))
    wait_for("the upload under up/ aborted", lambda: uploads() == [kept])
    with pytest.raises(Exception):
        c.list_parts(Bucket="lcmpu", Key="up/x", UploadId=gone)


def test_expired_space_comes_back(lcserver):
    c = s3_client(lcserver.endpoint)
    c.create_bucket(Bucket="lcspace")

    def live():
        st, body, _ = signed_request(lcserver.port, "GET", "/_warmlake/stats")
        assert st == 200
        return json.loads(body)["total"]["live_bytes"]
    base = live()
    for i in range(3):
        c.put_object(Bucket="lcspace", Key="tmp/%d" % i, Body=b"s" * (2 << 20))
    assert live() - base >= 6 << 20
    rules(c, "lcspace", {"ID": "tmp", "Filter": {"Prefix": "tmp/"}, "Status": "Enabled",
                         "Expiration": {"Days": 1}})
    wait_for("the expired objects' space freed", lambda: live() - base < 1 << 20)
    assert keys(c, "lcspace") == []
