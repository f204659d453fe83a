"""More of the S3 surface and of the node's limits, each against a real
warmlaked: Put*Acl (canned and XML), UploadPartCopy, virtual-host style,
503 SlowDown when the drives' write budget is spent, 507 when they are
full, the connection limit, header size and header/idle timeouts. Content
is checked by hash; no partial object may ever be visible."""
import base64
import hashlib
import json
import os
import socket
import subprocess
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET

import botocore
import pytest

from conftest import AK, AK2, BUILD, SK, SK2, Server, recv_to_close, s3_client, signed_request


def sha(b):
    return hashlib.sha256(b).hexdigest()


def anon_get(server, path):
    try:
        with urllib.request.urlopen(server.endpoint + path, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_put_acls(server):
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="acl-b")
    data = os.urandom(100_000)
    c.put_object(Bucket="acl-b", Key="o", Body=data)
    lm = c.head_object(Bucket="acl-b", Key="o")["LastModified"]
    assert anon_get(server, "/acl-b/o")[0] == 403
    c.put_object_acl(Bucket="acl-b", Key="o", ACL="public-read")
    st, body = anon_get(server, "/acl-b/o")
    assert st == 200 and sha(body) == sha(data)
    grants = c.get_object_acl(Bucket="acl-b", Key="o")["Grants"]
    assert any(g["Grantee"].get("URI", "").endswith("AllUsers") for g in grants)
    # The data and its date are untouched by an ACL change.
    h = c.head_object(Bucket="acl-b", Key="o")
    assert h["LastModified"] == lm and h["ContentLength"] == len(data)
    # Back to private with an AccessControlPolicy body.
    owner = c.get_object_acl(Bucket="acl-b", Key="o")["Owner"]
    c.put_object_acl(Bucket="acl-b", Key="o", AccessControlPolicy={
        "Owner": owner,
        "Grants": [{"Grantee": {"Type": "CanonicalUser", "ID": owner["ID"]},
                    "Permission": "FULL_CONTROL"}]})
    assert anon_get(server, "/acl-b/o")[0] == 403
    # ...and public again through the XML form of AllUsers READ.
    c.put_object_acl(Bucket="acl-b", Key="o", AccessControlPolicy={
        "Owner": owner,
        "Grants": [{"Grantee": {"Type": "Group",
                                "URI": "http://acs.amazonaws.com/groups/global/AllUsers"},
                    "Permission": "READ"}]})
    assert anon_get(server, "/acl-b/o")[0] == 200
    # A grant warmlake cannot honour (no logs to deliver) is refused, not silently dropped.
    with pytest.raises(botocore.exceptions.ClientError) as e:
        c.put_object_acl(Bucket="acl-b", Key="o", AccessControlPolicy={
            "Owner": owner,
            "Grants": [{"Grantee": {"Type": "Group",
                                    "URI": "http://acs.amazonaws.com/groups/s3/LogDelivery"},
                        "Permission": "WRITE"}]})
    assert e.value.response["Error"]["Code"] == "NotImplemented"
    assert anon_get(server, "/acl-b/o")[0] == 200  # the ACL before it stays
    # authenticated-read: any signed-in user reads, anonymous requests do not.
    c.put_object_acl(Bucket="acl-b", Key="o", ACL="authenticated-read")
    assert anon_get(server, "/acl-b/o")[0] == 403
    other = s3_client(server.endpoint, AK2, SK2)
    assert other.get_object(Bucket="acl-b", Key="o")["Body"].read()
    grants = c.get_object_acl(Bucket="acl-b", Key="o")["Grants"]
    assert grants[0]["Grantee"]["URI"].endswith("/AuthenticatedUsers")
    assert grants[0]["Permission"] == "READ"
    with pytest.raises(botocore.exceptions.ClientError) as e:
        c.put_object_acl(Bucket="acl-b", Key="o", ACL="no-such-canned-acl")
    assert e.value.response["Error"]["Code"] == "InvalidArgument"
    # Bucket ACL: anonymous listing follows it.
    assert anon_get(server, "/acl-b")[0] == 403
    c.put_bucket_acl(Bucket="acl-b", ACL="public-read")
    st, body = anon_get(server, "/acl-b")
    assert st == 200 and b"<Key>o</Key>" in body
    c.put_bucket_acl(Bucket="acl-b", ACL="private")
    assert anon_get(server, "/acl-b")[0] == 403
    with pytest.raises(botocore.exceptions.ClientError) as e:
        c.put_object_acl(Bucket="acl-b", Key="missing", ACL="public-read")
    assert e.value.response["Error"]["Code"] == "NoSuchKey"


