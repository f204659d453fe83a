"""Browser-based uploads (POST Object): a form posted as multipart/form-data
with a SigV4-signed policy, made by boto3's generate_presigned_post. Policy
conditions, content-length-range, ${filename}, success_action_status and
_redirect, metadata, ACL and tagging fields; every failure leaves nothing
stored. Runs under Debian's boto3 and the newest botocore."""
import hashlib
import http.client
import os
import urllib.request
import xml.etree.ElementTree as ET

import pytest
from botocore.exceptions import ClientError

from conftest import run_under_newest_botocore, s3_client
from test_hardening import presigner


def form_post(server, bucket, fields, filename, data, extra=None):
    """POST fields (a dict, or (name, value) pairs: in order) and the file last, as a browser
    does. (status, body, headers)"""
    boundary = "----wlform" + os.urandom(8).hex()
    parts = []
    pairs = list(fields.items()) if isinstance(fields, dict) else list(fields)
    for k, v in pairs + list((extra or {}).items()):
        parts.append(("--%s\r\nContent-Disposition: form-data; name=\"%s\"\r\n\r\n%s\r\n"
                      % (boundary, k, v)).encode())
    parts.append(("--%s\r\nContent-Disposition: form-data; name=\"file\"; filename=\"%s\"\r\n"
                  "Content-Type: application/octet-stream\r\n\r\n" % (boundary, filename)).encode())
    body = b"".join(parts) + data + ("\r\n--%s--\r\n" % boundary).encode()
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    try:
        conn.request("POST", "/" + bucket, body=body,
                     headers={"Content-Type": "multipart/form-data; boundary=" + boundary})
        r = conn.getresponse()
        return r.status, r.read(), dict(r.getheaders())
    finally:
        conn.close()


def code_of(body):
    return ET.fromstring(body).findtext("Code")


def test_post_object(server):
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="post")
    p = presigner(server)
    fields = {"acl": "public-read", "Content-Type": "text/plain", "success_action_status": "201",
              "x-amz-meta-origin": "form"}
    conds = [{"acl": "public-read"}, {"Content-Type": "text/plain"},
             {"success_action_status": "201"}, ["starts-with", "$key", "uploads/"],
             ["content-length-range", 1, 10 << 20], {"x-amz-meta-origin": "form"}]
    post = p.generate_presigned_post("post", "uploads/${filename}", Fields=fields,
                                     Conditions=conds, ExpiresIn=300)
    data = os.urandom(5 << 20)
    st, body, h = form_post(server, "post", post["fields"], "photo.jpg", data)
    assert st == 201, body
    root = ET.fromstring(body)
    assert root.findtext("Key") == "uploads/photo.jpg" and root.findtext("Bucket") == "post"
    assert root.findtext("ETag") == '"%s"' % hashlib.md5(data).hexdigest()
    # Location: the object's URL, as S3 answers it (absolute, the key URL-encoded).
    url = "http://127.0.0.1:%d/post/uploads/photo.jpg" % server.port
    assert root.findtext("Location") == url and h["Location"] == url
    got = c.get_object(Bucket="post", Key="uploads/photo.jpg")
    assert hashlib.sha256(got["Body"].read()).hexdigest() == hashlib.sha256(data).hexdigest()
    assert got["ContentType"] == "text/plain" and got["Metadata"] == {"origin": "form"}
    with urllib.request.urlopen(server.endpoint + "/post/uploads/photo.jpg", timeout=30) as r:
        assert r.status == 200  # acl=public-read applied


