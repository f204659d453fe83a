"""Answers a hostile probe found wrong, each checked against what AWS S3 does:
listing (and any other query) parameters holding NUL or a bad escape, the 416's
Content-Range, two authentication mechanisms at once, response-* overrides that
no header can carry, DeleteObjects without a digest, a malformed chunked body,
signed aws-chunked chunks under 8 KiB, a copy source that is no UTF-8 text,
DeleteObjects keys holding control characters; and where S3's documentation
does not say, by the RFCs: If-Range (RFC 9110), an empty bucket segment
(//bucket/key). Runs under Debian's boto3 and, through test_with_newest_botocore,
again under the newest botocore on this machine (which sends DeleteObjects with
x-amz-checksum-* instead of Content-MD5)."""
import base64
import email.utils
import hashlib
import os
import socket
import xml.etree.ElementTree as ET
import zlib

import pytest
from botocore.exceptions import ClientError

from conftest import AK, SK, run_under_newest_botocore, s3_client, signed_request

NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"


def sha(b):
    return hashlib.sha256(b).hexdigest()


def code_of(body):
    return ET.fromstring(body).findtext("Code")


def lower(h):
    return {k.lower(): v for k, v in h.items()}


def md5_of(b):
    return base64.b64encode(hashlib.md5(b).digest()).decode()


def crc32_of(b):
    return base64.b64encode(zlib.crc32(b).to_bytes(4, "big")).decode()


def keys_of(c, bucket):
    return [o["Key"] for o in c.list_objects_v2(Bucket=bucket).get("Contents", [])]


def test_query_parameters_with_nul_or_bad_escape_refused(server):
    """A listing parameter holding %00 was dropped as if absent (prefix=zzz%00 listed
    everything); like %FF it is refused, and so is a bad escape, in any parameter."""
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="nul")
    c.put_object(Bucket="nul", Key="a", Body=b"1")
    c.put_object(Bucket="nul", Key="zzz", Body=b"2")
    for q in ("prefix=zzz%00", "delimiter=%00", "marker=a%00", "list-type=2&prefix=zzz%00",
              "list-type=2&start-after=%00", "list-type=2&continuation-token=%00",
              "list-type=2&delimiter=a%00", "versions&prefix=zzz%00", "versions&key-marker=a%00",
              "versions&delimiter=%00", "versions&version-id-marker=%00&key-marker=a",
              "prefix=zzz%FF", "prefix=%zz", "prefix=a%2", "encoding-type=url%00"):
        st, body, _ = signed_request(server.port, "GET", "/nul?" + q)
        assert st == 400 and code_of(body) == "InvalidArgument", (q, st, body)
    # On an object too (a version id, a response-* override).
    for q in ("versionId=%00", "response-content-type=text%00"):
        st, body, _ = signed_request(server.port, "GET", "/nul/a?" + q)
        assert st == 400 and code_of(body) == "InvalidArgument", (q, st, body)
    # What is valid still lists as before.
    st, body, _ = signed_request(server.port, "GET", "/nul?list-type=2&prefix=zzz")
    assert st == 200
    assert [k.text for k in ET.fromstring(body).iter(NS + "Key")] == ["zzz"]
    assert c.get_object(Bucket="nul", Key="a")["Body"].read() == b"1"


def test_invalid_range_carries_content_range(server):
    """416 InvalidRange tells the object's size in Content-Range: bytes */SIZE, as S3, and
    in the error (ActualObjectSize, RangeRequested)."""
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="rng")
    data = os.urandom(1000)
    c.put_object(Bucket="rng", Key="o", Body=data)
    c.put_object(Bucket="rng", Key="empty", Body=b"")
    for key, rng, size in (("o", "bytes=1000-", 1000), ("o", "bytes=5000-6000", 1000),
                           ("empty", "bytes=0-0", 0), ("empty", "bytes=-5", 0)):
        st, body, h = signed_request(server.port, "GET", "/rng/" + key, headers={"Range": rng})
        h = lower(h)
        assert st == 416 and code_of(body) == "InvalidRange", (key, rng, st, body)
        assert h["content-range"] == "bytes */%d" % size, (key, rng, h)
        root = ET.fromstring(body)
        assert root.findtext("ActualObjectSize") == str(size)
        assert root.findtext("RangeRequested") == rng
        st, _, h = signed_request(server.port, "HEAD", "/rng/" + key, headers={"Range": rng})
        assert st == 416 and lower(h)["content-range"] == "bytes */%d" % size
    # A satisfiable range is unchanged.
    r = c.get_object(Bucket="rng", Key="o", Range="bytes=990-2000")
    assert r["ContentRange"] == "bytes 990-999/1000" and sha(r["Body"].read()) == sha(data[990:])
    with pytest.raises(ClientError) as e:
        c.get_object(Bucket="rng", Key="o", Range="bytes=1000-")
    assert e.value.response["Error"]["Code"] == "InvalidRange"