def test_upload_part_copy(server):
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="upc")
    src = os.urandom(12 * 1024 * 1024 + 333)
    c.put_object(Bucket="upc", Key="src", Body=src)
    up = c.create_multipart_upload(Bucket="upc", Key="dst")["UploadId"]
    cut = 5 * 1024 * 1024 + 17
    p1 = c.upload_part_copy(Bucket="upc", Key="dst", UploadId=up, PartNumber=1,
                            CopySource={"Bucket": "upc", "Key": "src"},
                            CopySourceRange="bytes=0-%d" % (cut - 1))
    p2 = c.upload_part_copy(Bucket="upc", Key="dst", UploadId=up, PartNumber=2,
                            CopySource="upc/src",
                            CopySourceRange="bytes=%d-%d" % (cut, len(src) - 1))
    tail = os.urandom(1000)
    p3 = c.upload_part(Bucket="upc", Key="dst", UploadId=up, PartNumber=3, Body=tail)
    assert p1["CopyPartResult"]["ETag"] == '"%s"' % hashlib.md5(src[:cut]).hexdigest()
    c.complete_multipart_upload(Bucket="upc", Key="dst", UploadId=up, MultipartUpload={"Parts": [
        {"PartNumber": 1, "ETag": p1["CopyPartResult"]["ETag"]},
        {"PartNumber": 2, "ETag": p2["CopyPartResult"]["ETag"]},
        {"PartNumber": 3, "ETag": p3["ETag"]}]})
    got = c.get_object(Bucket="upc", Key="dst")["Body"].read()
    assert sha(got) == sha(src + tail)
    up = c.create_multipart_upload(Bucket="upc", Key="dst2")["UploadId"]
    for rng, code in (("bytes=5-2", "InvalidArgument"), ("bytes=0-%d" % len(src), "InvalidArgument"),
                      ("items=0-1", "InvalidArgument")):
        with pytest.raises(botocore.exceptions.ClientError) as e:
            c.upload_part_copy(Bucket="upc", Key="dst2", UploadId=up, PartNumber=1,
                               CopySource="upc/src", CopySourceRange=rng)
        assert e.value.response["Error"]["Code"] == code
    with pytest.raises(botocore.exceptions.ClientError) as e:
        c.upload_part_copy(Bucket="upc", Key="dst2", UploadId=up, PartNumber=1,
                           CopySource="upc/nothing")
    assert e.value.response["Error"]["Code"] == "NoSuchKey"
    # A whole-object part copy without a range.
    p = c.upload_part_copy(Bucket="upc", Key="dst2", UploadId=up, PartNumber=1, CopySource="upc/src")
    assert p["CopyPartResult"]["ETag"] == '"%s"' % hashlib.md5(src).hexdigest()
    c.abort_multipart_upload(Bucket="upc", Key="dst2", UploadId=up)


def signed(method, path, host, port, body=b""):
    return signed_request(port, method, path, body, host=host)[:2]