def test_post_policy_is_enforced(server):
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="post")
    p = presigner(server)
    conds = [["content-length-range", 10, 1000]]
    post = p.generate_presigned_post("post", "uploads/${filename}", Conditions=conds,
                                     ExpiresIn=300)
    f = dict(post["fields"])
    assert form_post(server, "post", f, "ok", b"x" * 100)[0] == 204
    # Key outside the policy.
    st, body, _ = form_post(server, "post", dict(f, key="elsewhere/x"), "a", b"x" * 100)
    assert st == 403 and code_of(body) == "AccessDenied"
    # content-length-range, both ends.
    st, body, _ = form_post(server, "post", dict(f, key="uploads/big"), "a", b"x" * 1001)
    assert st == 400 and code_of(body) == "EntityTooLarge"
    st, body, _ = form_post(server, "post", dict(f, key="uploads/small"), "a", b"x" * 9)
    assert st == 400 and code_of(body) == "EntityTooSmall"
    # A field the policy does not allow.
    st, body, _ = form_post(server, "post", f, "a", b"x" * 100, extra={"acl": "public-read"})
    assert st == 403 and code_of(body) == "AccessDenied"
    # x-ignore-* fields are allowed.
    assert form_post(server, "post", f, "ok", b"x" * 100, extra={"x-ignore-me": "1"})[0] == 204
    # A signature that does not match, and a policy changed after signing.
    st, body, _ = form_post(server, "post", dict(f, **{"x-amz-signature": "0" * 64}), "a", b"x" * 99)
    assert st == 403 and code_of(body) == "SignatureDoesNotMatch"
    import base64
    import json
    pol = json.loads(base64.b64decode(f["policy"]))
    pol["conditions"][0] = ["starts-with", "$key", ""]
    forged = base64.b64encode(json.dumps(pol).encode()).decode()
    st, body, _ = form_post(server, "post", dict(f, policy=forged, key="x"), "a", b"x" * 99)
    assert st == 403 and code_of(body) == "SignatureDoesNotMatch"
    # Expired.
    old = p.generate_presigned_post("post", "uploads/${filename}", Conditions=conds,
                                    ExpiresIn=-60)
    st, body, _ = form_post(server, "post", old["fields"], "a", b"x" * 99)
    assert st == 403 and b"expired" in body
    keys = sorted(o["Key"] for o in c.list_objects_v2(Bucket="post")["Contents"])
    assert keys == ["uploads/ok"]


def test_post_redirect_and_tagging(server):
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="post")
    p = presigner(server)
    tagging = ("<Tagging><TagSet><Tag><Key>src</Key><Value>form</Value></Tag></TagSet>"
               "</Tagging>")
    fields = {"success_action_redirect": "http://app.example/done", "tagging": tagging}
    conds = [{"success_action_redirect": "http://app.example/done"}, {"tagging": tagging}]
    post = p.generate_presigned_post("post", "r/${filename}", Fields=fields, Conditions=conds)
    st, body, h = form_post(server, "post", post["fields"], "dir/x.bin", b"abc")
    assert st == 303
    loc = h["Location"]
    assert loc.startswith("http://app.example/done?bucket=post&key=r%2Fx.bin&etag=")
    assert c.get_object(Bucket="post", Key="r/x.bin")["Body"].read() == b"abc"
    tags = c.get_object_tagging(Bucket="post", Key="r/x.bin")["TagSet"]
    assert tags == [{"Key": "src", "Value": "form"}]


def test_post_field_sent_twice_is_refused(server):
    """A policy checks one value of a field; the object got all of them (x-amz-meta-role
    "viewer, admin" under a policy asking viewer). A field sent twice is refused, whatever
    the case of its name; x-ignore-* fields, which nothing reads, may repeat."""
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="post")
    p = presigner(server)
    post = p.generate_presigned_post("post", "dup/${filename}",
                                     Fields={"x-amz-meta-role": "viewer"},
                                     Conditions=[{"x-amz-meta-role": "viewer"}],
                                     ExpiresIn=300)
    f = list(post["fields"].items())
    for extra in (("x-amz-meta-role", "admin"), ("X-Amz-Meta-Role", "viewer"),
                  ("key", "dup/other"), ("Policy", post["fields"]["policy"])):
        st, body, _ = form_post(server, "post", f + [extra], "a", b"data")
        assert st == 400 and code_of(body) == "InvalidArgument", (extra, st, body)
        assert extra[0].lower().encode() in body.lower(), body
    with pytest.raises(ClientError):
        c.head_object(Bucket="post", Key="dup/a")
    ign = [("x-ignore-tag", "1"), ("x-ignore-tag", "2")]
    assert form_post(server, "post", f + ign, "a", b"data")[0] == 204
    assert c.head_object(Bucket="post", Key="dup/a")["Metadata"] == {"role": "viewer"}


