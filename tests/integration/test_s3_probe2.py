"""Answers a second hostile probe found wrong, each checked against what AWS S3
documents (or, where S3 says nothing, the RFCs); each test says which. Runs under
Debian's boto3."""
import base64
import datetime
import hashlib
import hmac
import json
import socket
import xml.etree.ElementTree as ET

from botocore.exceptions import ClientError

from conftest import AK, AK2, SK, SK2, recv_to_close, s3_client, signed_request
from test_s3_post import form_post


def code_of(body):
    return ET.fromstring(body).findtext("Code")


def md5_of(b):
    return base64.b64encode(hashlib.md5(b).digest()).decode()


def signed_form(bucket, conditions, fields):
    """POST form fields (in order) for a SigV4 policy of conditions, signed with AK/SK."""
    now = datetime.datetime.now(datetime.timezone.utc)
    cred = "%s/%s/us-east-1/s3/aws4_request" % (AK, now.strftime("%Y%m%d"))
    amz = now.strftime("%Y%m%dT%H%M%SZ")
    policy = {"expiration": (now + datetime.timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%S.000Z"),
              "conditions": [{"bucket": bucket}, {"x-amz-algorithm": "AWS4-HMAC-SHA256"},
                             {"x-amz-credential": cred}, {"x-amz-date": amz}] + conditions}
    b64 = base64.b64encode(json.dumps(policy).encode()).decode()
    k = ("AWS4" + SK).encode()
    for part in (now.strftime("%Y%m%d"), "us-east-1", "s3", "aws4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    sig = hmac.new(k, b64.encode(), hashlib.sha256).hexdigest()
    return [("x-amz-algorithm", "AWS4-HMAC-SHA256"), ("x-amz-credential", cred),
            ("x-amz-date", amz), ("policy", b64), ("x-amz-signature", sig)] + list(fields)


def test_post_policy_content_type_list_each_value_must_match(server):
    """AWS (sigv4-HTTPPOSTConstructPolicy, "Matching Content-Types in a Comma-Separated
    List"): a starts-with condition on Content-Type holds for each value of a comma-separated
    list, so image/jpg,text/plain does not pass ["starts-with", "$Content-Type", "image/"].
    Else a policy meant to allow only images stores "image/png, text/html", which a browser
    takes as text/html (the last valid type of the list)."""
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="post")
    conds = [["starts-with", "$key", "u/"], ["starts-with", "$Content-Type", "image/"]]
    ok = signed_form("post", conds, [("key", "u/ok"),
                                     ("Content-Type", "image/jpg,image/png,image/gif")])
    assert form_post(server, "post", ok, "a", b"x")[0] == 204
    for n, ct in enumerate(("image/jpg,text/plain", "image/png, text/html", "image/png,")):
        f = signed_form("post", conds, [("key", "u/bad%d" % n), ("Content-Type", ct)])
        st, body, _ = form_post(server, "post", f, "a", b"x")
        assert st == 403 and code_of(body) == "AccessDenied", (ct, st, body)
    # An exact match is still a plain comparison of the whole value.
    eq = signed_form("post", [["starts-with", "$key", "u/"], {"Content-Type": "image/a,image/b"}],
                     [("key", "u/eq"), ("Content-Type", "image/a,image/b")])
    assert form_post(server, "post", eq, "a", b"x")[0] == 204
    keys = sorted(o["Key"] for o in c.list_objects_v2(Bucket="post")["Contents"])
    assert keys == ["u/eq", "u/ok"]


def test_user_metadata_limit_counts_names_and_values(server):
    """AWS (UsingMetadata): user metadata is limited to 2 KB, "measured by taking the sum of
    the number of bytes in the UTF-8 encoding of each key and value" (the name after
    x-amz-meta-). Exactly 2048 bytes is allowed, 2049 is 400 MetadataTooLarge."""
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="meta")
    c.put_object(Bucket="meta", Key="one", Body=b"x", Metadata={"a": "v" * 2047})
    assert c.head_object(Bucket="meta", Key="one")["Metadata"] == {"a": "v" * 2047}
    many = {"k%02d" % i: "v" * 61 for i in range(32)}  # 32 * (3 + 61) = 2048
    c.put_object(Bucket="meta", Key="many", Body=b"x", Metadata=many)
    assert c.head_object(Bucket="meta", Key="many")["Metadata"] == many
    for md in ({"a": "v" * 2048}, dict(many, k00="v" * 62)):
        try:
            c.put_object(Bucket="meta", Key="big", Body=b"x", Metadata=md)
            raise AssertionError("2049 bytes of metadata accepted")
        except ClientError as e:
            assert e.response["Error"]["Code"] == "MetadataTooLarge"
    # The same limit on the other writes that take x-amz-meta-*.
    c.copy_object(Bucket="meta", Key="copy", CopySource="meta/one", Metadata=many,
                  MetadataDirective="REPLACE")
    assert c.head_object(Bucket="meta", Key="copy")["Metadata"] == many
    up = c.create_multipart_upload(Bucket="meta", Key="mpu", Metadata=many)["UploadId"]
    c.abort_multipart_upload(Bucket="meta", Key="mpu", UploadId=up)


