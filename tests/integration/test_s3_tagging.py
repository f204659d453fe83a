"""Object and bucket tagging: x-amz-tagging on PUT, Copy and
CreateMultipartUpload, x-amz-tagging-count, Put/Get/DeleteObjectTagging and
BucketTagging, S3's limits. Debian's boto3, the newest botocore
(test_with_newest_botocore) and the aws CLI's s3api."""
import json
import os
import urllib.parse

import pytest
from botocore.exceptions import ClientError

from conftest import run_under_newest_botocore, s3_client, signed_request
from test_s3_gateway import aws



def tagset(d):
    return [{"Key": k, "Value": v} for k, v in d.items()]


def as_dict(ts):
    return {t["Key"]: t["Value"] for t in ts}


def code(e):
    return e.value.response["Error"]["Code"]


def test_object_tags(server):
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="tags")
    tags = {"project": "lake", "owner": "data team", "odd": "a=b/c:d +x@y", "empty": ""}
    c.put_object(Bucket="tags", Key="o", Body=b"data", Tagging=urllib.parse.urlencode(tags))
    assert as_dict(c.get_object_tagging(Bucket="tags", Key="o")["TagSet"]) == tags
    assert c.head_object(Bucket="tags", Key="o")["ResponseMetadata"]["HTTPHeaders"][
        "x-amz-tagging-count"] == "4"
    r = c.get_object(Bucket="tags", Key="o")
    assert r["TagCount"] == 4 and r["Body"].read() == b"data"
    # Replace, then delete; the data and its date stay.
    lm = c.head_object(Bucket="tags", Key="o")["LastModified"]
    c.put_object_tagging(Bucket="tags", Key="o", Tagging={"TagSet": tagset({"k": "v"})})
    assert as_dict(c.get_object_tagging(Bucket="tags", Key="o")["TagSet"]) == {"k": "v"}
    c.delete_object_tagging(Bucket="tags", Key="o")
    assert c.get_object_tagging(Bucket="tags", Key="o")["TagSet"] == []
    h = c.head_object(Bucket="tags", Key="o")
    assert "x-amz-tagging-count" not in h["ResponseMetadata"]["HTTPHeaders"]
    assert h["LastModified"] == lm
    with pytest.raises(ClientError) as e:
        c.get_object_tagging(Bucket="tags", Key="missing")
    assert code(e) == "NoSuchKey"


def test_tag_limits(server):
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="tags")
    c.put_object(Bucket="tags", Key="o", Body=b"x")
    # ... and S3's alphabet: letters, numbers, spaces and + - = . _ : / @ (its pattern
    # [\p{L}\p{Z}\p{N}_.:/=+\-@]*); "a#b" and "a|b" were kept.
    # More than 10 is BadRequest on AWS ("Object tags cannot be greater than 10"), on both
    # ways of setting them.
    eleven = {"k%d" % i: "v" for i in range(11)}
    with pytest.raises(ClientError) as e:
        c.put_object_tagging(Bucket="tags", Key="o", Tagging={"TagSet": tagset(eleven)})
    assert code(e) == "BadRequest"
    assert e.value.response["Error"]["Message"] == "Object tags cannot be greater than 10"
    with pytest.raises(ClientError) as e:
        c.put_object(Bucket="tags", Key="n", Body=b"x", Tagging=urllib.parse.urlencode(eleven))
    assert code(e) == "BadRequest"
    bad = [{"k" * 129: "v"}, {"k": "v" * 257},
           {"aws:reserved": "v"}, {"a#b": "v"}, {"k": "a|b"}, {"k": "tmp & co"}, {"k\t": "v"}]
    for t in bad:
        with pytest.raises(ClientError) as e:
            c.put_object_tagging(Bucket="tags", Key="o", Tagging={"TagSet": tagset(t)})
        assert code(e) == "InvalidTag", t
        with pytest.raises(ClientError) as e:
            c.put_object(Bucket="tags", Key="n", Body=b"x", Tagging=urllib.parse.urlencode(t))
        assert code(e) == "InvalidTag", t
    # x-amz-tagging that is no query string of distinct, named tags: InvalidArgument (as S3;
    # InvalidTag is for well-formed tags that break its rules). Empty pieces are no tags.
    for header in ("=v", "=", "a=1&a=2", "a=1&b=2&a=3", "a=%ZZ"):
        with pytest.raises(ClientError) as e:
            c.put_object(Bucket="tags", Key="n", Body=b"x", Tagging=header)
        assert code(e) == "InvalidArgument", header
    for header, want in (("&", {}), ("&&&", {}), ("a=1&&b=2&", {"a": "1", "b": "2"})):
        c.put_object(Bucket="tags", Key="amp", Body=b"x", Tagging=header)
        assert as_dict(c.get_object_tagging(Bucket="tags", Key="amp")["TagSet"]) == want, header
    with pytest.raises(ClientError) as e:
        c.put_object_tagging(Bucket="tags", Key="o", Tagging={
            "TagSet": [{"Key": "d", "Value": "1"}, {"Key": "d", "Value": "2"}]})
    assert code(e) == "InvalidTag"
    ok = {"k" * 128: "v" * 256, "\u00e9t\u00e9": "\u2603", "a+b-c=d.e_f:g/h@i j": "0 9"}
    c.put_object_tagging(Bucket="tags", Key="o", Tagging={"TagSet": tagset(ok)})
    assert as_dict(c.get_object_tagging(Bucket="tags", Key="o")["TagSet"]) == ok
    st, body, _ = signed_request(server.port, "PUT", "/tags/o?tagging", b"<Tagging><oops>")
    assert st == 400 and b"MalformedXML" in body
    # A Tagging without its TagSet does not validate (the tags stay); an empty TagSet is no tags.
    for bad in (b"<Tagging></Tagging>", b"<Tagging/>"):
        for path in ("/tags/o?tagging", "/tags?tagging"):
            st, body, _ = signed_request(server.port, "PUT", path, bad)
            assert st == 400 and b"MalformedXML" in body, (path, bad, body)
    assert as_dict(c.get_object_tagging(Bucket="tags", Key="o")["TagSet"]) == ok
    st, _, _ = signed_request(server.port, "PUT", "/tags/o?tagging", b"<Tagging><TagSet/></Tagging>")
    assert st == 200
    assert c.get_object_tagging(Bucket="tags", Key="o")["TagSet"] == []


