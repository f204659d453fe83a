"""Fixtures that start real warmlaked processes on free loopback ports with
temporary file-backed drives, and stop them (by pid) even when a test fails."""
import os
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("WL_BUILD", os.path.join(ROOT, "build"))
WARMLAKED = os.path.join(BUILD, "server", "warmlaked")
AK, SK = "AKIAWARMLAKETEST0001", "warmlake/secret+key/for/tests0000000000"
AK2, SK2 = "AKIAWARMLAKETEST0002", "second/user/secret/key/for/tests0000000"


class Server:
    def __init__(self, data, drives=6, ec="4+2", extra=()):
        self.data, self.drives, self.ec, self.extra = data, drives, ec, list(extra)
        self.proc = None
        self.port = None
        self.log = os.path.join(data, "warmlaked.log")

    def env(self):
        return dict(os.environ, WARMLAKE_ACCESS_KEY=AK, WARMLAKE_SECRET_KEY=SK,
                    WARMLAKE_USERS="%s:%s" % (AK2, SK2))

    def args(self):
        return [WARMLAKED, "--listen", "127.0.0.1:0", "--data", self.data,
                "--drives", str(self.drives), "--ec", self.ec, "--drive-capacity", "2G",
                "--segment-size", "64M"] + self.extra

    def start(self):
        return self.launch().wait_ready()

    def launch(self):
        """Start the process (not waiting for it: nodes started together find each other)."""
        out = open(self.log, "a")
        self.port = None
        self.proc = subprocess.Popen(self.args(), stdout=subprocess.PIPE, stderr=out,
                                     env=self.env())
        STARTED.append(self.proc)
        return self

    def wait_ready(self, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            line = self.proc.stdout.readline().decode()
            if not line:
                break
            if "ready port=" in line:
                self.port = int(line.split("ready port=")[1])
                break
        if not self.port:
            self.stop()
            raise RuntimeError("warmlaked did not start; see %s" % self.log)
        return self

    def read_log(self):
        with open(self.log, errors="replace") as f:
            return f.read()

    @property
    def endpoint(self):
        return "http://127.0.0.1:%d" % self.port

    def stop(self, sig=signal.SIGTERM):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        # Under -DSANITIZE=ON a sanitizer report in the server's log fails the test.
        with open(self.log, errors="replace") as f:
            log = f.read()
        for marker in ("ERROR: AddressSanitizer", "runtime error:", "ERROR: LeakSanitizer"):
            assert marker not in log, "sanitizer report in %s:\n%s" % (self.log, log[-4000:])

    def kill9(self):
        self.stop(signal.SIGKILL)


# Every warmlaked a test started: whatever a failing test left running is
# killed when the test ends (a failure between a restart and its stop used to
# leave a node behind).
STARTED = []


@pytest.fixture(autouse=True)
def _no_leftover_servers():
    yield
    while STARTED:
        p = STARTED.pop()
        if p.poll() is None:
            p.kill()
            p.wait()


@pytest.fixture
def datadir():
    d = tempfile.mkdtemp(prefix="wl-it-", dir=os.environ.get("WL_TEST_DIR", "/tmp"))
    yield d
    if not os.environ.get("WL_KEEP_DATA"):  # set: kept for a look at the nodes' logs
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def server(datadir):
    if not os.path.exists(WARMLAKED):
        pytest.fail("build first: %s missing" % WARMLAKED)
    s = Server(datadir).start()
    yield s
    s.stop()


def s3_client(endpoint, ak=AK, sk=SK, retry=True):
    """boto3 on endpoint; retry=False: no retries (a test that expects 503s, whose retries
    would only wait out botocore's backoff)."""
    import boto3
    from botocore.config import Config
    return boto3.session.Session().client(
        "s3", endpoint_url=endpoint, aws_access_key_id=ak, aws_secret_access_key=sk,
        region_name="us-east-1",
        config=Config(s3={"addressing_style": "path"},
                      retries={"max_attempts": 2 if retry else 0}))


def signed_request(port, method, path, body=b"", headers=None, payload_hash=None, host=None):
    """A SigV4-signed request sent byte for byte as given (body unchanged, so aws-chunked
    bodies and wrong checksums can be sent). path is the encoded path and query; host the
    Host header (default 127.0.0.1:port). payload_hash: x-amz-content-sha256 (default the
    body's SHA-256). Returns (status, body, headers)."""
    import hashlib
    import http.client
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    class Signer(S3SigV4Auth):  # S3 rules (path signed as sent), our payload hash as given
        def payload(self, request):
            return payload_hash or hashlib.sha256(body).hexdigest()

    host = host or "127.0.0.1:%d" % port
    req = AWSRequest(method=method, url="http://%s%s" % (host, path), data=b"",
                     headers=dict(headers or {}))
    Signer(Credentials(AK, SK), "s3", "us-east-1").add_auth(req)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        conn.putheader("Host", host)
        for k, v in req.headers.items():
            conn.putheader(k, v)
        conn.putheader("Content-Length", str(len(body)))
        conn.endheaders()
        conn.send(body)
        r = conn.getresponse()
        return r.status, r.read(), dict(r.getheaders())
    finally:
        conn.close()


# The modules run under the newest botocore in the sanitized pass too: those whose requests
# it shapes differently (aws-chunked bodies with trailing checksums, checksum headers,
# conditional writes). The others send the same requests as Debian's boto3, which the
# sanitized pass runs already; their second run is the Release pass's.
SANITIZED_NEWEST = {"test_s3_conformance.py", "test_s3_corners.py", "test_s3_mpu_checksums.py",
                    "test_s3_conditional.py"}


def run_under_newest_botocore(module, deselect=None):
    """Run a test module again under the newest botocore on the machine (the pyenv python on
    PATH), with pytest taken from Debian's packages. Skips where there is no second python,
    and inside that inner run."""
    import shutil
    import sys
    if os.environ.get("WL_INNER"):
        pytest.skip("already the inner run")
    if os.environ.get("WL_SANITIZED") and module not in SANITIZED_NEWEST:
        pytest.skip("under ASan, only the modules whose requests the newest botocore shapes "
                    "differently run twice")
    py = shutil.which("python3")
    if not py or os.path.realpath(py) == os.path.realpath(sys.executable):
        pytest.skip("no second python with the newest botocore")
    env = dict(os.environ, WL_INNER="1")
    env.pop("PYTHONPATH", None)
    args = ["-q", "-p", "no:cacheprovider"] + (["-k", "not (%s)" % deselect] if deselect else [])
    code = ("import sys; sys.path.append('/usr/lib/python3/dist-packages'); import pytest; "
            "sys.exit(pytest.main(%r + [sys.argv[1]]))" % args)
    here = os.path.dirname(os.path.abspath(__file__))
    out = subprocess.run([py, "-c", code, os.path.join(here, module)], env=env, cwd=here,
                         capture_output=True, timeout=900)
    assert out.returncode == 0, out.stdout.decode()[-4000:] + out.stderr.decode()[-2000:]
