"""Faults in the network between the nodes of a cluster: deploy/netns-cluster.sh
puts each node in its own network namespace on a bridge (etcd on it too), four
nodes of three drives, 4+2 (twelve drives: two sets, each across all four
nodes, so every node holds two shards of one set and one of the other). The
tests kill nodes, cut them off the bridge and slow their links, talking S3 to
the nodes from this (the root) namespace, and check every object by the MD5 of
its bytes.

The nodes run with --write-quorum 4 (k): with the default (k+1) one node away
(two shards of a set) stops the writes, which test_cluster covers; here writes
go on around it. One node is the most this layout loses without losing data:
two nodes hold three or four shards of a set, more than m."""
import hashlib
import json
import os
import random
import shutil
import subprocess
import tempfile
import threading
import time

import pytest
from botocore.exceptions import ClientError

from conftest import BUILD

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "deploy", "netns-cluster.sh")
NODES = ["n1", "n2", "n3", "n4"]


def _netns_usable():
    if os.environ.get("WL_SANITIZED") == "1":
        return ("the Release run covers these: the fault paths they reach are covered under "
                "ASan by test_cluster; the namespaces are about the network, not the server")
    if os.geteuid() != 0:
        return "needs root (network namespaces, veths, a bridge)"
    try:
        r = subprocess.run(["ip", "netns", "list"], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as e:
        return "ip netns unavailable: %s" % e
    if r.returncode != 0:
        return "ip netns unavailable: %s" % r.stderr.decode().strip()
    return None


SKIP = _netns_usable()
pytestmark = pytest.mark.skipif(SKIP is not None, reason=SKIP or "")


class Cluster:
    def __init__(self, d):
        self.dir = d
        self.env = {}

    def ctl(self, *args, check=True, timeout=120):
        r = subprocess.run([SCRIPT, "--dir", self.dir] + list(args), capture_output=True,
                           text=True, timeout=timeout, env=dict(os.environ, WL_BUILD=BUILD))
        if check:
            assert r.returncode == 0, "%s: rc %d\n%s\n%s" % (args, r.returncode, r.stdout,
                                                              r.stderr)
        return r

    def load(self):
        with open(os.path.join(self.dir, "env")) as f:
            self.env = dict(line.strip().split("=", 1) for line in f if "=" in line)

    def endpoint(self, node):
        return self.env["S3_N" + node[1:]]

    def s3(self, node, retries=True):
        import boto3
        from botocore.config import Config
        return boto3.session.Session().client(
            "s3", endpoint_url=self.endpoint(node), region_name="us-east-1",
            aws_access_key_id=self.env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=self.env["AWS_SECRET_ACCESS_KEY"],
            config=Config(s3={"addressing_style": "path"}, connect_timeout=5, read_timeout=60,
                          retries={"total_max_attempts": 2 if retries else 1}))

    def stats(self, node):
        """The node's /_warmlake/stats (signed as the S3 clients sign)."""
        import urllib.request
        from botocore.auth import S3SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.credentials import Credentials
        url = self.endpoint(node) + "/_warmlake/stats"
        req = AWSRequest(method="GET", url=url, data=b"")
        S3SigV4Auth(Credentials(self.env["AWS_ACCESS_KEY_ID"], self.env["AWS_SECRET_ACCESS_KEY"]),
                    "s3", "us-east-1").add_auth(req)
        r = urllib.request.Request(url, headers=dict(req.headers.items()), method="GET")
        with urllib.request.urlopen(r, timeout=30) as resp:
            return json.loads(resp.read())

    def sees_all_up(self, node):
        """Every store of the node's sets is up as the node sees them (in touch, not away)."""
        return all(d["health"] == "up" for d in self.stats(node)["drives"])

    def status(self):
        """wl-admin status --json, from the map in the cluster's etcd."""
        with open(os.path.join(self.dir, "secret")) as f:
            secret = f.read()
        r = subprocess.run([os.path.join(BUILD, "cluster", "wl-admin"), "--etcd",
                            self.env["ETCD"], "status", "--json"], capture_output=True,
                           text=True, timeout=30,
                           env=dict(os.environ, WARMLAKE_CLUSTER_SECRET=secret))
        return json.loads(r.stdout) if r.returncode == 0 else None


def namespaces(runid):
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=10)
    return [line.split()[0] for line in out.stdout.splitlines()
            if line.startswith("wl%s-" % runid)]