def test_if_range_serves_the_range_only_on_a_match(server):
    """If-Range (RFC 9110 13.1.5): a Range is served only when the validator is the object's
    ETag (strongly: W/ never matches) or exactly its Last-Modified; otherwise the whole object,
    200, so that a client resuming a replaced object does not splice two together. Without a
    Range, If-Range is ignored."""
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="ifr")
    data = b"NEW-CONTENT-0123456789"
    c.put_object(Bucket="ifr", Key="o", Body=data)
    _, _, h = signed_request(server.port, "HEAD", "/ifr/o")
    h = lower(h)
    etag, lm = h["etag"], h["last-modified"]
    stale = ('"00000000000000000000000000000000"', "W/" + etag, "Thu, 01 Jan 2015 00:00:00 GMT",
             "not a date")
    for v in stale:
        for rng in ("bytes=4-7", "bytes=5000-"):  # an unsatisfiable Range is ignored too
            st, body, rh = signed_request(server.port, "GET", "/ifr/o",
                                          headers={"Range": rng, "If-Range": v})
            assert (st, body) == (200, data), (v, rng, st, body)
            assert "content-range" not in lower(rh)
        st, _, rh = signed_request(server.port, "HEAD", "/ifr/o",
                                   headers={"Range": "bytes=4-7", "If-Range": v})
        assert st == 200 and lower(rh)["content-length"] == str(len(data)), (v, st)
    # Last-Modified in the two obsolete date forms a recipient must still take (5.6.7).
    t = email.utils.parsedate_to_datetime(lm)
    rfc850 = t.strftime("%A, %d-%b-%y %H:%M:%S GMT")
    asctime = t.strftime("%a %b ") + ("%2d" % t.day) + t.strftime(" %H:%M:%S %Y")
    for v in (etag, lm, rfc850, asctime):
        st, body, rh = signed_request(server.port, "GET", "/ifr/o",
                                      headers={"Range": "bytes=4-7", "If-Range": v})
        assert (st, body) == (206, data[4:8]), (v, st, body)
        assert lower(rh)["content-range"] == "bytes 4-7/%d" % len(data)
    st, body, _ = signed_request(server.port, "GET", "/ifr/o", headers={"If-Range": '"x"'})
    assert (st, body) == (200, data)


def test_empty_bucket_segment_is_no_service_request(server):
    """GET //bucket/key (an empty first segment, path style) named no bucket and was answered
    as GET /: every bucket listed, 200. No bucket is called "": 400 InvalidBucketName."""
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="slash")
    c.put_object(Bucket="slash", Key="a", Body=b"1")
    for path in ("//slash/a", "//slash/a?acl", "///", "//", "//slash"):
        st, body, _ = signed_request(server.port, "GET", path)
        assert st == 400 and code_of(body) == "InvalidBucketName", (path, st, body)
    st, body, _ = signed_request(server.port, "GET", "/")
    assert st == 200 and b"<Name>slash</Name>" in body
    # A key starting with a slash is still one: /slash//a is the key "/a".
    c.put_object(Bucket="slash", Key="/a", Body=b"2")
    assert signed_request(server.port, "GET", "/slash//a")[:2] == (200, b"2")