def test_post_integrity_fields_are_checked(server):
    """A form's Content-MD5 and x-amz-checksum-ALGO fields were ignored: a wrong value stored
    the file unchecked (a sweep). They are checked as PutObject's headers are: a wrong one is
    BadDigest and nothing is stored; a right checksum is kept and read back."""
    import base64
    import zlib
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="post-digest")
    p = presigner(server)
    data = os.urandom(100_000)
    md5 = base64.b64encode(hashlib.md5(data).digest()).decode()
    crc = base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()
    wrong_crc = base64.b64encode((zlib.crc32(data) ^ 1).to_bytes(4, "big")).decode()
    wrong_md5 = base64.b64encode(hashlib.md5(b"other").digest()).decode()

    def post(key, fields):
        form = p.generate_presigned_post("post-digest", key, Fields=fields,
                                         Conditions=[{k: v} for k, v in fields.items()],
                                         ExpiresIn=300)
        return form_post(server, "post-digest", form["fields"], "f", data)

    for key, fields, want in (
            ("bad-md5", {"Content-MD5": wrong_md5}, "BadDigest"),
            ("bad-crc", {"x-amz-checksum-crc32": wrong_crc}, "BadDigest"),
            ("malformed-md5", {"Content-MD5": "not base64"}, "InvalidDigest"),
            ("sha512", {"x-amz-checksum-sha512": crc}, "InvalidRequest"),  # (no SHA-512 value)
            ("sha512-bad", {"x-amz-checksum-sha512": base64.b64encode(
                hashlib.sha512(b"other").digest()).decode()}, "BadDigest"),
            ("two", {"x-amz-checksum-crc32": crc,
                     "x-amz-checksum-sha256": base64.b64encode(
                         hashlib.sha256(data).digest()).decode()}, "InvalidRequest")):
        st, body, _ = post(key, fields)
        assert st == 400 and code_of(body) == want, (key, st, body)
        with pytest.raises(ClientError):
            c.head_object(Bucket="post-digest", Key=key)
    st, body, _ = post("good", {"Content-MD5": md5, "x-amz-checksum-crc32": crc,
                                "x-amz-checksum-type": "FULL_OBJECT"})
    assert st == 204, body
    h = c.head_object(Bucket="post-digest", Key="good", ChecksumMode="ENABLED")
    assert h["ChecksumCRC32"] == crc
    got = c.get_object(Bucket="post-digest", Key="good")["Body"].read()
    assert hashlib.sha256(got).digest() == hashlib.sha256(data).digest()
    # One S3 added later: checked and kept the same way.
    sha512 = base64.b64encode(hashlib.sha512(data).digest()).decode()
    st, body, _ = post("good512", {"x-amz-checksum-sha512": sha512})
    assert st == 204, body
    h = c.head_object(Bucket="post-digest", Key="good512", ChecksumMode="ENABLED")
    assert h["ResponseMetadata"]["HTTPHeaders"]["x-amz-checksum-sha512"] == sha512


def test_post_malformed(server):
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="post")
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    conn.request("POST", "/post", body=b"--x\r\nnot a part",
                 headers={"Content-Type": "multipart/form-data; boundary=x"})
    r = conn.getresponse()
    body = r.read()
    conn.close()
    assert r.status == 400 and code_of(body) == "MalformedPOSTRequest"
    with pytest.raises(ClientError):
        c.head_object(Bucket="post", Key="x")