def test_virtual_host_style(datadir):
    s = Server(datadir, extra=["--domain", "s3.warmlake.test"]).start()
    try:
        c = s3_client(s.endpoint)
        c.create_bucket(Bucket="vh-bucket")
        host = "vh-bucket.s3.warmlake.test:%d" % s.port
        data = os.urandom(70_000)
        st, _ = signed("PUT", "/dir/key%201", host, s.port, data)
        assert st == 200
        # The same object through path style, and a listing through the virtual host.
        got = c.get_object(Bucket="vh-bucket", Key="dir/key 1")["Body"].read()
        assert sha(got) == sha(data)
        st, body = signed("GET", "/?list-type=2&prefix=dir%2F", host, s.port)
        assert st == 200 and b"<Key>dir/key 1</Key>" in body
        st, body = signed("GET", "/dir/key%201", host, s.port)
        assert st == 200 and sha(body) == sha(data)
        # Hosts outside the domain stay path style.
        assert c.list_objects_v2(Bucket="vh-bucket")["KeyCount"] == 1
        # CompleteMultipartUpload's Location is the object's URL as the client reached it
        # (AWS: "The URI that identifies the newly created object"), the key URL-encoded:
        # through the virtual host, and path style.
        st, body = signed("POST", "/mp%20key?uploads", host, s.port)
        up = ET.fromstring(body).findtext("{*}UploadId")
        st, _ = signed("PUT", "/mp%%20key?partNumber=1&uploadId=%s" % up, host, s.port, b"abc")
        assert st == 200
        done = ("<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>\"%s\"</ETag>"
                "</Part></CompleteMultipartUpload>" % hashlib.md5(b"abc").hexdigest()).encode()
        st, body = signed("POST", "/mp%%20key?uploadId=%s" % up, host, s.port, done)
        assert st == 200, body
        assert ET.fromstring(body).findtext("{*}Location") == "http://%s/mp%%20key" % host
        key = "a b/\u00fc+&"
        up = c.create_multipart_upload(Bucket="vh-bucket", Key=key)["UploadId"]
        etag = c.upload_part(Bucket="vh-bucket", Key=key, UploadId=up, PartNumber=1,
                             Body=b"xyz")["ETag"]
        out = c.complete_multipart_upload(Bucket="vh-bucket", Key=key, UploadId=up,
                                          MultipartUpload={"Parts": [{"PartNumber": 1,
                                                                      "ETag": etag}]})
        assert out["Location"] == "http://127.0.0.1:%d/vh-bucket/a%%20b/%%C3%%BC%%2B%%26" % s.port
    finally:
        s.stop()


def test_slowdown_when_budget_spent(datadir):
    # A write budget of a thousandth of a drive per day is spent by the first MiBs.
    s = Server(datadir, extra=["--dwpd", "0.001"]).start()
    try:
        c = s3_client(s.endpoint)
        c.create_bucket(Bucket="slow")
        seen = None
        for i in range(20):
            try:
                c.put_object(Bucket="slow", Key="k%d" % i, Body=os.urandom(8 << 20))
            except botocore.exceptions.ClientError as e:
                seen = e.response
                break
        assert seen is not None, "the budget was never exhausted"
        assert seen["Error"]["Code"] == "SlowDown"
        assert seen["ResponseMetadata"]["HTTPStatusCode"] == 503
        assert seen["ResponseMetadata"]["HTTPHeaders"].get("retry-after") == "1"
        # The refused object is not visible; the acknowledged ones read back whole.
        keys = [o["Key"] for o in c.list_objects_v2(Bucket="slow").get("Contents", [])]
        assert "k%d" % i not in keys and len(keys) == i
        for k in keys:
            assert len(c.get_object(Bucket="slow", Key=k)["Body"].read()) == 8 << 20
        # Deletes still work while writes are throttled.
        for k in keys:
            c.delete_object(Bucket="slow", Key=k)
    finally:
        s.stop()