def test_tags_through_copy_and_multipart(server):
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="tags")
    c.put_object(Bucket="tags", Key="src", Body=b"s", Tagging="a=1&b=2")
    c.copy_object(Bucket="tags", Key="c1", CopySource="tags/src")
    assert as_dict(c.get_object_tagging(Bucket="tags", Key="c1")["TagSet"]) == {"a": "1", "b": "2"}
    c.copy_object(Bucket="tags", Key="c2", CopySource="tags/src", TaggingDirective="REPLACE",
                  Tagging="z=9")
    assert as_dict(c.get_object_tagging(Bucket="tags", Key="c2")["TagSet"]) == {"z": "9"}
    c.copy_object(Bucket="tags", Key="c3", CopySource="tags/src", MetadataDirective="REPLACE",
                  Metadata={"m": "1"})
    assert as_dict(c.get_object_tagging(Bucket="tags", Key="c3")["TagSet"]) == {"a": "1", "b": "2"}
    up = c.create_multipart_upload(Bucket="tags", Key="mp", Tagging="mp=yes")["UploadId"]
    e = c.upload_part(Bucket="tags", Key="mp", UploadId=up, PartNumber=1, Body=b"p")["ETag"]
    c.complete_multipart_upload(Bucket="tags", Key="mp", UploadId=up,
                                MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e}]})
    assert as_dict(c.get_object_tagging(Bucket="tags", Key="mp")["TagSet"]) == {"mp": "yes"}


def test_bucket_tags(server):
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="btags")
    with pytest.raises(ClientError) as e:
        c.get_bucket_tagging(Bucket="btags")
    assert code(e) == "NoSuchTagSet"
    c.put_bucket_tagging(Bucket="btags", Tagging={"TagSet": tagset({"team": "ml", "cost": "42"})})
    assert as_dict(c.get_bucket_tagging(Bucket="btags")["TagSet"]) == {"team": "ml", "cost": "42"}
    with pytest.raises(ClientError) as e:
        c.put_bucket_tagging(Bucket="btags",
                             Tagging={"TagSet": tagset({"k%d" % i: "v" for i in range(51)})})
    # S3's answer to more than 50: BadRequest, as for more than 10 on an object.
    assert code(e) == "BadRequest"
    assert e.value.response["Error"]["Message"] == "Bucket tag count cannot be greater than 50"
    c.delete_bucket_tagging(Bucket="btags")
    with pytest.raises(ClientError) as e:
        c.get_bucket_tagging(Bucket="btags")
    assert code(e) == "NoSuchTagSet"
    # Tagging a bucket neither creates one nor touches another user's.
    with pytest.raises(ClientError) as e:
        c.put_bucket_tagging(Bucket="nonexistent", Tagging={"TagSet": tagset({"a": "b"})})
    assert code(e) == "NoSuchBucket"
    from conftest import AK2, SK2
    alt = s3_client(server.endpoint, AK2, SK2)
    with pytest.raises(ClientError) as e:
        alt.put_bucket_tagging(Bucket="btags", Tagging={"TagSet": tagset({"a": "b"})})
    assert code(e) == "AccessDenied"


def test_anonymous_cannot_read_tags(server):
    import urllib.request
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="tags")
    c.put_object(Bucket="tags", Key="pub", Body=b"x", ACL="public-read", Tagging="secret=1")
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(server.endpoint + "/tags/pub?tagging", timeout=10)
    assert e.value.code == 403