def v2_form(policy, key="v2/${filename}", sk=None, ak=None):
    """SigV2 form fields: the policy (a dict) base64, signed with HMAC-SHA1 of the secret."""
    import base64
    import hmac
    import json
    from conftest import AK, SK
    b64 = base64.b64encode(json.dumps(policy).encode()).decode()
    sig = base64.b64encode(hmac.new((sk or SK).encode(), b64.encode(), "sha1").digest()).decode()
    return {"key": key, "AWSAccessKeyId": ak or AK, "policy": b64, "signature": sig}


def test_post_with_sigv2_fields(server):
    """Forms signed the SigV2 way (AWSAccessKeyId, policy, signature), as S3 still takes them
    and many form builders and suites make them; conditions on $key see the key with
    ${filename} replaced; policy errors as S3 classes them: a policy that is no policy
    document is 400 InvalidPolicyDocument, a condition not met 403."""
    import datetime
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="postv2")
    exp = (datetime.datetime.utcnow() + datetime.timedelta(minutes=5)).strftime(
        "%Y-%m-%dT%H:%M:%SZ")
    good = {"expiration": exp, "conditions": [{"bucket": "postv2"},
                                              ["starts-with", "$key", "v2/f"],
                                              ["content-length-range", 0, 1 << 20]]}
    data = os.urandom(70000)
    st, body, _ = form_post(server, "postv2", v2_form(good), "f.bin", data)
    assert st == 204, body
    got = c.get_object(Bucket="postv2", Key="v2/f.bin")["Body"].read()
    assert hashlib.sha256(got).hexdigest() == hashlib.sha256(data).hexdigest()
    f = v2_form(good)
    f["signature"] = "AAAA" + f["signature"][4:]
    st, body, _ = form_post(server, "postv2", f, "x", b"x")
    assert st == 403 and code_of(body) == "SignatureDoesNotMatch"
    st, body, _ = form_post(server, "postv2", v2_form(good, ak="AKIANOSUCHKEY0000000"), "x", b"x")
    assert st == 403 and code_of(body) == "InvalidAccessKeyId"
    st, body, _ = form_post(server, "postv2", v2_form(good, key="elsewhere/x"), "x", b"x")
    assert st == 403 and code_of(body) == "AccessDenied"
    f = v2_form(good)
    del f["signature"]
    st, body, _ = form_post(server, "postv2", f, "x", b"x")
    assert st == 400
    for bad in ({"conditions": good["conditions"]},                      # no expiration
                {"expiration": exp},                                     # no conditions
                {"EXPIRATION": exp, "conditions": good["conditions"]},   # names are exact
                {"expiration": exp, "CONDITIONS": good["conditions"]},
                {"expiration": "2030-01-01 00:00:00", "conditions": good["conditions"]},
                {"expiration": exp, "conditions": [{"bucket": "postv2"},
                                                   ["content-length-range", 10]]},
                {"expiration": exp, "conditions": [{"bucket": "postv2"},
                                                   ["content-length-range", -1, 10]]},
                {"expiration": exp, "conditions": [{}]}):
        st, body, _ = form_post(server, "postv2", v2_form(bad), "x", b"x")
        assert st == 400 and code_of(body) == "InvalidPolicyDocument", (bad, body)
    keys = sorted(o["Key"] for o in c.list_objects_v2(Bucket="postv2")["Contents"])
    assert keys == ["v2/f.bin"]