def test_insufficient_storage_when_full(datadir):
    s = Server(datadir, extra=["--drive-capacity", "96M", "--segment-size", "8M"]).start()
    try:
        c = s3_client(s.endpoint)
        c.create_bucket(Bucket="full")
        stored, seen = {}, None
        for i in range(200):
            body = os.urandom(16 << 20)
            try:
                c.put_object(Bucket="full", Key="k%d" % i, Body=body)
                stored["k%d" % i] = sha(body)
            except botocore.exceptions.ClientError as e:
                seen = e.response
                break
        assert seen is not None, "the drives never filled"
        assert seen["ResponseMetadata"]["HTTPStatusCode"] == 507
        assert seen["Error"]["Code"] == "InsufficientStorage"
        keys = {o["Key"] for o in c.list_objects_v2(Bucket="full").get("Contents", [])}
        assert keys == set(stored)  # nothing half-written is listed
        for k, h in stored.items():
            assert sha(c.get_object(Bucket="full", Key=k)["Body"].read()) == h
        for k in stored:  # a full node still takes deletes
            c.delete_object(Bucket="full", Key=k)
    finally:
        s.stop()


def wait_closed(sock, limit=30):
    """True once the server closed the connection (EOF or reset) within limit seconds."""
    sock.settimeout(limit)
    try:
        while True:
            if not sock.recv(65536):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


def put_head_under_way(port, path):
    """A socket whose signed PUT of 5 bytes the server took up to its body (its 100 Continue
    came): a request under way, holding its connection."""
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    class Signer(S3SigV4Auth):
        def payload(self, request):
            return "UNSIGNED-PAYLOAD"

    host = "127.0.0.1:%d" % port
    req = AWSRequest(method="PUT", url="http://%s%s" % (host, path), data=b"",
                     headers={"Content-Length": "5", "Expect": "100-continue"})
    Signer(Credentials(AK, SK), "s3", "us-east-1").add_auth(req)
    hdrs = dict(req.headers.items())
    hdrs["Host"] = host
    head = "PUT %s HTTP/1.1\r\n" % path + "".join("%s: %s\r\n" % kv for kv in hdrs.items())
    sk = socket.create_connection(("127.0.0.1", port), timeout=30)
    sk.sendall(head.encode() + b"\r\n")
    got = b""
    while b"100 Continue" not in got:
        chunk = sk.recv(4096)
        assert chunk, got
        got += chunk
    return sk


