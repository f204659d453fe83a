"""Fixtures that start real warmlaked processes on free loopback ports with
temporary file-backed drives, and stop them (by pid) even when a test fails."""
import hashlib
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
        self.signal(sig)
        self.reap()

    def signal(self, sig=signal.SIGTERM):
        """Send sig to the process, not waiting (stop_all signals every node, then reaps)."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)

    def reap(self):
        """Wait for the signalled process (killed after 30 s), then check its log."""
        if self.proc and self.proc.poll() is None:
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


def sha(b):
    """The sha256 hex digest of b: tests compare content by hash."""
    return hashlib.sha256(b).hexdigest()


def tree_hashes(root):
    """{path relative to root: sha256} of every file under root."""
    out = {}
    for d, _, files in os.walk(root):
        for name in files:
            path = os.path.join(d, name)
            with open(path, "rb") as f:
                out[os.path.relpath(path, root)] = sha(f.read())
    return out


def free_ports(n):
    """n free loopback ports (bound together, so distinct; then released), for maps that must
    name them before the nodes start. Drawn below the kernel's ephemeral range (where bind to
    port 0 and outgoing connections take theirs), from the slice WL_PORT_SLICE (0 or 1) names,
    or the pytest-xdist worker's own: two pytest processes at once never hand out the same
    port while one of them is between choosing it and its node binding it."""
    import random
    import socket
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if worker.startswith("gw"):
        pieces = max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
        piece = int(worker[2:]) % pieces
    else:
        pieces, piece = 2, int(os.environ.get("WL_PORT_SLICE", "0"))
    width = 22000 // pieces
    lo = 10000 + width * piece
    socks, ports = [], []
    try:
        while len(ports) < n:
            port = random.randrange(lo, lo + width)
            s = socket.socket()
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                s.close()
                continue
            socks.append(s)
            ports.append(port)
    finally:
        for s in socks:
            s.close()
    return ports


CLUSTER_SECRET = "integration-test-cluster-secret"


def write_map(root, nodes, cluster="itc", epoch=1, drives=2, sets=None, ec=None):
    """A cluster map file for nodes (ids) on free loopback ports: (path, document)."""
    import json
    ports = free_ports(2 * len(nodes))
    doc = {"cluster": cluster, "epoch": epoch, "nodes": [
        {"id": n, "s3": "127.0.0.1:%d" % ports[2 * i], "proto": "127.0.0.1:%d" % ports[2 * i + 1],
         "drives": drives} for i, n in enumerate(nodes)]}
    if sets:
        doc["sets"] = sets
    if ec:
        doc["ec"] = ec
    path = os.path.join(root, "map-%s-%d.json" % (cluster, epoch))
    with open(path, "w") as f:
        json.dump(doc, f)
    return path, doc


class Node(Server):
    """A cluster member: Server with the map, its id and the cluster secret."""

    def __init__(self, root, node_id, map_path, secret=CLUSTER_SECRET, extra=()):
        data = os.path.join(root, node_id)
        os.makedirs(data, exist_ok=True)
        super().__init__(data, extra=extra)
        self.id, self.map_path, self.secret = node_id, map_path, secret

    def env(self):
        return dict(super().env(), WARMLAKE_CLUSTER_SECRET=self.secret)

    def args(self):
        return [WARMLAKED, "--cluster", self.map_path, "--node", self.id, "--data", self.data,
                "--drive-capacity", "2G", "--segment-size", "64M"] + self.extra

    def start(self, expect_ready=True):
        self.launch()
        if expect_ready:
            self.wait_ready()
        return self

    def wait_ready(self, timeout=60):
        """Until the node says ready: it waits (up to 10 s) for its set's peers first."""
        try:
            return super().wait_ready(timeout)
        except RuntimeError:
            raise RuntimeError("node %s did not start; see %s" % (self.id, self.log))

    def s3(self):
        """The node's boto3 client, made once (a client costs about 100 ms to make)."""
        if getattr(self, "_s3", None) is None:
            self._s3 = s3_client(self.endpoint)
        return self._s3


def stop_all(nodes, sig=signal.SIGTERM):
    """Stop nodes together: each exits in about 0.3 s under ASan (its leak check), one after
    another that was 1.2 s of every test of the 4-node cluster pass."""
    for n in nodes:
        n.signal(sig)
    for n in nodes:
        n.reap()


def start_all(nodes):
    """Launch every node, then wait for each: nodes started together find each other."""
    for n in nodes:
        n.launch()
    for n in nodes:
        n.wait_ready()
    return nodes


# WL_CLUSTER=N: the server fixture is a cluster of N nodes of 3 file-backed drives each (4+2
# sets spanning them, cluster/map.h), and each test talks to one of its nodes, the next node
# for the next test, so that the S3 suites run through every node of a cluster and every
# request of theirs reaches drives of other nodes over proto/. A restart restarts every node.
#
# The tests of a module share one cluster: after each, every bucket of both users is deleted
# through the S3 API (LocalCluster.wipe), and the next test starts on an empty namespace.
# Starting and stopping 4 nodes under ASan took 1.8 s of every test, 6 of the pass's 12
# minutes. A test that failed, stopped, killed or restarted the nodes, or whose wipe failed,
# leaves a cluster that is stopped (its logs checked for sanitizer reports) and not reused.
CLUSTER = int(os.environ.get("WL_CLUSTER") or 0)
_cluster_tests = [0]