def test_post_redirect_has_one_location(server):
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="postloc")
    p = presigner(server)
    post = p.generate_presigned_post(
        "postloc", "k", Fields={"success_action_redirect": "http://app.example/ok"},
        Conditions=[{"success_action_redirect": "http://app.example/ok"}])
    boundary = "----wlform1"
    body = b"".join(("--%s\r\nContent-Disposition: form-data; name=\"%s\"\r\n\r\n%s\r\n"
                     % (boundary, k, v)).encode() for k, v in post["fields"].items())
    body += ("--%s\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a\"\r\n\r\n"
             % boundary).encode() + b"abc" + ("\r\n--%s--\r\n" % boundary).encode()
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    conn.request("POST", "/postloc", body=body,
                 headers={"Content-Type": "multipart/form-data; boundary=" + boundary})
    r = conn.getresponse()
    r.read()
    conn.close()
    locs = [v for k, v in r.getheaders() if k.lower() == "location"]
    assert r.status == 303 and len(locs) == 1 and locs[0].startswith("http://app.example/ok?")


def test_anonymous_post_to_public_write_bucket(server):
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="pubw", ACL="public-read-write")
    c.create_bucket(Bucket="privw")
    grants = c.get_bucket_acl(Bucket="pubw")["Grants"]
    assert {g["Permission"] for g in grants if g["Grantee"].get("URI", "").endswith("AllUsers")} \
        == {"READ", "WRITE"}
    data = os.urandom(300000)
    # No policy, no signature: accepted into the public-write bucket only.
    st, body, _ = form_post(server, "pubw", {"key": "anon/${filename}"}, "a.bin", data)
    assert st == 204, body
    got = c.get_object(Bucket="pubw", Key="anon/a.bin")["Body"].read()
    assert hashlib.sha256(got).hexdigest() == hashlib.sha256(data).hexdigest()
    st, body, _ = form_post(server, "privw", {"key": "anon/x"}, "x.bin", b"x")
    assert st == 403 and code_of(body) == "AccessDenied"
    with pytest.raises(ClientError):
        c.head_object(Bucket="privw", Key="anon/x")
    # Made private again, the bucket refuses anonymous forms.
    c.put_bucket_acl(Bucket="pubw", ACL="private")
    st, body, _ = form_post(server, "pubw", {"key": "anon/y"}, "y.bin", b"y")
    assert st == 403
    st, body, _ = form_post(server, "nobucket", {"key": "k"}, "y.bin", b"y")
    assert st == 404 and code_of(body) == "NoSuchBucket"


def test_post_fields_cannot_write_response_headers(server):
    """Form fields kept as the object's headers (metadata, standard headers, Content-Type) are
    header values: CR or LF in one would let whoever may post (anyone, into a public-write
    bucket) write headers, or a whole response, into every GET of the object. Refused, and
    nothing stored."""
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="postinj", ACL="public-read-write")
    for name in ("x-amz-meta-note", "Content-Disposition", "Cache-Control", "Expires",
                 "Content-Type"):
        for bad in ("a\r\nSet-Cookie: evil=1", "a\nX-Evil: 1", "a\x01b"):
            st, body, _ = form_post(server, "postinj", {"key": "inj", "acl": "public-read",
                                                        name: bad}, "a.txt", b"hello")
            assert st == 400 and code_of(body) == "InvalidArgument", (name, bad, st, body)
            with pytest.raises(ClientError):
                c.head_object(Bucket="postinj", Key="inj")
    # A field name that is no header name is refused too.
    st, body, _ = form_post(server, "postinj", {"key": "inj", "x-amz-meta-a b:c": "v"}, "a.txt",
                            b"hello")
    assert st == 400 and code_of(body) == "InvalidArgument", body
    # Tabs and printable text stay as they are.
    st, body, _ = form_post(server, "postinj", {"key": "ok", "x-amz-meta-note": "a\tb c",
                                                "Content-Type": "text/plain"}, "a.txt", b"hi")
    assert st == 204, body
    h = c.head_object(Bucket="postinj", Key="ok")
    assert h["Metadata"] == {"note": "a\tb c"} and h["ContentType"] == "text/plain"


def test_with_newest_botocore(server):
    run_under_newest_botocore("test_s3_post.py")