def test_one_auth_mechanism_only(server):
    """An Authorization header with X-Amz-Algorithm, X-Amz-Signature or Signature in the
    query: S3 refuses it (400 InvalidArgument, "Only one auth mechanism allowed")."""
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="auth2")
    c.put_object(Bucket="auth2", Key="o", Body=b"x")
    for q in ("X-Amz-Algorithm=AWS4-HMAC-SHA256", "X-Amz-Signature=00",
              "Signature=abc", "X-Amz-Credential=x&X-Amz-Algorithm=AWS4-HMAC-SHA256"):
        st, body, _ = signed_request(server.port, "GET", "/auth2/o?" + q)
        assert st == 400 and code_of(body) == "InvalidArgument", (q, st, body)
        assert b"Only one auth mechanism allowed" in body
        assert ET.fromstring(body).findtext("ArgumentName") == "Authorization"
    # A presigned URL sent with an Authorization header as well.
    import boto3
    from botocore.config import Config
    p = boto3.session.Session().client(
        "s3", endpoint_url=server.endpoint, aws_access_key_id=AK, aws_secret_access_key=SK,
        region_name="us-east-1", config=Config(s3={"addressing_style": "path"},
                                               signature_version="s3v4"))
    url = p.generate_presigned_url("get_object", Params={"Bucket": "auth2", "Key": "o"})
    assert "X-Amz-Algorithm=" in url
    path = url[url.index("/auth2"):]
    st, body, _ = signed_request(server.port, "GET", path)
    assert st == 400 and code_of(body) == "InvalidArgument"
    # Each alone still works.
    import urllib.request
    with urllib.request.urlopen(url, timeout=30) as r:
        assert r.read() == b"x"
    st, body, _ = signed_request(server.port, "GET", "/auth2/o")
    assert st == 200 and body == b"x"


def raw_get(port, path, headers):
    """A signed GET whose response head is returned as raw bytes (no header decoding)."""
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials
    host = "127.0.0.1:%d" % port
    req = AWSRequest(method="GET", url="http://%s%s" % (host, path), data=b"", headers=headers)
    S3SigV4Auth(Credentials(AK, SK), "s3", "us-east-1").add_auth(req)
    head = "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n" % (path, host)
    head += "".join("%s: %s\r\n" % kv for kv in req.headers.items()) + "\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sk:
        sk.sendall(head.encode())
        out = b""
        while True:
            d = sk.recv(65536)
            if not d:
                break
            out += d
    return out.split(b"\r\n\r\n", 1)


def test_response_overrides_must_be_latin1_header_text(server):
    """response-* values go out as ISO-8859-1 header text, as S3: UTF-8 that maps to it is
    sent as those bytes; invalid UTF-8, characters past U+00FF and control characters are
    400 InvalidArgument, and no raw invalid byte, CR or LF ever reaches a header."""
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="ovr")
    data = os.urandom(300)
    c.put_object(Bucket="ovr", Key="o", Body=data)
    for q in ("response-expires=%FF", "response-content-disposition=a%C3", "response-cache-control=%80",
              "response-content-language=%E2%80%93", "response-content-type=a%0D%0AX-Evil%3A%201",
              "response-content-encoding=%7F", "response-expires=%ED%A0%80",
              "response-content-disposition=%C0%AF"):
        head, body = raw_get(server.port, "/ovr/o?" + q, {})
        assert head.startswith(b"HTTP/1.1 400"), (q, head)
        assert code_of(body) == "InvalidArgument", (q, body)
        assert all(0x20 <= b < 0x7F for b in head.replace(b"\r\n", b"")), (q, head)
        assert b"X-Evil" not in head
    # Latin-1 text (here U+00E9) goes out as its one ISO-8859-1 byte, the body untouched.
    head, body = raw_get(server.port, "/ovr/o?response-content-disposition=attachment%3B%20"
                         "filename%3D%22caf%C3%A9.txt%22", {})
    assert head.startswith(b"HTTP/1.1 200"), head
    assert b'\r\nContent-Disposition: attachment; filename="caf\xe9.txt"' in head, head
    assert sha(body) == sha(data)
    r = c.get_object(Bucket="ovr", Key="o", ResponseContentLanguage="de-CH",
                     ResponseExpires="Thu, 01 Jan 2037 00:00:00 GMT")
    assert r["ContentLanguage"] == "de-CH" and sha(r["Body"].read()) == sha(data)