def raw_get(port, path, headers):
    """The response head of an unsigned GET as sent on the wire (a public object)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    try:
        req = "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n" % (path, port)
        req += "".join("%s: %s\r\n" % kv for kv in headers.items()) + "Connection: close\r\n\r\n"
        s.sendall(req.encode())
        data = recv_to_close(s)
    finally:
        s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    return int(lines[0].split()[1]), {l.split(":", 1)[0].lower(): l.split(":", 1)[1].strip()
                                      for l in lines[1:]}, body


def test_not_modified_and_no_content_carry_no_wrong_content_length(server):
    """RFC 9110 8.6: a server MUST NOT send Content-Length in a 304 unless it equals the
    length a 200 would have had, nor in any 204. "Content-Length: 0" on a 304 for an
    11-byte object told caches the object had become empty."""
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="nmod")
    etag = c.put_object(Bucket="nmod", Key="k", Body=b"hello world", ACL="public-read")["ETag"]
    st, h, body = raw_get(server.port, "/nmod/k", {"If-None-Match": etag})
    assert st == 304 and body == b""
    assert h.get("content-length", "11") == "11", h
    assert h["etag"] == etag
    st, h, body = raw_get(server.port, "/nmod/k", {"If-Modified-Since": h["last-modified"]})
    assert st == 304 and body == b"" and h.get("content-length", "11") == "11", h
    # The connection still frames the next response right (keep-alive after a 304).
    st, body, hh = signed_request(server.port, "GET", "/nmod/k", headers={"If-None-Match": etag})
    assert st == 304 and body == b""
    st, body, hh = signed_request(server.port, "DELETE", "/nmod/k")
    assert st == 204 and "content-length" not in {k.lower() for k in hh}, hh


def test_tagging_body_one_key_one_value_one_tagset(server):
    """AWS's Tag has exactly one Key and one Value, a Tagging one TagSet: a body with two
    Keys in a Tag (of which the last was kept), or two TagSets, is 400 MalformedXML."""
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="tagx")
    c.put_object(Bucket="tagx", Key="k", Body=b"x")
    bad = [b"<Tagging><TagSet><Tag><Key>a</Key><Key>b</Key><Value>v</Value></Tag></TagSet>"
           b"</Tagging>",
           b"<Tagging><TagSet><Tag><Key>a</Key><Value>v</Value><Value>w</Value></Tag></TagSet>"
           b"</Tagging>",
           b"<Tagging><TagSet><Tag><Key>a</Key><Value>v</Value></Tag></TagSet>"
           b"<TagSet><Tag><Key>b</Key><Value>v</Value></Tag></TagSet></Tagging>"]
    for path in ("/tagx/k?tagging", "/tagx?tagging"):
        for body in bad:
            st, resp, _ = signed_request(server.port, "PUT", path, body,
                                         {"Content-MD5": md5_of(body)})
            assert st == 400 and code_of(resp) == "MalformedXML", (path, body, st, resp)
    assert c.get_object_tagging(Bucket="tagx", Key="k")["TagSet"] == []


def test_create_bucket_configuration_is_read(server):
    """CreateBucket's body (CreateBucketConfiguration) was never read: a bucket asked for in
    eu-west-1 was created on this us-east-1 node and answered 200, and a body that is no XML
    at all was taken too. AWS: a LocationConstraint the endpoint's region does not serve is
    400 IllegalLocationConstraintException ("The eu-west-1 location constraint is incompatible
    for the region specific endpoint this request was sent to."), a malformed body 400
    MalformedXML; nothing is created."""
    c = s3_client(server.endpoint)
    cfg = ("<CreateBucketConfiguration xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
           "<LocationConstraint>%s</LocationConstraint></CreateBucketConfiguration>")
    illegal = "IllegalLocationConstraintException"
    for name, body, code in (("eu", (cfg % "eu-west-1").encode(), illegal),
                             ("eu2", (cfg % "EU").encode(), illegal),
                             ("bad", b"<<<not xml", "MalformedXML"),
                             ("root", b"<Other><LocationConstraint/></Other>", "MalformedXML"),
                             ("two", (cfg % "a").replace("</C", "<LocationConstraint/></C").encode(),
                              "MalformedXML"),
                             ("dtd", b"<!DOCTYPE x [<!ENTITY a \"eu-west-1\">]>" +
                              (cfg % "&a;").encode(), "MalformedXML"),
                             # S3 takes no explicit us-east-1 (one asks for it by sending
                             # none): 400 InvalidLocationConstraint (a fourth probe).
                             ("us", (cfg % "us-east-1").encode(), "InvalidLocationConstraint")):
        st, resp, _ = signed_request(server.port, "PUT", "/cfg-" + name, body)
        assert st == 400 and code_of(resp) == code, (name, st, resp)
    names = [b["Name"] for b in c.list_buckets()["Buckets"]]
    assert not [n for n in names if n.startswith("cfg-")], names
    # What the node serves is taken: no body, or no constraint (us-east-1 here).
    for name, body in (("none", b""), ("empty", b"<CreateBucketConfiguration/>")):
        st, resp, _ = signed_request(server.port, "PUT", "/ok-" + name, body)
        assert st == 200, (name, st, resp)
    c.create_bucket(Bucket="ok-boto")
    assert c.get_bucket_location(Bucket="ok-none")["LocationConstraint"] is None


def test_expected_bucket_owner_is_checked(server):
    """x-amz-expected-bucket-owner (and x-amz-source-expected-bucket-owner on a copy) was
    ignored: a client guarding its write against a bucket someone else owns wrote into it.
    AWS (bucket owner condition): "If the account ID that you provide does not match the
    actual owner of the bucket, the request fails with the HTTP status code 403 Forbidden".
    An owner here is its access key, the ID the listings show as Owner/ID."""
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="own", ACL="public-read-write")
    c.put_object(Bucket="own", Key="k", Body=b"x")
    other = s3_client(server.endpoint, AK2, SK2)
    # The other user may write into the public-read-write bucket, but not when it asks for
    # the bucket to be its own; nor may the owner when it names another owner.
    other.put_object(Bucket="own", Key="w", Body=b"y")
    for who, cl in (("other", other), ("owner", c)):
        try:
            cl.put_object(Bucket="own", Key="guarded-" + who, Body=b"z",
                          ExpectedBucketOwner=AK2)
            raise AssertionError("written despite the owner condition")
        except ClientError as e:
            assert e.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    for call in (lambda: c.get_object(Bucket="own", Key="k", ExpectedBucketOwner="123456789012"),
                 lambda: c.list_objects_v2(Bucket="own", ExpectedBucketOwner=AK2),
                 lambda: c.delete_object(Bucket="own", Key="k", ExpectedBucketOwner=AK2),
                 lambda: c.copy_object(Bucket="own", Key="c", CopySource="own/k",
                                       ExpectedSourceBucketOwner=AK2)):
        try:
            call()
            raise AssertionError("owner condition ignored")
        except ClientError as e:
            assert e.response["Error"]["Code"] == "AccessDenied", e.response
    # The right owner passes, whoever asks.
    other.put_object(Bucket="own", Key="w", Body=b"y2", ExpectedBucketOwner=AK)
    c.put_object(Bucket="own", Key="ok", Body=b"1", ExpectedBucketOwner=AK)
    assert c.get_object(Bucket="own", Key="ok", ExpectedBucketOwner=AK)["Body"].read() == b"1"
    c.copy_object(Bucket="own", Key="c2", CopySource="own/ok", ExpectedBucketOwner=AK,
                  ExpectedSourceBucketOwner=AK)
    keys = sorted(o["Key"] for o in c.list_objects_v2(Bucket="own")["Contents"])
    assert keys == ["c2", "k", "ok", "w"]


def test_list_buckets_bucket_region(server):
    """ListBuckets' bucket-region "limits the response to buckets that are located in the
    specified AWS Region" (AWS ListBuckets): it was ignored, so a client asking for its
    eu-west-1 buckets of a us-east-1 node was given every bucket, as if there."""
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="here")

    def names(query):  # sent by hand: older botocore has no BucketRegion
        st, body, _ = signed_request(server.port, "GET", "/" + query)
        assert st == 200, body
        return [e.text for e in ET.fromstring(body).iter(
            "{http://s3.amazonaws.com/doc/2006-03-01/}Name")]
    assert names("?bucket-region=us-east-1") == ["here"]
    assert names("?bucket-region=eu-west-1") == []
    assert names("") == ["here"]


def test_aws_chunked_body_needs_its_decoded_length(server):
    """AWS (sigv4-streaming): "For all requests, you must include the
    x-amz-decoded-content-length header, specifying the size of the object in bytes." An
    aws-chunked PUT or part without it was taken (its size known only once read); it is 411
    MissingContentLength, announced before any byte of the body is taken, and nothing is
    stored."""
    import zlib
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="dcl")
    up = c.create_multipart_upload(Bucket="dcl", Key="mp")["UploadId"]
    crc = base64.b64encode(zlib.crc32(b"hello").to_bytes(4, "big")).decode()
    body = b"5\r\nhello\r\n0\r\nx-amz-checksum-crc32:%s\r\n\r\n" % crc.encode()
    hd = {"Content-Encoding": "aws-chunked", "x-amz-trailer": "x-amz-checksum-crc32"}
    for path in ("/dcl/k", "/dcl/mp?partNumber=1&uploadId=" + up):
        st, resp, _ = signed_request(server.port, "PUT", path, body, hd,
                                     "STREAMING-UNSIGNED-PAYLOAD-TRAILER")
        assert st == 411 and code_of(resp) == "MissingContentLength", (path, st, resp)
    assert "Contents" not in c.list_objects_v2(Bucket="dcl")
    assert c.list_parts(Bucket="dcl", Key="mp", UploadId=up).get("Parts", []) == []
    # With it, the same bodies are taken.
    hd["x-amz-decoded-content-length"] = "5"
    for path in ("/dcl/k", "/dcl/mp?partNumber=1&uploadId=" + up):
        st, resp, _ = signed_request(server.port, "PUT", path, body, hd,
                                     "STREAMING-UNSIGNED-PAYLOAD-TRAILER")
        assert st == 200, (path, st, resp)
    assert c.get_object(Bucket="dcl", Key="k")["Body"].read() == b"hello"


def test_range_numbers_of_any_length(server):
    """RFC 9110 14.1.1: a range's positions are 1*DIGIT, any length. A first position past
    any 64-bit number is past the object (416 with Content-Range: bytes */SIZE, as for any
    first position past the end); leading zeros are the same number. Before, both ranges
    were ignored and the whole object answered with 200."""
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="ranges")
    body = bytes(range(256)) * 4
    c.put_object(Bucket="ranges", Key="o", Body=body)
    st, got, h = signed_request(server.port, "GET", "/ranges/o",
                                headers={"Range": "bytes=99999999999999999999999-"})
    assert st == 416 and code_of(got) == "InvalidRange"
    assert {k.lower(): v for k, v in h.items()}["content-range"] == "bytes */1024"
    for rng, want in (("bytes=00000000000000000000001-2", body[1:3]),
                      ("bytes=-000000000000000000000000003", body[-3:]),
                      ("bytes=1000-99999999999999999999999", body[1000:]),
                      ("bytes=-99999999999999999999999", body)):
        st, got, _ = signed_request(server.port, "GET", "/ranges/o", headers={"Range": rng})
        assert (st, got) == (206, want), rng
    # Not digits: no range, the whole object.
    st, got, _ = signed_request(server.port, "GET", "/ranges/o", headers={"Range": "bytes=1x-2"})
    assert (st, got) == (200, body)
