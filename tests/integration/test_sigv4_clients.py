"""warmlake's SigV4 and aws-chunked code against what real S3 clients send.

Requests are captured from botocore (no server involved) and verified with
tests/tools/sigv4_check, which uses s3/sigv4.c and s3/chunked.c: every
signature must verify, a tampered one must not, and every upload body must
decode to exactly the bytes that were sent (compared by SHA-256).
"""
import json
import os
import shutil
import subprocess
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("WL_BUILD", os.path.join(ROOT, "build"))
CHECK = os.path.join(BUILD, "tests", "sigv4_check")
SK = "warmlake/secret+key/for/tests0000000000"


def pythons():
    """Debian's python (boto3 1.26) and the newest botocore on PATH, when they differ."""
    found = [("debian", "/usr/bin/python3")]
    newest = shutil.which("python3")
    if newest and os.path.realpath(newest) != os.path.realpath("/usr/bin/python3"):
        found.append(("newest", newest))
    return found


def capture(python):
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    out = subprocess.run([python, os.path.join(HERE, "capture_botocore.py")], env=env,
                         capture_output=True, check=False, timeout=120)
    if out.returncode != 0:
        pytest.skip("boto3 not usable with %s: %s" % (python, out.stderr.decode()[-300:]))
    return json.loads(out.stdout)


def check(req, secret=SK, body=None):
    lines = [secret, req["method"], req["path"], req["query"]]
    headers = req["headers"]
    payload = next((v for k, v in headers if k.lower() == "x-amz-content-sha256"),
                   "UNSIGNED-PAYLOAD")
    lines += [payload, str(len(headers))] + ["%s: %s" % (k, v) for k, v in headers]
    args = [CHECK]
    tmp = None
    if body is not None:
        tmp = tempfile.NamedTemporaryFile(delete=False)
        tmp.write(body)
        tmp.close()
        args.append(tmp.name)
    try:
        out = subprocess.run(args, input=("\n".join(lines) + "\n").encode(),
                             capture_output=True, timeout=60)
    finally:
        if tmp:
            os.unlink(tmp.name)
    return out.stdout.decode().split("\n")


@pytest.fixture(scope="module", params=pythons(), ids=lambda p: p[0])
def captured(request):
    if not os.path.exists(CHECK):
        pytest.fail("build first: %s missing" % CHECK)
    return capture(request.param[1])


def test_every_request_verifies(captured):
    assert captured["requests"], "nothing captured"
    for req in captured["requests"]:
        body = bytes.fromhex(req["body"]) if req["body"] else None
        out = check(req, body=body)
        assert out[0] == "OK", (captured["botocore"], req["op"], req["path"], out)


def test_tampering_is_refused(captured):
    for req in captured["requests"]:
        assert check(req, secret=SK[:-1] + "1")[0] == "DENIED", req["op"]
        moved = dict(req, path=req["path"] + "x")
        assert check(moved)[0] == "DENIED", req["op"]


def test_upload_body_decodes_exactly(captured):
    puts = [r for r in captured["requests"] if r["method"] == "PUT"]
    assert puts
    for req in puts:
        out = check(req, body=bytes.fromhex(req["body"]))
        decoded = next(l for l in out if l.startswith("DECODED"))
        _, n, digest = decoded.split()
        assert int(n) == captured["body_len"]
        assert digest == captured["body_sha256"]
        encoding = next((v for k, v in req["headers"] if k.lower() == "content-encoding"), "")
        if "aws-chunked" in encoding and any(k.lower() == "x-amz-trailer"
                                             for k, _ in req["headers"]):
            trailer = next(l for l in out if l.startswith("TRAILER"))
            assert "(missing)" not in trailer, trailer


def test_corrupted_chunked_body_is_refused(captured):
    for req in captured["requests"]:
        encoding = next((v for k, v in req["headers"] if k.lower() == "content-encoding"), "")
        if req["method"] != "PUT" or "aws-chunked" not in encoding:
            continue
        body = bytearray.fromhex(req["body"])
        body = body[: len(body) // 2]  # truncated upload
        out = check(req, body=bytes(body))
        assert any(l.startswith("BODY_ERROR") for l in out), out
