"""CORS: Put/Get/DeleteBucketCors, preflight OPTIONS answered from the
rules, Access-Control-* headers on actual requests, and the whole thing seen
from a real browser: a page served from another origin on loopback uploads
and downloads an object with fetch() in headless Chromium, once under a rule
that allows it and once under one that does not."""
import hashlib
import http.server
import os
import shutil
import socket
import subprocess
import tempfile
import threading

import pytest
from botocore.exceptions import ClientError

from conftest import run_under_newest_botocore, s3_client, signed_request
from test_hardening import presigner, request_head
from test_s3_gateway import aws

RULES = {"CORSRules": [
    {"AllowedOrigins": ["http://app.example.com", "https://*.example.org"],
     "AllowedMethods": ["GET", "PUT"], "AllowedHeaders": ["x-amz-*", "content-type"],
     "ExposeHeaders": ["ETag", "x-amz-request-id"], "MaxAgeSeconds": 600},
    {"AllowedOrigins": ["*"], "AllowedMethods": ["HEAD"]}]}


def code(e):
    return e.value.response["Error"]["Code"]


def preflight(server, path, origin, method, headers=None):
    h = {"Host": "127.0.0.1:%d" % server.port, "Origin": origin,
         "Access-Control-Request-Method": method}
    if headers:
        h["Access-Control-Request-Headers"] = headers
    s = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    try:
        s.sendall(request_head("OPTIONS", path, h))
        data = b""
        while b"\r\n\r\n" not in data:
            c = s.recv(65536)
            if not c:
                break
            data += c
    finally:
        s.close()
    head = data.split(b"\r\n\r\n", 1)[0].decode()
    lines = head.split("\r\n")
    status = int(lines[0].split()[1])
    hdrs = {}
    for ln in lines[1:]:
        k, v = ln.split(":", 1)
        hdrs[k.strip().lower()] = v.strip()
    return status, hdrs


def test_bucket_cors_api(server):
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="cors")
    with pytest.raises(ClientError) as e:
        c.get_bucket_cors(Bucket="cors")
    assert code(e) == "NoSuchCORSConfiguration"
    c.put_bucket_cors(Bucket="cors", CORSConfiguration=RULES)
    got = c.get_bucket_cors(Bucket="cors")["CORSRules"]
    assert got[0]["AllowedOrigins"] == RULES["CORSRules"][0]["AllowedOrigins"]
    assert got[0]["MaxAgeSeconds"] == 600 and got[1]["AllowedMethods"] == ["HEAD"]
    with pytest.raises(ClientError) as e:
        c.put_bucket_cors(Bucket="cors", CORSConfiguration={"CORSRules": [
            {"AllowedOrigins": ["*"], "AllowedMethods": ["PATCH"]}]})
    assert code(e) == "InvalidRequest"
    st, body, _ = signed_request(server.port, "PUT", "/cors?cors", b"<CORSConfiguration><x>")
    assert st == 400 and b"MalformedXML" in body
    c.delete_bucket_cors(Bucket="cors")
    with pytest.raises(ClientError) as e:
        c.get_bucket_cors(Bucket="cors")
    assert code(e) == "NoSuchCORSConfiguration"


def test_preflight_and_actual_requests(server):
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="cors")
    c.put_object(Bucket="cors", Key="o", Body=b"data")
    st, h = preflight(server, "/cors/o", "http://app.example.com", "PUT")
    assert st == 403  # no rules yet
    c.put_bucket_cors(Bucket="cors", CORSConfiguration=RULES)
    st, h = preflight(server, "/cors/o", "http://app.example.com", "PUT",
                      "Content-Type, X-Amz-Meta-A")
    assert st == 200
    assert h["access-control-allow-origin"] == "http://app.example.com"
    assert set(h["access-control-allow-methods"].split(", ")) == {"GET", "PUT"}
    assert h["access-control-allow-headers"] == "Content-Type, X-Amz-Meta-A"
    assert h["access-control-max-age"] == "600"
    assert "ETag" in h["access-control-expose-headers"]
    assert preflight(server, "/cors/o", "https://a.b.example.org", "GET")[0] == 200
    assert preflight(server, "/cors/o", "http://evil.example.net", "GET")[0] == 403
    assert preflight(server, "/cors/o", "http://app.example.com", "DELETE")[0] == 403
    assert preflight(server, "/cors/o", "http://app.example.com", "PUT", "authorization")[0] == 403
    st, h = preflight(server, "/cors/o", "http://anyone", "HEAD")
    assert st == 200 and h["access-control-allow-origin"] == "*"
    # Actual requests, signed or presigned: the headers when the origin is allowed.
    _, _, h = signed_request(server.port, "GET", "/cors/o", headers={"Origin": "http://app.example.com"})
    assert h.get("Access-Control-Allow-Origin") == "http://app.example.com"
    _, _, h = signed_request(server.port, "GET", "/cors/o", headers={"Origin": "http://evil.example.net"})
    assert "Access-Control-Allow-Origin" not in h
    url = presigner(server).generate_presigned_url("get_object", Params={"Bucket": "cors", "Key": "o"})
    import urllib.request
    req = urllib.request.Request(url, headers={"Origin": "https://x.example.org"})
    with urllib.request.urlopen(req, timeout=30) as r:
        assert r.headers["Access-Control-Allow-Origin"] == "https://x.example.org"
        assert r.read() == b"data"
    # A bucket deleted and made again starts without rules.
    c.delete_object(Bucket="cors", Key="o")
    c.delete_bucket(Bucket="cors")
    c.create_bucket(Bucket="cors")
    assert preflight(server, "/cors/o", "http://app.example.com", "GET")[0] == 403