def test_connection_limit_and_timeouts(datadir):
    s = Server(datadir, extra=["--max-conns", "3", "--header-timeout", "1",
                               "--idle-timeout", "2", "--max-header", "4K"]).start()
    try:
        c = s3_client(s.endpoint)
        c.create_bucket(Bucket="lim")
        held = [socket.create_connection(("127.0.0.1", s.port)) for _ in range(3)]
        for h in held:  # each a client's pooled connection: one request answered, then idle
            h.settimeout(30)
            h.sendall(b"GET /lim HTTP/1.1\r\nHost: x\r\n\r\n")
            assert h.recv(4096).startswith(b"HTTP/1.1 ")
        # At the limit, a connection idle between requests makes room for a newcomer (or the
        # idle timeout frees one first): the newcomer is served.
        extra = socket.create_connection(("127.0.0.1", s.port))
        extra.settimeout(30)
        extra.sendall(b"GET /lim HTTP/1.1\r\nHost: x\r\n\r\n")
        resp = extra.recv(4096)
        assert resp.startswith(b"HTTP/1.1 ") and not resp.startswith(b"HTTP/1.1 503"), resp
        extra.close()
        # A client that sends half a request line is cut off by the header timeout...
        held[1].sendall(b"GET /slow HTTP/1.1\r\nHost: x\r\n")
        assert wait_closed(held[1])
        # ...an idle connection by the timeouts too.
        assert wait_closed(held[2])
        for h in held:
            h.close()
        # Every slot held by a request under way: a newcomer is refused (503), none of them
        # is closed for it, and each completes.
        busy = [put_head_under_way(s.port, "/lim/b%d" % i) for i in range(3)]
        extra = socket.create_connection(("127.0.0.1", s.port))
        extra.settimeout(30)
        resp = extra.recv(4096)
        assert resp.startswith(b"HTTP/1.1 503"), resp
        assert wait_closed(extra)
        extra.close()
        for b in busy:
            b.sendall(b"hello")
            got = b""
            while b"\r\n\r\n" not in got:
                chunk = b.recv(4096)
                assert chunk, got
                got += chunk
            assert got.startswith(b"HTTP/1.1 200"), got
            b.close()
        # Freed slots take new connections; a real request works.
        assert c.get_object(Bucket="lim", Key="b2")["Body"].read() == b"hello"
        # Headers over the configured limit: S3's 400 RequestHeaderSectionTooLarge, and the
        # connection is closed.
        big = socket.create_connection(("127.0.0.1", s.port))
        big.sendall(b"GET /lim HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 5000 + b"\r\n\r\n")
        big.settimeout(30)
        got = recv_to_close(big)
        assert got.startswith(b"HTTP/1.1 400") and b"RequestHeaderSectionTooLarge" in got, got
        big.close()
        assert c.list_objects_v2(Bucket="lim")["KeyCount"] == 3
    finally:
        s.stop()


def node_reads(server):
    st, body, _ = signed_request(server.port, "GET", "/_warmlake/stats")
    assert st == 200
    drives = json.loads(body)["drives"]
    return sum(d["reads_direct"] for d in drives), sum(d["reads_copied"] for d in drives)


def flip_byte(path, off):
    with open(path, "r+b") as f:
        f.seek(off)
        b = f.read(1)
        f.seek(off)
        f.write(bytes([b[0] ^ 0x55]))


def block_at(datadir, drive, key, shard):
    """(segment path, offset) of the newest copy of key's block `shard` on a stopped node's
    drive, from `wl-drive dump`: compaction may have moved it out of the segment it was
    written to while the node ran (a sealed, mostly empty segment is worth relocating)."""
    d = os.path.join(datadir, "drive%d" % drive)
    out = subprocess.run([os.path.join(BUILD, "storage", "wl-drive"), "dump", d],
                         capture_output=True, check=True, timeout=60).stdout
    best = None
    for line in out.split(b"\n"):
        f = dict(x.split(b"=", 1) for x in line.split(b" ") if b"=" in x)
        if (f.get(b"type") == b"data" and f.get(b"key") == key.encode()
                and f.get(b"shard") == str(shard).encode()
                and f.get(b"bucket", b"").endswith(b"\x01")):
            seg, off = int(f[b"seg"]), int(f[b"off"])
            if best is None or seg > best[0]:  # a relocated copy goes to a newer segment
                best = (seg, off)
    assert best, "no block %s/%d on drive %d" % (key, shard, drive)
    return os.path.join(d, "segments", "%08x.seg" % best[0]), best[1]


def test_large_blocks_read_in_place(datadir):
    """Blocks of large objects are read by the drives straight into the GET's
    buffers (no bounce copy) and still verified end to end: whole objects and
    ranges read right, the node counts the direct reads, bytes flipped on up to
    m drives are rebuilt from parity, and on m+1 the GET fails, never wrong data."""
    s = Server(datadir).start()
    c = s3_client(s.endpoint)
    c.create_bucket(Bucket="direct-b")
    objs = {"big": os.urandom(9 * 2**20 + 123), "mid": os.urandom(2**20), "small": os.urandom(5000)}
    for k, v in objs.items():  # big first: its first blocks lead every drive's first segment
        c.put_object(Bucket="direct-b", Key=k, Body=v)
    direct0, _ = node_reads(s)
    for k, v in objs.items():
        assert sha(c.get_object(Bucket="direct-b", Key=k)["Body"].read()) == sha(v)
    direct1, _ = node_reads(s)
    # 9 MiB + 123 at 4 x 1 MiB blocks: 9 whole blocks and a short one; 1 MiB: 4 x 256 KiB.
    assert direct1 - direct0 >= 9 + 4
    big = objs["big"]
    for a, b in [(0, 0), (1, 2**20), (4 * 2**20 - 7, 4 * 2**20 + 7), (len(big) - 200, len(big) - 1)]:
        got = c.get_object(Bucket="direct-b", Key="big", Range="bytes=%d-%d" % (a, b))["Body"].read()
        assert sha(got) == sha(big[a:b + 1])
    # Rot inside the first block on two drives (m = 2): rebuilt, right bytes.
    s.stop()

    def rot(i):  # a byte 300,000 into the record of stripe 0's block on drive i
        path, off = block_at(datadir, i, "big", i)
        flip_byte(path, off + 300_000)
    for i in (0, 3):
        rot(i)
    s.start()
    c = s3_client(s.endpoint)
    assert sha(c.get_object(Bucket="direct-b", Key="big")["Body"].read()) == sha(big)
    # A third: stripe 0 has k - 1 good blocks left. An error, never wrong bytes.
    s.stop()
    rot(5)
    s.start()
    c = s3_client(s.endpoint)
    with pytest.raises(botocore.exceptions.ClientError) as e:
        c.get_object(Bucket="direct-b", Key="big")
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503
    assert sha(c.get_object(Bucket="direct-b", Key="mid")["Body"].read()) == sha(objs["mid"])
    s.stop()


def test_mid_object_rot_many_readers(datadir):
    """A 1 MiB object is one stripe of four 256 KiB blocks, read in one parallel
    round (or, with the set's pool saturated, one after another by the request's
    worker): with two of those blocks rotted, readers at once, whichever way
    their round went, all get the right bytes rebuilt from parity, whole and in
    ranges; with three, every GET fails (503), never a wrong byte."""
    import concurrent.futures
    s = Server(datadir).start()
    c = s3_client(s.endpoint)
    c.create_bucket(Bucket="rot-b")
    body = os.urandom(2**20)
    c.put_object(Bucket="rot-b", Key="mid", Body=body)
    assert sha(c.get_object(Bucket="rot-b", Key="mid")["Body"].read()) == sha(body)
    s.stop()

    def rot(i):  # a byte 100,000 into the payload of data block i (on drive i)
        path, off = block_at(datadir, i, "mid", i)
        flip_byte(path, off + 4096 + 100_000)
    rot(1)
    rot(2)
    s.start()
    clients = [s3_client(s.endpoint) for _ in range(12)]

    def reader(n):
        cl = clients[n]
        for j in range(4):
            a = (n * 7919 + j * 104729) % (2**20 - 1)
            got = cl.get_object(Bucket="rot-b", Key="mid")["Body"].read()
            assert sha(got) == sha(body)
            got = cl.get_object(Bucket="rot-b", Key="mid", Range="bytes=%d-" % a)["Body"].read()
            assert got == body[a:]
        return n
    with concurrent.futures.ThreadPoolExecutor(12) as ex:
        assert sorted(ex.map(reader, range(12))) == list(range(12))
    s.stop()
    rot(0)
    s.start()
    c = s3_client(s.endpoint)
    for _ in range(3):
        with pytest.raises(botocore.exceptions.ClientError) as e:
            c.get_object(Bucket="rot-b", Key="mid")
        assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503
    s.stop()


def read_response(f):
    """One HTTP/1.1 response (Content-Length framed) from a buffered socket file."""
    status = int(f.readline().split()[1])
    length = 0
    while True:
        line = f.readline()
        if line in (b"\r\n", b""):
            break
        name, _, value = line.decode().partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    return status, f.read(length)


def test_bodies_in_pieces_and_pipelined(server):
    """A PUT body that arrives in uneven pieces with pauses, then, pipelined on the
    same connection, a GET, another PUT and a GET: answered in order, and what is
    stored is what was sent (the loop reads a body straight into its request's
    buffer, and never past the body's end into the next request)."""
    import random
    import time
    import boto3
    from botocore.config import Config
    from conftest import AK, SK
    s3_client(server.endpoint).create_bucket(Bucket="pipe")
    v4 = boto3.session.Session().client(
        "s3", endpoint_url=server.endpoint, aws_access_key_id=AK, aws_secret_access_key=SK,
        region_name="us-east-1",
        config=Config(signature_version="s3v4", s3={"addressing_style": "path"}))

    def req(method, key, body=b""):
        op = "put_object" if method == "PUT" else "get_object"
        url = v4.generate_presigned_url(op, Params={"Bucket": "pipe", "Key": key}, ExpiresIn=600)
        path = url.split(str(server.port), 1)[1]
        return ("%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Length: %d\r\n\r\n"
                % (method, path, server.port, len(body))).encode() + body

    a, b = os.urandom(3 * 2**20 + 17), os.urandom(70_001)
    rnd = random.Random(7)
    s = socket.create_connection(("127.0.0.1", server.port))
    s.settimeout(20)
    try:
        first = req("PUT", "a", a)
        head, end = len(first) - len(a), len(first) - 1000
        s.sendall(first[:head])
        pos = head
        while pos < end:
            n = min(rnd.choice([1, 7, 4096, 65536, 200_000]), end - pos)
            s.sendall(first[pos:pos + n])
            pos += n
            if rnd.random() < 0.05:
                time.sleep(0.01)
        time.sleep(0.2)  # the handler drains what came; the rest arrives with the next requests
        s.sendall(first[end:] + req("GET", "a") + req("PUT", "b", b) + req("GET", "b"))
        f = s.makefile("rb")
        got = [read_response(f) for _ in range(4)]
    finally:
        s.close()
    assert [st for st, _ in got] == [200, 200, 200, 200]
    assert sha(got[1][1]) == sha(a) and sha(got[3][1]) == sha(b)


def test_public_read_write_bucket_takes_anyones_put(server):
    """A public-read-write bucket takes anyone's plain PUT (anonymous or another user's),
    as S3's AllUsers WRITE grant does; other buckets do not. The owner creating their
    bucket again is 200 in us-east-1 (S3's legacy answer there), its objects untouched."""
    import urllib.error
    import urllib.request
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="pubw", ACL="public-read-write")
    c.create_bucket(Bucket="privw")
    data = os.urandom(100000)
    req = urllib.request.Request(server.endpoint + "/pubw/anon", data=data, method="PUT")
    assert urllib.request.urlopen(req, timeout=30).status == 200
    got = c.get_object(Bucket="pubw", Key="anon")["Body"].read()
    assert hashlib.md5(got).hexdigest() == hashlib.md5(data).hexdigest()
    other = s3_client(server.endpoint, AK2, SK2)
    other.put_object(Bucket="pubw", Key="other", Body=b"other-data")
    # The other user's object is its own (S3's ObjectWriter): the bucket's owner reads it
    # when given READ, as bucket-owner-read gives.
    with pytest.raises(botocore.exceptions.ClientError) as e:
        c.get_object(Bucket="pubw", Key="other")
    assert e.value.response["Error"]["Code"] == "AccessDenied"
    other.put_object(Bucket="pubw", Key="other", Body=b"other-data", ACL="bucket-owner-read")
    assert c.get_object(Bucket="pubw", Key="other")["Body"].read() == b"other-data"
    assert other.head_bucket(Bucket="pubw")["ResponseMetadata"]["HTTPStatusCode"] == 200
    with pytest.raises(botocore.exceptions.ClientError) as e:
        other.put_object(Bucket="privw", Key="x", Body=b"x")
    assert e.value.response["Error"]["Code"] == "AccessDenied"
    req = urllib.request.Request(server.endpoint + "/privw/anon", data=b"x", method="PUT")
    with pytest.raises(urllib.error.HTTPError) as he:
        urllib.request.urlopen(req, timeout=30)
    assert he.value.code == 403
    # WRITE deletes too (as S3's: create, overwrite, delete); sub-resources stay the owner's.
    req = urllib.request.Request(server.endpoint + "/pubw/other?tagging", method="DELETE")
    with pytest.raises(urllib.error.HTTPError) as he:
        urllib.request.urlopen(req, timeout=30)
    assert he.value.code == 403
    req = urllib.request.Request(server.endpoint + "/pubw/anon", method="DELETE")
    assert urllib.request.urlopen(req, timeout=30).status == 204
    with pytest.raises(botocore.exceptions.ClientError) as e:
        c.head_object(Bucket="pubw", Key="anon")
    assert e.value.response["Error"]["Code"] == "404"
    assert c.create_bucket(Bucket="pubw")["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert c.get_object(Bucket="pubw", Key="other")["Body"].read() == b"other-data"
    with pytest.raises(botocore.exceptions.ClientError) as e:
        other.create_bucket(Bucket="pubw")
    assert e.value.response["Error"]["Code"] == "BucketAlreadyExists"


def test_list_buckets_paginated(server):
    """ListBuckets pages when asked (max-buckets, an opaque continuation token, prefix)."""
    import re
    c = s3_client(server.endpoint)
    names = ["lb-%02d" % i for i in range(7)] + ["other-b"]
    for n in names:
        c.create_bucket(Bucket=n)
    got, tok = [], None
    for _ in range(20):
        q = "/?max-buckets=3" + ("&continuation-token=" + urllib.parse.quote(tok, safe="")
                                 if tok else "")
        st, body, _ = signed_request(server.port, "GET", q)
        assert st == 200, body
        page = re.findall(rb"<Name>(.*?)</Name>", body)
        assert len(page) <= 3
        got += [n.decode() for n in page]
        m = re.search(rb"<ContinuationToken>(.*?)</ContinuationToken>", body)
        tok = m.group(1).decode() if m else None
        if not tok:
            break
    assert got == sorted(names)
    st, body, _ = signed_request(server.port, "GET", "/?prefix=lb-0")
    assert re.findall(rb"<Name>(.*?)</Name>", body) == [n.encode() for n in names[:7]]
    # With a parameter, each bucket says its region (S3's rule); without, none does.
    assert re.findall(rb"<BucketRegion>(.*?)</BucketRegion>", body) == [b"us-east-1"] * 7
    assert len(c.list_buckets()["Buckets"]) == len(names)
    st, body, _ = signed_request(server.port, "GET", "/")
    assert b"<BucketRegion>" not in body
    for bad in ("/?max-buckets=0", "/?continuation-token=%21%21",
                "/?continuation-token=" + urllib.parse.quote(base64.b64encode(b"lb-03"), safe="")):
        assert signed_request(server.port, "GET", bad)[0] == 400, bad


def test_session_token_not_issued_here_is_refused(server):
    """A long-term key sent with a session token this node never issued (it issues none) is
    refused with 400 InvalidToken, as S3 refuses it, in the header and in a presigned URL;
    taken as if absent, a client with stale temporary credentials worked here and failed on
    S3 (a probe). Without the token the same key works."""
    import boto3
    from botocore.config import Config
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="tok")
    c.put_object(Bucket="tok", Key="k", Body=b"v")
    t = boto3.session.Session().client(
        "s3", endpoint_url=server.endpoint, aws_access_key_id=AK, aws_secret_access_key=SK,
        aws_session_token="FwoGZXIvYXdzEBogus", region_name="us-east-1",
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 0},
                      signature_version="s3v4"))
    with pytest.raises(botocore.exceptions.ClientError) as e:
        t.get_object(Bucket="tok", Key="k")
    assert e.value.response["Error"]["Code"] == "InvalidToken"
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    url = t.generate_presigned_url("get_object", Params={"Bucket": "tok", "Key": "k"})
    assert "X-Amz-Security-Token=" in url
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(url, timeout=30)
    assert e.value.code == 400 and b"<Code>InvalidToken</Code>" in e.value.read()
    assert c.get_object(Bucket="tok", Key="k")["Body"].read() == b"v"