def test_delete_objects_needs_a_digest(server):
    """DeleteObjects without Content-MD5 or x-amz-checksum-*: 400 InvalidRequest, nothing
    deleted; a digest that does not match the body: 400 BadDigest; each kind that matches
    deletes."""
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="dig")
    for k in ("a", "b", "c", "d"):
        c.put_object(Bucket="dig", Key=k, Body=k.encode())

    def doc(*keys):
        return ("<Delete>%s</Delete>" % "".join(
            "<Object><Key>%s</Key></Object>" % k for k in keys)).encode()

    xml = doc("a")
    st, body, _ = signed_request(server.port, "POST", "/dig?delete", xml)
    assert st == 400 and code_of(body) == "InvalidRequest", body
    assert b"Missing required header for this request: Content-MD5" in body
    for hdrs, code in (({"Content-MD5": md5_of(b"other")}, "BadDigest"),
                       ({"Content-MD5": "notbase64"}, "InvalidDigest"),
                       ({"x-amz-checksum-crc32": crc32_of(b"other")}, "BadDigest"),
                       ({"x-amz-checksum-crc32": crc32_of(xml),
                         "x-amz-checksum-sha256": "x"}, "InvalidRequest")):
        st, body, _ = signed_request(server.port, "POST", "/dig?delete", xml, headers=hdrs)
        assert st == 400 and code_of(body) == code, (hdrs, body)
    assert keys_of(c, "dig") == ["a", "b", "c", "d"]
    st, body, _ = signed_request(server.port, "POST", "/dig?delete", xml,
                                 headers={"Content-MD5": md5_of(xml)})
    assert st == 200 and b"<Deleted><Key>a</Key>" in body
    xml = doc("b")
    st, body, _ = signed_request(server.port, "POST", "/dig?delete", xml,
                                 headers={"x-amz-checksum-crc32": crc32_of(xml)})
    assert st == 200 and b"<Deleted><Key>b</Key>" in body
    xml = doc("c")
    sha256 = base64.b64encode(hashlib.sha256(xml).digest()).decode()
    st, body, _ = signed_request(server.port, "POST", "/dig?delete", xml,
                                 headers={"x-amz-checksum-sha256": sha256})
    assert st == 200 and b"<Deleted><Key>c</Key>" in body
    assert keys_of(c, "dig") == ["d"]
    # boto3 as it is (Debian's sends Content-MD5, the newest x-amz-checksum-crc32/crc64nvme).
    r = c.delete_objects(Bucket="dig", Delete={"Objects": [{"Key": "d"}, {"Key": "none"}]})
    assert sorted(d["Key"] for d in r["Deleted"]) == ["d", "none"]
    assert keys_of(c, "dig") == []


def signed_head(port, method, path, extra):
    """Request head bytes signed with UNSIGNED-PAYLOAD (the body is sent as given)."""
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    class Signer(S3SigV4Auth):
        def payload(self, request):
            return "UNSIGNED-PAYLOAD"

    host = "127.0.0.1:%d" % port
    req = AWSRequest(method=method, url="http://%s%s" % (host, path), data=b"", headers={})
    Signer(Credentials(AK, SK), "s3", "us-east-1").add_auth(req)
    head = "%s %s HTTP/1.1\r\nHost: %s\r\n" % (method, path, host)
    head += "".join("%s: %s\r\n" % kv for kv in req.headers.items())
    return (head + extra + "\r\n").encode()


def test_malformed_chunked_body_answered_400(server):
    """A plain Transfer-Encoding: chunked body that is malformed (or cut short) gets 400,
    then the connection is closed: also when the client shuts its write side after the
    body (a probe's way, which used to get a silent close); nothing is stored."""
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="chunked")
    for i, bad in enumerate((b"zz\r\nhello\r\n0\r\n\r\n", b"5\r\nhelloXX\r\n0\r\n\r\n",
                             b"3\r\nabc\r\n-1\r\n\r\n", b"5\r\nhel",
                             b"%x\r\n%s\r\nzz\r\n" % (300000, b"a" * 300000))):
        for half_close in (True, False):
            if bad == b"5\r\nhel" and not half_close:
                continue  # only cut short by the EOF
            head = signed_head(server.port, "PUT", "/chunked/k%d" % i,
                               "Transfer-Encoding: chunked\r\n")
            with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sk:
                sk.sendall(head + bad)
                if half_close:
                    sk.shutdown(socket.SHUT_WR)
                out = b""
                while True:
                    d = sk.recv(65536)
                    if not d:
                        break  # closed after the answer
                    out += d
            assert out.startswith(b"HTTP/1.1 400"), (bad[:20], half_close, out)
            assert b"Connection: close" in out.split(b"\r\n\r\n")[0], out
    assert keys_of(c, "chunked") == []
    # A well-formed chunked body is stored as sent.
    data = os.urandom(70000)
    body = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in (data[:1000], data[1000:]))
    head = signed_head(server.port, "PUT", "/chunked/ok", "Transfer-Encoding: chunked\r\n"
                       "Connection: close\r\n")
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sk:
        sk.sendall(head + body + b"0\r\n\r\n")
        out = sk.recv(65536)
    assert out.startswith(b"HTTP/1.1 200"), out
    assert sha(c.get_object(Bucket="chunked", Key="ok")["Body"].read()) == sha(data)


