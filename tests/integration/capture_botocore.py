"""Capture the requests a real botocore S3 client sends, without a server.

Run with any Python that has boto3 (Debian's 1.26 or the newest): prints a
JSON list of captured requests (method, raw path, raw query, headers, body
as hex) for PutObject with default settings (newest botocore: aws-chunked
with a trailing checksum), PutObject with SigV4 streaming signatures, a
GetObject with a Range, a ListObjectsV2, and a presigned GET URL.
"""
import json
import sys
from urllib.parse import urlsplit

import boto3
import botocore
from botocore.awsrequest import AWSResponse
from botocore.config import Config

ENDPOINT = "http://127.0.0.1:9000"
AK, SK = "AKIAWARMLAKETEST0001", "warmlake/secret+key/for/tests0000000000"
captured = []


class _Raw:
    def stream(self, *a, **k):
        return iter([b""])

    def read(self, *a, **k):
        return b""


def capture(request, **kwargs):
    body = request.body
    if hasattr(body, "read"):
        body = body.read()
    if isinstance(body, str):
        body = body.encode()
    u = urlsplit(request.url)
    headers = [(k, v.decode() if isinstance(v, bytes) else v) for k, v in request.headers.items()]
    if not any(k.lower() == "host" for k, _ in headers):
        headers.append(("Host", u.netloc))
    captured.append({"op": kwargs.get("event_name", ""), "method": request.method,
                     "path": u.path, "query": u.query, "headers": headers,
                     "body": (body or b"").hex()})
    headers_out = {"x-amz-request-id": "x", "ETag": '"0"', "Content-Length": "0"}
    return AWSResponse(request.url, 200, headers_out, _Raw())


def client(endpoint=ENDPOINT, **cfg):
    c = boto3.session.Session().client(
        "s3", endpoint_url=endpoint, aws_access_key_id=AK, aws_secret_access_key=SK,
        region_name="us-east-1", config=Config(s3={"addressing_style": "path"}, **cfg))
    c.meta.events.register("before-send", capture)
    return c


def main():
    body = bytes(range(256)) * 300 + b"tail"
    c = client()
    c.put_object(Bucket="bkt", Key="dir/obj with space+plus$.bin", Body=body)
    # Over TLS the newest botocore streams the body aws-chunked with a trailing
    # checksum (STREAMING-UNSIGNED-PAYLOAD-TRAILER). Nothing is sent: the
    # capture answers before any connection is made.
    client("https://127.0.0.1:9443").put_object(Bucket="bkt", Key="chunked", Body=body)
    try:
        c.get_object(Bucket="bkt", Key="dir/obj", Range="bytes=0-9")
    except Exception:
        pass  # the fake response has no body to parse
    try:
        c.list_objects_v2(Bucket="bkt", Prefix="dir/", MaxKeys=2)
    except Exception:
        pass
    url = client(signature_version="s3v4").generate_presigned_url("get_object", Params={"Bucket": "bkt", "Key": "a/b c"},
                                   ExpiresIn=3600)
    u = urlsplit(url)
    captured.append({"op": "presigned", "method": "GET", "path": u.path, "query": u.query,
                     "headers": [("Host", u.netloc)], "body": ""})
    json.dump({"botocore": botocore.__version__, "requests": captured,
               "body_sha256": __import__("hashlib").sha256(body).hexdigest(),
               "body_len": len(body)}, sys.stdout)


if __name__ == "__main__":
    main()