@pytest.fixture
def cluster():
    """Four nodes in their namespaces; taken down (processes by pid, namespaces, veths)
    whatever the test did, and checked gone."""
    if not os.path.exists(os.path.join(BUILD, "server", "warmlaked")):
        pytest.fail("build first: %s missing" % BUILD)
    if not shutil.which("etcd"):
        pytest.fail("etcd missing: deploy/install-deps.sh installs etcd-server")
    d = tempfile.mkdtemp(prefix="wl-netns-", dir=os.environ.get("WL_TEST_DIR", "/tmp"))
    c = Cluster(d)
    runid = None
    try:
        c.ctl("up", "4", "--drives", "3", "--ec", "4+2", "--",
              "--write-quorum", "4", "--peer-timeout-ms", "2000", "--segment-size", "64M")
        with open(os.path.join(d, "runid")) as f:
            runid = f.read().strip()
        c.load()
        yield c
    finally:
        r = c.ctl("down", check=False)
        left = namespaces(runid) if runid else []
        link = subprocess.run(["ip", "link", "show", "wl%s-h" % runid], capture_output=True,
                              timeout=10) if runid else None
        if r.returncode != 0 or left or (link and link.returncode == 0):
            logs = ""
            for n in NODES:
                p = os.path.join(d, n + ".log")
                if os.path.exists(p):
                    with open(p, errors="replace") as f:
                        logs += "--- %s\n%s\n" % (n, f.read()[-2000:])
            shutil.rmtree(d, ignore_errors=True)
            pytest.fail("down left things behind: rc %d %s %s\n%s\n%s" % (
                r.returncode, left, r.stderr, r.stdout, logs))
        shutil.rmtree(d, ignore_errors=True)


def md5(b):
    return hashlib.md5(b).hexdigest()


def body(n, seed):
    return random.Random(seed).randbytes(n)