PAGE = """<!doctype html><html><body><pre id="out">pending</pre><script>
(async () => {
  const out = document.getElementById("out");
  try {
    const put = await fetch(%(put)s, {method: "PUT", body: "hello from the browser"});
    const etag = put.headers.get("ETag");
    const get = await fetch(%(get)s);
    const text = await get.text();
    out.textContent = "RESULT OK " + put.status + " " + get.status + " " + etag + " " + text;
  } catch (e) {
    out.textContent = "RESULT BLOCKED " + e;
  }
})();
</script></body></html>"""


def browser_run(server, tmp, site, origin_port, rules):
    import json
    c = s3_client(server.endpoint)
    c.put_bucket_cors(Bucket="web", CORSConfiguration=rules)
    p = presigner(server)
    put = p.generate_presigned_url("put_object", Params={"Bucket": "web", "Key": "from-browser"})
    get = p.generate_presigned_url("get_object", Params={"Bucket": "web", "Key": "from-browser"})
    with open(os.path.join(site, "page.html"), "w") as f:
        f.write(PAGE % {"put": json.dumps(put), "get": json.dumps(get)})
    profile = tempfile.mkdtemp(prefix="wl-chromium-", dir=tmp)
    out = subprocess.run(
        [shutil.which("chromium"), "--headless=new", "--no-sandbox", "--disable-gpu",
         "--no-first-run", "--user-data-dir=" + profile, "--virtual-time-budget=20000",
         "--dump-dom", "http://127.0.0.1:%d/page.html" % origin_port],
        capture_output=True, timeout=120)
    dom = out.stdout.decode(errors="replace")
    i = dom.find("RESULT ")
    assert i >= 0, dom[-2000:] + out.stderr.decode(errors="replace")[-2000:]
    return dom[i:dom.find("<", i)]


def test_real_browser(server, datadir):
    if not shutil.which("chromium"):
        pytest.skip("chromium not installed (deploy/install-deps.sh installs it)")
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="web")
    site = os.path.join(datadir, "site")
    os.makedirs(site)

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **kw):
            super().__init__(*a, directory=site, **kw)

        def log_message(self, *a):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    port = httpd.server_address[1]
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    try:
        origin = "http://127.0.0.1:%d" % port
        allow = {"CORSRules": [{"AllowedOrigins": [origin], "AllowedMethods": ["GET", "PUT"],
                                "AllowedHeaders": ["*"], "ExposeHeaders": ["ETag"]}]}
        res = browser_run(server, datadir, site, port, allow)
        want = hashlib.md5(b"hello from the browser").hexdigest()
        assert res.startswith("RESULT OK 200 200") and want in res, res
        assert res.endswith("hello from the browser"), res
        got = c.get_object(Bucket="web", Key="from-browser")["Body"].read()
        assert got == b"hello from the browser"
        c.delete_object(Bucket="web", Key="from-browser")
        deny = {"CORSRules": [{"AllowedOrigins": ["http://elsewhere.example"],
                               "AllowedMethods": ["GET", "PUT"], "AllowedHeaders": ["*"]}]}
        res = browser_run(server, datadir, site, port, deny)
        assert res.startswith("RESULT BLOCKED"), res
        with pytest.raises(ClientError):  # the preflight refused: the PUT was never sent
            c.head_object(Bucket="web", Key="from-browser")
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_aws_cli_cors(server, datadir):
    import json
    assert aws(server, datadir, "s3api", "create-bucket", "--bucket", "clicors").returncode == 0
    cfg = {"CORSRules": [{"AllowedOrigins": ["https://app.example"], "AllowedMethods": ["GET"],
                          "AllowedHeaders": ["*"], "MaxAgeSeconds": 60}]}
    r = aws(server, datadir, "s3api", "put-bucket-cors", "--bucket", "clicors",
            "--cors-configuration", json.dumps(cfg))
    assert r.returncode == 0, r.stderr
    r = aws(server, datadir, "s3api", "get-bucket-cors", "--bucket", "clicors")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)["CORSRules"][0]
    assert got["AllowedOrigins"] == ["https://app.example"] and got["MaxAgeSeconds"] == 60
    st, h = preflight(server, "/clicors/k", "https://app.example", "GET")
    assert st == 200 and h["access-control-allow-origin"] == "https://app.example"
    r = aws(server, datadir, "s3api", "delete-bucket-cors", "--bucket", "clicors")
    assert r.returncode == 0, r.stderr
    r = aws(server, datadir, "s3api", "get-bucket-cors", "--bucket", "clicors")
    assert r.returncode != 0 and b"NoSuchCORSConfiguration" in r.stderr