def test_aws_cli_tagging(server, datadir):
    assert aws(server, datadir, "s3api", "create-bucket", "--bucket", "clitags").returncode == 0
    body = os.path.join(datadir, "b")
    with open(body, "wb") as f:
        f.write(b"cli")
    assert aws(server, datadir, "s3api", "put-object", "--bucket", "clitags", "--key", "k",
               "--body", body, "--tagging", "x=1").returncode == 0
    r = aws(server, datadir, "s3api", "put-object-tagging", "--bucket", "clitags", "--key", "k",
            "--tagging", json.dumps({"TagSet": tagset({"cli": "yes"})}))
    assert r.returncode == 0, r.stderr
    r = aws(server, datadir, "s3api", "get-object-tagging", "--bucket", "clitags", "--key", "k")
    assert r.returncode == 0 and as_dict(json.loads(r.stdout)["TagSet"]) == {"cli": "yes"}
    r = aws(server, datadir, "s3api", "put-bucket-tagging", "--bucket", "clitags",
            "--tagging", json.dumps({"TagSet": tagset({"b": "1"})}))
    assert r.returncode == 0, r.stderr
    r = aws(server, datadir, "s3api", "get-bucket-tagging", "--bucket", "clitags")
    assert r.returncode == 0 and as_dict(json.loads(r.stdout)["TagSet"]) == {"b": "1"}


def test_with_newest_botocore(server):
    """This module again under the newest botocore."""
    run_under_newest_botocore("test_s3_tagging.py", 'aws_cli')


def test_longest_tags_and_big_heads_fit(server):
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="tags")
    # Ten tags of S3's longest, in four-byte characters, through XML and the header.
    big = {("\U0001f600" * 127) + str(i): "\U0001f601" * 256 for i in range(10)}
    c.put_object(Bucket="tags", Key="o", Body=b"x")
    c.put_object_tagging(Bucket="tags", Key="o", Tagging={"TagSet": tagset(big)})
    assert as_dict(c.get_object_tagging(Bucket="tags", Key="o")["TagSet"]) == big
    # Metadata, standard headers and tags together: stored means readable.
    meta = {"m%02d" % i: "v" * 60 for i in range(28)}
    c.put_object(Bucket="tags", Key="fat", Body=b"fat", Metadata=meta, CacheControl="c" * 3000,
                 ContentDisposition="d" * 2000, Tagging=urllib.parse.urlencode({"k": "v" * 256}))
    r = c.get_object(Bucket="tags", Key="fat")
    assert r["Body"].read() == b"fat" and r["Metadata"] == meta
    # Metadata, tags and ACL share a version's 16 KiB: the longest tags and 1.4 KB of new
    # metadata through a copy do not fit. The answer says so (it was EntityTooLarge, about
    # an object of one byte).
    with pytest.raises(ClientError) as e:
        c.copy_object(Bucket="tags", Key="o2", CopySource={"Bucket": "tags", "Key": "o"},
                      MetadataDirective="REPLACE", Metadata={"m%d" % i: "v" * 180 for i in range(8)})
    assert code(e) == "MetadataTooLarge"


def test_public_readers_do_not_see_tag_counts(server):
    import urllib.request
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="tags")
    c.put_object(Bucket="tags", Key="pub", Body=b"x", ACL="public-read", Tagging="secret=1")
    req = urllib.request.Request(server.endpoint + "/tags/pub", method="HEAD")
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.status == 200 and "x-amz-tagging-count" not in r.headers
    assert c.head_object(Bucket="tags", Key="pub")["ResponseMetadata"]["HTTPHeaders"][
        "x-amz-tagging-count"] == "1"


def test_tagging_answers_the_version_it_tagged(server):
    """PutObjectTagging and DeleteObjectTagging answer x-amz-version-id: the version whose tags
    changed, the current one when the request names none (S3 does; a probe saw none), "null"
    for a null version once the bucket has had versioning, and no header before."""
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="tagver")
    c.put_object(Bucket="tagver", Key="plain", Body=b"p")
    ts = {"TagSet": [{"Key": "a", "Value": "1"}]}
    assert "VersionId" not in c.put_object_tagging(Bucket="tagver", Key="plain", Tagging=ts)
    assert "VersionId" not in c.delete_object_tagging(Bucket="tagver", Key="plain")
    c.put_bucket_versioning(Bucket="tagver", VersioningConfiguration={"Status": "Enabled"})
    assert c.put_object_tagging(Bucket="tagver", Key="plain", Tagging=ts)["VersionId"] == "null"
    v1 = c.put_object(Bucket="tagver", Key="k", Body=b"1")["VersionId"]
    v2 = c.put_object(Bucket="tagver", Key="k", Body=b"2")["VersionId"]
    assert c.put_object_tagging(Bucket="tagver", Key="k", Tagging=ts)["VersionId"] == v2
    assert c.delete_object_tagging(Bucket="tagver", Key="k")["VersionId"] == v2
    got = c.put_object_tagging(Bucket="tagver", Key="k", VersionId=v1, Tagging=ts)
    assert got["VersionId"] == v1
    assert as_dict(c.get_object_tagging(Bucket="tagver", Key="k", VersionId=v1)["TagSet"]) == \
        {"a": "1"}
    assert c.get_object_tagging(Bucket="tagver", Key="k")["TagSet"] == []