class LocalCluster:
    """The server fixture's stand-in under WL_CLUSTER: a Server's face (port, endpoint,
    proc, read_log, stop, kill9, start) on the node this test goes through."""

    def __init__(self, root, n):
        ids = ["n%d" % (i + 1) for i in range(n)]
        path, _ = write_map(root, ids, drives=3, ec="4+2")
        self.nodes = start_all([Node(root, i, path) for i in ids])
        self.data = root
        self.dirty = False  # stopped, killed or restarted by a test: not to be reused
        self._log_at = {}
        self._clients = {}
        self.begin_test()

    def begin_test(self):
        """The next test goes through the next node; what the nodes log from now is its."""
        self.via = self.nodes[_cluster_tests[0] % len(self.nodes)]
        _cluster_tests[0] += 1
        self._log_at = {n.log: os.path.getsize(n.log) for n in self.nodes}

    @property
    def port(self):
        return self.via.port

    @property
    def endpoint(self):
        return self.via.endpoint

    @property
    def proc(self):
        return self.via.proc

    def read_log(self):
        """What the nodes logged since this test began."""
        out = []
        for n in self.nodes:
            with open(n.log, "rb") as f:
                f.seek(self._log_at.get(n.log, 0))
                out.append(f.read().decode(errors="replace"))
        return "".join(out)

    def alive(self):
        return all(n.proc is not None and n.proc.poll() is None for n in self.nodes)

    def stop(self, *args):
        self.dirty = True
        stop_all(self.nodes, *args)

    def kill9(self):
        self.dirty = True
        for n in self.nodes:
            n.kill9()

    def start(self):
        """Every node again (after stop or kill9), on the same ports and drives."""
        self.dirty = True
        start_all(self.nodes)
        return self

    def wipe(self):
        """Delete every bucket of both users with all it holds (versions, delete markers,
        uploads): True when the namespace is empty again."""
        try:
            for ak, sk in ((AK, SK), (AK2, SK2)):
                c = self._clients.get(ak)
                if c is None:
                    c = self._clients[ak] = s3_client(self.nodes[0].endpoint, ak, sk)
                for b in c.list_buckets()["Buckets"]:
                    name = b["Name"]
                    for page in c.get_paginator("list_object_versions").paginate(Bucket=name):
                        objs = [{"Key": v["Key"], "VersionId": v["VersionId"]}
                                for v in page.get("Versions", []) + page.get("DeleteMarkers", [])]
                        if objs:
                            c.delete_objects(Bucket=name, Delete={"Objects": objs, "Quiet": True})
                    for page in c.get_paginator("list_multipart_uploads").paginate(Bucket=name):
                        for u in page.get("Uploads", []):
                            c.abort_multipart_upload(Bucket=name, Key=u["Key"],
                                                     UploadId=u["UploadId"])
                    c.delete_bucket(Bucket=name)
            return True
        except Exception:  # whatever stands in the way: the next test gets a fresh cluster
            return False


class _SharedCluster:
    """A module's cluster (WL_CLUSTER), started when a test first asks for it."""

    def __init__(self):
        self.cluster, self.root = None, None

    def get(self):
        if self.cluster is None:
            self.root = tempfile.mkdtemp(prefix="wl-cl-",
                                         dir=os.environ.get("WL_TEST_DIR", "/tmp"))
            self.cluster = LocalCluster(self.root, CLUSTER)
            for n in self.cluster.nodes:  # it outlives the test (_no_leftover_servers)
                STARTED.remove(n.proc)
        else:
            self.cluster.begin_test()
        return self.cluster

    def discard(self):
        """Stop the nodes (their logs checked for sanitizer reports) and remove the drives."""
        cl, root = self.cluster, self.root
        self.cluster = self.root = None
        if cl is None:
            return
        try:
            cl.stop()
        finally:
            if not os.environ.get("WL_KEEP_DATA"):
                shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def _cluster_holder():
    h = _SharedCluster()
    yield h
    h.discard()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Each phase's report on the item (rep_setup, rep_call): fixtures see a test's outcome."""
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)


@pytest.fixture
def server(request, datadir):
    if not os.path.exists(WARMLAKED):
        pytest.fail("build first: %s missing" % WARMLAKED)
    if not CLUSTER:
        s = Server(datadir).start()
        yield s
        s.stop()
        return
    holder = request.getfixturevalue("_cluster_holder")
    s = holder.get()
    yield s
    rep = getattr(request.node, "rep_call", None)
    if s.dirty or rep is None or rep.failed or not s.alive() or not s.wipe():
        holder.discard()


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


def recv_to_close(sock):
    """Every byte the peer sends until it closes the connection."""
    out = b""
    while True:
        d = sock.recv(65536)
        if not d:
            return out
        out += d


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
    # Host signed as it is sent (botocore would sign the URL's host, lowercased).
    req = AWSRequest(method=method, url="http://%s%s" % (host, path), data=b"",
                     headers=dict(headers or {}, Host=host))
    Signer(Credentials(AK, SK), "s3", "us-east-1").add_auth(req)
    del req.headers["Host"]
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
    if CLUSTER:
        pytest.skip("under WL_CLUSTER the modules run once: a cluster's gateway reads a "
                    "request as one node does (the Release pass runs them under both)")
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


def three_nodes(datadir, extra=()):
    """Three nodes of 2 drives, one 4+2 set across them (write_map), started together."""
    path, _ = write_map(datadir, ["n1", "n2", "n3"])
    return start_all([Node(datadir, n, path, extra=extra) for n in ("n1", "n2", "n3")])


@pytest.fixture
def cluster(datadir):
    """Three nodes with the default write quorum (k+1: five stores of six)."""
    nodes = three_nodes(datadir)
    yield nodes
    stop_all(nodes)