def test_with_newest_botocore(server):
    """This module again under the newest botocore (the browser test runs once)."""
    run_under_newest_botocore("test_s3_cors.py", "real_browser or aws_cli")


# ---- found by a hostile probe of these features (each failed before its fix) ----

def test_cors_configs_that_could_hurt_are_refused(server):
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="corsbad")
    bad = [b"<CORSConfiguration><X/></CORSConfiguration>",  # crashed the node
           b"<CORSConfiguration><CORSRule><X/></CORSRule></CORSConfiguration>",
           ("<CORSConfiguration><CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET"
            "</AllowedMethod><ExposeHeader>ETag&#13;&#10;Set-Cookie: a=b</ExposeHeader></CORSRule>"
            "</CORSConfiguration>").encode(),
           ("<CORSConfiguration><CORSRule><AllowedOrigin>http://*.*</AllowedOrigin><AllowedMethod>"
            "GET</AllowedMethod></CORSRule></CORSConfiguration>").encode(),
           ("<CORSConfiguration><CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET"
            "</AllowedMethod><MaxAgeSeconds> 5</MaxAgeSeconds></CORSRule></CORSConfiguration>").encode(),
           # Two wildcards in a header (S3 allows one): stored, it matched no preflight.
           ("<CORSConfiguration><CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET"
            "</AllowedMethod><AllowedHeader>x-*-*</AllowedHeader></CORSRule>"
            "</CORSConfiguration>").encode()]
    for xml in bad:
        st, body, _ = signed_request(server.port, "PUT", "/corsbad?cors", xml)
        assert st == 400, xml
        # More than one wildcard in an origin or a header: S3's InvalidRequest (it was
        # MalformedXML); the others are malformed.
        want = b"InvalidRequest" if b"*.*" in xml or b"x-*-*" in xml else b"MalformedXML"
        assert b"<Code>" + want + b"</Code>" in body, (xml, body)
    assert signed_request(server.port, "GET", "/corsbad?cors")[0] == 404


def test_huge_origin_gets_an_answer_in_order(server):
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="corslong")
    c.put_object(Bucket="corslong", Key="k", Body=b"hello", ACL="public-read")
    c.put_object(Bucket="corslong", Key="second", Body=b"SECOND", ACL="public-read")
    c.put_bucket_cors(Bucket="corslong", CORSConfiguration={"CORSRules": [
        {"AllowedOrigins": ["http://*"], "AllowedMethods": ["GET"]}]})
    host = "127.0.0.1:%d" % server.port
    s = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    try:
        s.sendall(request_head("GET", "/corslong/k", {"Host": host, "Origin": "http://" + "a" * 7900})
                  + request_head("GET", "/corslong/second", {"Host": host}))
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
            if data.count(b"HTTP/1.1") >= 2 and data.endswith(b"SECOND"):
                break
    finally:
        s.close()
    # The first response is the first object's (a too-long Origin is simply not echoed).
    first = data.split(b"HTTP/1.1 ")[1]
    assert first.startswith(b"200") and first.endswith(b"hello"), data[:400]