def wait_for(pred, what, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return
        time.sleep(0.3)
    raise AssertionError("timed out waiting for " + what)


def read(c, bucket, key):
    return md5(c.get_object(Bucket=bucket, Key=key)["Body"].read())


def put_all(c, bucket, prefix, sizes, seed):
    want = {}
    for i, size in enumerate(sizes):
        data = body(size, seed + i)
        c.put_object(Bucket=bucket, Key="%s/%d" % (prefix, i), Body=data)
        want["%s/%d" % (prefix, i)] = md5(data)
    return want


def check_all(c, bucket, want, who=""):
    for key, h in want.items():
        assert read(c, bucket, key) == h, (who, key)


def all_alive(cl):
    st = cl.status()
    return st is not None and all(n["alive"] for n in st["nodes"])


SIZES = [0, 1, 1000, 65537, 300000, 3 * 1048576 + 3]


def test_written_anywhere_read_everywhere(cluster):
    cs = {n: cluster.s3(n) for n in NODES}
    cs["n1"].create_bucket(Bucket="lake")
    want = {}
    for i, size in enumerate(SIZES):
        data = body(size, i)
        key = "o/%d" % size
        cs[NODES[i % 4]].put_object(Bucket="lake", Key=key, Body=data)
        want[key] = md5(data)
    for n, c in cs.items():
        check_all(c, "lake", want, n)
        keys = [o["Key"] for o in c.list_objects_v2(Bucket="lake")["Contents"]]
        assert sorted(keys) == sorted(want), n


def test_kill_during_puts(cluster):
    """SIGKILL of a node (two shards of one set: m) while PUTs stream through another:
    every acknowledged PUT reads back whole through every survivor. A second node killed
    takes more than m shards of a set: reads answer whole bytes or 5xx, never other bytes."""
    c1 = cluster.s3("n1", retries=False)
    c1.create_bucket(Bucket="stream")
    acked, stop = {}, threading.Event()

    def writer():
        c = cluster.s3("n1", retries=False)
        for i in range(300):  # bounded: the waits below stop it sooner
            if stop.is_set():
                return
            data = body(2000 if i % 3 else 300000, 1000 + i)
            try:
                c.put_object(Bucket="stream", Key="k%d" % i, Body=data)
                acked["k%d" % i] = md5(data)
            except ClientError:
                pass  # not acknowledged: nothing promised
    t = threading.Thread(target=writer)
    t.start()
    try:
        wait_for(lambda: len(acked) >= 15, "15 acknowledged PUTs")
        cluster.ctl("kill", "n4")
        n = len(acked)
        wait_for(lambda: len(acked) >= n + 15, "15 more PUTs with n4 gone")
    finally:
        stop.set()
        t.join(timeout=120)
    assert not t.is_alive()
    st = cluster.ctl("status").stdout
    assert "n4" in st and "dead" in st, st
    assert not cluster.sees_all_up("n1")
    for n in ("n1", "n2", "n3"):
        check_all(cluster.s3(n), "stream", acked, n)
    cluster.ctl("kill", "n3")
    failed = 0
    c2 = cluster.s3("n2", retries=False)
    for key, h in acked.items():
        try:
            assert read(c2, "stream", key) == h, key
        except ClientError as e:
            assert e.response["ResponseMetadata"]["HTTPStatusCode"] >= 500, e.response
            failed += 1
    assert failed > 0  # the set n3 and n4 hold four shards of cannot be read
    # Both started again on their data (netns-cluster.sh start): everything acknowledged reads
    # back through each of them.
    cluster.ctl("start", "n3")
    cluster.ctl("start", "n4")
    assert "is running" in cluster.ctl("start", "n4", check=False).stderr
    for n in ("n3", "n4"):
        check_all(cluster.s3(n), "stream", acked, n)
    # etcd killed: data flows on the last map; started again on its data, the map is there.
    # (Once n1 is back in touch with n3 and n4: they were away, and a PUT short of them fails.)
    wait_for(lambda: cluster.sees_all_up("n1"), "n1 to see every store up again")
    cluster.ctl("kill", "etcd")
    c1.put_object(Bucket="stream", Key="no-etcd", Body=body(5000, 7))
    acked["no-etcd"] = md5(body(5000, 7))
    cluster.ctl("start", "etcd")
    wait_for(lambda: all_alive(cluster), "every node registered again")
    for n in NODES:
        check_all(cluster.s3(n), "stream", acked, n)


def test_partition_then_heal(cluster):
    """n4 cut off the bridge (its packets go nowhere; no reset): writes and reads
    through the others go on, whole; healed, n4 serves what was written meanwhile."""
    c1, c2, c3 = (cluster.s3(n) for n in ("n1", "n2", "n3"))
    c1.create_bucket(Bucket="part")
    want = put_all(c1, "part", "before", [1000, 300000, 1048576 + 7], 10)
    cluster.ctl("partition", "n4")
    assert "partitioned" in cluster.ctl("status").stdout
    check_all(c2, "part", want, "n2")
    want.update(put_all(c2, "part", "during", SIZES, 20))
    want.update(put_all(c3, "part", "during3", [500, 200000], 40))
    for n, c in (("n1", c1), ("n2", c2), ("n3", c3)):
        check_all(c, "part", want, n)
    cluster.ctl("heal", "n4")
    c4 = cluster.s3("n4", retries=False)

    def n4_reads():
        try:
            return read(c4, "part", "during/5") == want["during/5"]
        except ClientError:
            return False  # not yet back in touch with its peers
    wait_for(n4_reads, "n4 to serve reads again after heal")
    check_all(c4, "part", want, "n4")
    keys = [o["Key"] for o in c4.list_objects_v2(Bucket="part")["Contents"]]
    assert sorted(keys) == sorted(want)


def test_slow_node(cluster):
    """n2's packets delayed 200 ms (netem): reads through n1 are still whole. (No
    assertion on time.) Where the kernel has no netem, `slow` says so, exit 3."""
    c1 = cluster.s3("n1")
    c1.create_bucket(Bucket="slow")
    want = put_all(c1, "slow", "o", [1000, 300000, 1048576 + 3], 50)
    r = cluster.ctl("slow", "n2", "200", check=False)
    if r.returncode == 3 and "netem is not available" in r.stderr:
        pytest.skip("no netem in this kernel: " + r.stderr.strip())
    assert r.returncode == 0, r.stderr
    check_all(c1, "slow", want, "n1")
    want.update(put_all(c1, "slow", "w", [2000, 300000], 60))
    check_all(cluster.s3("n3"), "slow", want, "n3")
    cluster.ctl("heal", "n2")


def test_throttled_node(cluster):
    """n2's link limited to 2 Mbit/s each way (tbf: a slow link, not a delay): reads and
    writes through the others, which need its shards, are still whole. (Not reads through
    n2 itself: its calls for a 1 MiB object's shards take longer than the 2 s peer
    deadline at that rate, so it takes its peers as suspect and answers 503.)"""
    c1 = cluster.s3("n1")
    c1.create_bucket(Bucket="thin")
    want = put_all(c1, "thin", "o", [1000, 300000, 1048576 + 3], 70)
    cluster.ctl("throttle", "n2", "2mbit")
    assert "tbf" in cluster.ctl("status").stdout
    check_all(c1, "thin", want, "n1")
    want.update(put_all(cluster.s3("n3"), "thin", "w", [2000, 300000], 80))
    check_all(cluster.s3("n4"), "thin", want, "n4")
    cluster.ctl("heal", "n2")
    assert "tbf" not in cluster.ctl("status").stdout


def test_no_write_quorum_leaves_nothing(cluster):
    """n2, n3 and n4 cut off: n1 reaches three shards of a set, short of the write quorum
    (four): its PUT fails with 503, and once all are back no node shows the object."""
    c1 = cluster.s3("n1", retries=False)
    c1.create_bucket(Bucket="quorum")
    want = put_all(c1, "quorum", "ok", [1000, 300000], 90)
    for n in ("n2", "n3", "n4"):
        cluster.ctl("partition", n)
    # One inline, one coded. Each takes seconds to fail (about four peer deadlines here,
    # even once the others' leases are gone): two are enough.
    keys = ["lost/%d" % size for size in (1000, 300000)]
    for i, key in enumerate(keys):
        with pytest.raises(ClientError) as e:
            c1.put_object(Bucket="quorum", Key=key, Body=body(int(key.split("/")[1]), 100 + i))
        assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503, e.value.response
    for n in ("n2", "n3", "n4"):
        cluster.ctl("heal", n)
    wait_for(lambda: all_alive(cluster), "every node registered again after heal")

    def back():  # every node reads what it wrote before: in touch with its peers again
        try:
            for n in NODES:
                check_all(cluster.s3(n, retries=False), "quorum", want, n)
            return True
        except ClientError:
            return False
    wait_for(back, "every node serving reads again")
    for n in NODES:
        c = cluster.s3(n)
        listed = [o["Key"] for o in c.list_objects_v2(Bucket="quorum").get("Contents", [])]
        assert sorted(listed) == sorted(want), (n, listed)
        for key in keys:
            with pytest.raises(ClientError) as e:
                c.head_object(Bucket="quorum", Key=key)
            assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404, (n, key)
            with pytest.raises(ClientError) as e:
                c.get_object(Bucket="quorum", Key=key)
            assert e.value.response["Error"]["Code"] == "NoSuchKey", (n, key)