def signed_chunked_put(port, path, data, chunk):
    """A PUT of data as STREAMING-AWS4-HMAC-SHA256-PAYLOAD in chunks of chunk bytes, each
    signed, chained from the request's signature. (status, body)"""
    import hmac
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    class Signer(S3SigV4Auth):
        def payload(self, request):
            return "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"

    pieces = [data[i:i + chunk] for i in range(0, len(data), chunk)] + [b""]
    body_len = sum(len("%x;chunk-signature=" % len(p)) + 64 + 2 + len(p) + 2 for p in pieces)
    host = "127.0.0.1:%d" % port
    req = AWSRequest(method="PUT", url="http://%s%s" % (host, path), data=b"", headers={
        "Content-Encoding": "aws-chunked", "x-amz-decoded-content-length": str(len(data)),
        "Content-Length": str(body_len)})
    Signer(Credentials(AK, SK), "s3", "us-east-1").add_auth(req)
    amz = req.headers["X-Amz-Date"]
    prev = req.headers["Authorization"].rsplit("Signature=", 1)[1]
    key = ("AWS4" + SK).encode()
    for part in (amz[:8], "us-east-1", "s3", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    scope = "%s/us-east-1/s3/aws4_request" % amz[:8]
    body = b""
    for p in pieces:
        sts = "\n".join(["AWS4-HMAC-SHA256-PAYLOAD", amz, scope, prev, sha(b""), sha(p)])
        prev = hmac.new(key, sts.encode(), hashlib.sha256).hexdigest()
        body += b"%x;chunk-signature=%s\r\n%s\r\n" % (len(p), prev.encode(), p)
    head = "PUT %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n" % (path, host)
    head += "".join("%s: %s\r\n" % kv for kv in req.headers.items() if kv[0] != "Host")
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sk:
        sk.sendall(head.encode() + b"\r\n" + body)
        out = b""
        while True:
            d = sk.recv(65536)
            if not d:
                break
            out += d
    status = int(out.split(b" ", 2)[1])
    return status, out.split(b"\r\n\r\n", 1)[1]


def test_small_signed_chunks_refused(server):
    """S3 takes signed aws-chunked chunks under 8 KiB only last (InvalidChunkSizeError); they
    were taken at any size. Unsigned (trailer) chunks are not bound: SDKs send any size."""
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="chunks")
    data = os.urandom(20000)
    st, body = signed_chunked_put(server.port, "/chunks/small", data, 1000)
    assert st == 400 and code_of(body) == "InvalidChunkSizeError", (st, body)
    assert keys_of(c, "chunks") == []
    # 8 KiB chunks, the last one shorter: stored.
    st, body = signed_chunked_put(server.port, "/chunks/ok", data, 8192)
    assert st == 200, body
    assert sha(c.get_object(Bucket="chunks", Key="ok")["Body"].read()) == sha(data)


def test_copy_source_not_utf8_is_invalid_argument(server):
    """x-amz-copy-source that decodes to no UTF-8 text (or holds NUL, or a bad escape):
    400 InvalidArgument, as S3 ("Invalid copy source encoding"), not 404 NoSuchKey."""
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="cpsrc")
    data = os.urandom(2000)
    c.put_object(Bucket="cpsrc", Key="src", Body=data)
    for src in ("/cpsrc/%FF", "/cpsrc/a%C0%AF", "cpsrc/a%00b", "/cpsrc/%zz", "/cp%FF/src", "/cpsrc/%ED%A0%80"):
        st, body, _ = signed_request(server.port, "PUT", "/cpsrc/dst",
                                     headers={"x-amz-copy-source": src})
        assert st == 400 and code_of(body) == "InvalidArgument", (src, st, body)
        # UploadPartCopy reads it the same way.
        up = c.create_multipart_upload(Bucket="cpsrc", Key="mp")["UploadId"]
        st, body, _ = signed_request(server.port, "PUT",
                                     "/cpsrc/mp?partNumber=1&uploadId=" + up,
                                     headers={"x-amz-copy-source": src})
        assert st == 400 and code_of(body) == "InvalidArgument", (src, st, body)
        c.abort_multipart_upload(Bucket="cpsrc", Key="mp", UploadId=up)
    assert keys_of(c, "cpsrc") == ["src"]
    c.copy_object(Bucket="cpsrc", Key="dst", CopySource={"Bucket": "cpsrc", "Key": "src"})
    assert sha(c.get_object(Bucket="cpsrc", Key="dst")["Body"].read()) == sha(data)
    st, body, _ = signed_request(server.port, "PUT", "/cpsrc/none",
                                 headers={"x-amz-copy-source": "/cpsrc/missing%C3%A9"})
    assert st == 404 and code_of(body) == "NoSuchKey"


def test_delete_objects_control_character_keys(server):
    """S3 answers MalformedXML when a DeleteObjects body carries a control character raw
    (XML 1.0 has no such character; botocore writes them so), and so does warmlake: such a
    key is deleted with DeleteObject. CR, LF and TAB may be sent (CR as &#13;, as the S3
    guide asks), and are what they name."""
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="dctl")
    for k in ("a\x01b", "cr\rlf\ntab\t"):
        c.put_object(Bucket="dctl", Key=k, Body=b"x")
    for xml in ("<Delete><Object><Key>a\x01b</Key></Object></Delete>",
                "<Delete><Object><Key>a&#x1;b</Key></Object></Delete>"):
        st, body, _ = signed_request(server.port, "POST", "/dctl?delete", xml.encode(),
                                     headers={"Content-MD5": md5_of(xml.encode())})
        assert st == 400 and code_of(body) == "MalformedXML", (xml, body)
    with pytest.raises(ClientError) as e:
        c.delete_objects(Bucket="dctl", Delete={"Objects": [{"Key": "a\x01b"}]})
    assert e.value.response["Error"]["Code"] == "MalformedXML"
    assert sorted(keys_of(c, "dctl")) == sorted(["a\x01b", "cr\rlf\ntab\t"])
    xml = b"<Delete><Object><Key>cr&#13;lf\ntab\t</Key></Object></Delete>"
    st, body, _ = signed_request(server.port, "POST", "/dctl?delete", xml,
                                 headers={"Content-MD5": md5_of(xml)})
    assert st == 200 and b"<Deleted>" in body, body
    c.delete_object(Bucket="dctl", Key="a\x01b")
    assert keys_of(c, "dctl") == []


def test_with_newest_botocore(server):
    """The same tests under the newest botocore (DeleteObjects with x-amz-checksum-*)."""
    run_under_newest_botocore("test_s3_conformance.py")


def test_not_found_errors_name_what_was_not_found(server):
    """S3's NoSuchKey names the Key, NoSuchBucket the BucketName, NoSuchVersion the Key and
    VersionId, beside Code and Message (a conformance sweep found them missing)."""
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="named")
    c.put_bucket_versioning(Bucket="named", VersioningConfiguration={"Status": "Enabled"})
    c.put_object(Bucket="named", Key="here", Body=b"x")
    st, body, _ = signed_request(server.port, "GET", "/named/not%20here")
    e = ET.fromstring(body)
    assert st == 404 and e.findtext("Code") == "NoSuchKey" and e.findtext("Key") == "not here"
    st, body, _ = signed_request(server.port, "GET", "/no-such-bucket-named/k")
    e = ET.fromstring(body)
    assert st == 404 and e.findtext("Code") == "NoSuchBucket"
    assert e.findtext("BucketName") == "no-such-bucket-named"
    vid = "0" * len(c.list_object_versions(Bucket="named")["Versions"][0]["VersionId"])
    st, body, _ = signed_request(server.port, "GET", "/named/here?versionId=" + vid)
    e = ET.fromstring(body)
    assert st == 404 and e.findtext("Code") == "NoSuchVersion", body
    assert e.findtext("Key") == "here" and e.findtext("VersionId") == vid
