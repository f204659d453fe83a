"""deploy/: local-cluster.sh runs a cluster in the background with its map in etcd (up,
status, down, up again on the same data); ssh-deploy.sh --dry-run prints every command
it would run on the hosts and runs none, shows no secret, and what it prints is exactly
what it runs (against fake ssh, under --init systemd and none); a malformed map is
refused before any host is touched; the systemd unit templates pass systemd-analyze
verify. And, as root, ssh-deploy.sh --init none into four real ssh hosts (network
namespaces, each with its own sshd: deploy/netns-cluster.sh hosts): the cluster comes up
and serves S3, a second run changes nothing, a changed setting restarts the nodes and
the data stays."""
import glob
import hashlib
import json
import os
import pwd
import re
import shlex
import shutil
import signal
import stat
import subprocess
import tempfile
import time

import pytest

from conftest import BUILD, ROOT, WARMLAKED, s3_client

LOCAL = os.path.join(ROOT, "deploy", "local-cluster.sh")
SSH_DEPLOY = os.path.join(ROOT, "deploy", "ssh-deploy.sh")
ADMIN = os.path.join(BUILD, "cluster", "wl-admin")
SANITIZED = os.environ.get("WL_SANITIZED") == "1"
# The scripts are what this file tests, and they do not change with the build: once (the
# Release pass of tests/run.sh) is enough; the nodes under ASan are test_cluster's.
pytestmark = pytest.mark.skipif(SANITIZED, reason="deploy scripts are tested in the Release pass")


def sha(b):
    return hashlib.sha256(b).hexdigest()


def tmpdir(prefix):
    return tempfile.mkdtemp(prefix=prefix, dir=os.environ.get("WL_TEST_DIR", "/tmp"))


# ---- local-cluster.sh

def lc(*args, timeout=180):
    # Under ASan (WL_SANITIZED=1, WL_BUILD the ASan build) nodes start slower: wait longer.
    env = dict(os.environ, WL_BUILD=BUILD, WL_UP_TIMEOUT="150" if SANITIZED else "60")
    return subprocess.run([LOCAL] + list(args), env=env, capture_output=True, text=True,
                          timeout=timeout)


def gone(pid):
    """The process is no more (a zombie waiting for init to reap it counts as gone)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def pids(d):
    out = {}
    for f in glob.glob(os.path.join(d, "*.pid")):
        with open(f) as fh:
            out[os.path.basename(f)[:-4]] = int(fh.read().strip())
    return out


@pytest.fixture
def cluster_dir():
    for exe in (WARMLAKED, ADMIN):
        if not os.path.exists(exe):
            pytest.fail("build first: %s missing" % exe)
    if not shutil.which("etcd"):
        pytest.fail("etcd missing: deploy/install-deps.sh installs etcd-server")
    top = tmpdir("wl-lc-")
    d = os.path.join(top, "c")
    try:
        yield d
    finally:
        # Always down, even when the test failed half way; then whatever down could not
        # stop (it never should) is killed by the pids the script recorded.
        try:
            lc("down", "--dir", d, timeout=120)
        finally:
            for name, pid in pids(d).items():
                if not gone(pid):
                    with open("/proc/%d/cmdline" % pid, "rb") as f:
                        if d.encode() in f.read():
                            os.kill(pid, signal.SIGKILL)
            for log in glob.glob(os.path.join(d, "n*.log")):
                with open(log, errors="replace") as f:
                    text = f.read()
                for marker in ("ERROR: AddressSanitizer", "runtime error:", "ERROR: LeakSanitizer"):
                    assert marker not in text, "sanitizer report in %s:\n%s" % (log, text[-4000:])
            shutil.rmtree(top, ignore_errors=True)


def parse_up(out):
    """The endpoints and the aws environment up printed."""
    eps = dict(re.findall(r"node (n\d+): (http://127\.0\.0\.1:\d+)", out))
    env = dict(re.findall(r"(AWS_ACCESS_KEY_ID|AWS_SECRET_ACCESS_KEY|AWS_DEFAULT_REGION)=(\S+)", out))
    assert set(env) == {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION"}, out
    assert "aws --endpoint-url %s s3" % eps["n1"] in out
    return eps, env


def test_local_cluster_up_status_down_up(cluster_dir):
    d = cluster_dir
    r = lc("up", "3", "--drives", "2", "--dir", d, "--", "--scrub-interval", "86400")
    assert r.returncode == 0, r.stdout + r.stderr
    eps, env = parse_up(r.stdout)
    assert sorted(eps) == ["n1", "n2", "n3"]
    for f in ("secret", "credentials"):
        assert stat.S_IMODE(os.stat(os.path.join(d, f)).st_mode) == 0o600, f
    with open(os.path.join(d, "secret")) as f:
        secret = f.read()
    assert len(secret) >= 16 and secret not in r.stdout + r.stderr
    first = pids(d)
    assert sorted(first) == ["etcd", "n1", "n2", "n3"] and not any(gone(p) for p in first.values())

    # The printed credentials work; written through node 1, read through node 3.
    ak, sk = env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"]
    c1, c3 = s3_client(eps["n1"], ak, sk), s3_client(eps["n3"], ak, sk)
    c1.create_bucket(Bucket="lake")
    objs = {"big": os.urandom(1500000), "small": os.urandom(1000)}
    for k, v in objs.items():
        c1.put_object(Bucket="lake", Key=k, Body=v)
    for k, v in objs.items():
        assert sha(c3.get_object(Bucket="lake", Key=k)["Body"].read()) == sha(v), k

    r = lc("status", "--dir", d)
    assert r.returncode == 0, r.stdout + r.stderr
    for name, pid in first.items():
        assert re.search(r"^%s\s+alive \(pid %d\)" % (name, pid), r.stdout, re.M), r.stdout
    assert r.stdout.count(" up ") >= 3 and "set 0: 4+2, ok" in r.stdout, r.stdout

    # up while it runs starts nothing new.
    r = lc("up", "3", "--dir", d)
    assert r.returncode == 0 and pids(d) == first, r.stdout + r.stderr

    r = lc("down", "--dir", d)
    assert r.returncode == 0, r.stdout + r.stderr
    assert all(gone(p) for p in first.values()), first
    assert pids(d) == {}
    r = lc("down", "--dir", d)  # twice: harmless
    assert r.returncode == 0, r.stdout + r.stderr
    r = lc("status", "--dir", d)
    assert r.returncode != 0 and r.stdout.count(" dead") == 4, r.stdout

    # A mismatched node count on the existing directory is refused, starting nothing.
    r = lc("up", "4", "--dir", d)
    assert r.returncode != 0 and "3 nodes" in r.stderr and pids(d) == {}

    # Up again on the same data: same ports and keys, the old objects exact.
    r = lc("up", "3", "--dir", d)
    assert r.returncode == 0, r.stdout + r.stderr
    assert parse_up(r.stdout) == (eps, env)
    second = pids(d)
    assert sorted(second) == ["etcd", "n1", "n2", "n3"]
    # With the daemons' arguments of the first up (a node restarted without them came back
    # with other settings: a soak probe's lost its drive capacity).
    for n in ("n1", "n2", "n3"):
        with open("/proc/%d/cmdline" % second[n], "rb") as f:
            assert b"\0--scrub-interval\x0086400\0" in f.read(), n
    c2 = s3_client(eps["n2"], ak, sk)
    for k, v in objs.items():
        assert sha(c2.get_object(Bucket="lake", Key=k)["Body"].read()) == sha(v), k
        assert sha(c3.get_object(Bucket="lake", Key=k)["Body"].read()) == sha(v), k
    r = lc("down", "--dir", d, "--wipe")
    assert r.returncode == 0 and all(gone(p) for p in second.values())
    assert not os.path.exists(os.path.join(d, "n1")) and not os.path.exists(os.path.join(d, "secret"))


def test_local_cluster_down_after_failed_up(cluster_dir):
    """A node that cannot start (its S3 port taken): up fails naming the node and its log;
    down then stops what did start."""
    import socket
    d = cluster_dir
    os.makedirs(d)
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0))
    s.listen()
    try:
        port = s.getsockname()[1]
        # The map up would write, with n2's S3 port already taken.
        with open(os.path.join(d, "map.json"), "w") as f:
            json.dump({"cluster": "local", "epoch": 1, "nodes": [
                {"id": "n1", "s3": "127.0.0.1:%d" % p1, "proto": "127.0.0.1:%d" % p2, "drives": 2}
                for p1, p2 in [free_pair()]] + [
                {"id": "n2", "s3": "127.0.0.1:%d" % port, "proto": "127.0.0.1:%d" % free_pair()[0],
                 "drives": 2}]}, f)
        env = dict(os.environ, WL_BUILD=BUILD, WL_UP_TIMEOUT="30")
        r = subprocess.run([LOCAL, "up", "2", "--dir", d], env=env, capture_output=True,
                           text=True, timeout=120)
        assert r.returncode != 0 and "n2" in r.stderr and "down --dir" in r.stderr, r.stderr
        started = pids(d)
        assert "etcd" in started
        r = lc("down", "--dir", d)
        assert r.returncode == 0, r.stdout + r.stderr
        assert all(gone(p) for p in started.values())
    finally:
        s.close()


def free_pair():
    import socket
    a, b = socket.socket(), socket.socket()
    a.bind(("127.0.0.1", 0))
    b.bind(("127.0.0.1", 0))
    out = (a.getsockname()[1], b.getsockname()[1])
    a.close()
    b.close()
    return out


# ---- ssh-deploy.sh

MAP3 = {"cluster": "lake1", "epoch": 1, "nodes": [
    {"id": "n1", "s3": "10.9.0.1:9000", "proto": "10.9.0.1:9100", "drives": 2},
    {"id": "n2", "s3": "10.9.0.2:9000", "proto": "10.9.0.2:9100", "drives": 2},
    {"id": "n3", "s3": "10.9.0.3:9000", "proto": "10.9.0.3:9100", "drives": 3}]}

FAKE = r"""#!/usr/bin/python3
# Records its argv and what came on stdin; fails when FAKE_FAIL names it.
import json, os, sys
data = sys.stdin.buffer.read() if not sys.stdin.isatty() else b""
with open(os.environ["FAKE_LOG"], "a") as f:
    f.write(json.dumps({"argv": [os.path.basename(sys.argv[0])] + sys.argv[1:],
                        "stdin": data.decode(errors="replace")}) + "\n")
sys.exit(255 if os.path.basename(sys.argv[0]) in os.environ.get("FAKE_FAIL", "").split(",") else 0)
"""


@pytest.fixture
def deploy_env():
    """A temp dir with the map, a state dir holding known secrets, and fake ssh/scp/rsync/
    sudo/systemctl earlier on PATH that only record their calls."""
    if not os.path.exists(WARMLAKED) or not os.path.exists(ADMIN):
        pytest.fail("build first: %s missing" % WARMLAKED)
    d = tmpdir("wl-sshd-")
    fake = os.path.join(d, "bin")
    os.makedirs(fake)
    for name in ("ssh", "scp", "rsync", "sudo", "systemctl"):
        with open(os.path.join(fake, name), "w") as f:
            f.write(FAKE)
        os.chmod(os.path.join(fake, name), 0o755)
    state = os.path.join(d, "state")
    os.makedirs(state, mode=0o700)
    secret, sk = "S3cr3t-" + os.urandom(12).hex(), "SK-" + os.urandom(16).hex()
    with open(os.path.join(state, "cluster-secret"), "w") as f:
        f.write(secret)
    with open(os.path.join(state, "credentials"), "w") as f:
        f.write("WARMLAKE_ACCESS_KEY=AKDEPLOYTEST\nWARMLAKE_SECRET_KEY=%s\n" % sk)
    os.chmod(os.path.join(state, "cluster-secret"), 0o600)
    os.chmod(os.path.join(state, "credentials"), 0o600)
    mp = os.path.join(d, "map.json")
    with open(mp, "w") as f:
        json.dump(MAP3, f)
    log = os.path.join(d, "calls.jsonl")
    env = dict(os.environ, PATH=fake + ":" + os.environ["PATH"], FAKE_LOG=log)
    try:
        yield {"dir": d, "map": mp, "state": state, "env": env, "log": log,
               "secrets": (secret, sk)}
    finally:
        shutil.rmtree(d, ignore_errors=True)


def ssh_deploy(de, *args, env=None):
    e = dict(de["env"], **(env or {}))
    return subprocess.run([SSH_DEPLOY] + list(args) + ["--build", BUILD, "--state", de["state"]],
                          env=e, capture_output=True, text=True, timeout=60, cwd=de["dir"])


def calls(de):
    if not os.path.exists(de["log"]):
        return []
    with open(de["log"]) as f:
        return [json.loads(line) for line in f]


def test_ssh_deploy_dry_run(deploy_env):
    de = deploy_env
    r = ssh_deploy(de, de["map"], "--dry-run", "--ssh-user", "admin")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert calls(de) == [], "dry run executed something"
    assert not os.path.exists(os.path.join(de["state"], "stage")), "dry run wrote files"
    for s in de["secrets"]:
        assert s not in out + r.stderr, "a secret was printed"
    cmds = [ln for ln in out.splitlines() if ln and not ln.startswith("#")]
    assert all(c.split()[0] in ("ssh", "scp") for c in cmds), cmds
    for host, nid in (("10.9.0.1", "n1"), ("10.9.0.2", "n2"), ("10.9.0.3", "n3")):
        mine = [c for c in cmds if "admin@" + host in c]
        assert any(c.startswith("scp ") and "warmlaked@.service" in c for c in mine), host
        assert any("install -D -m 0644 .wl-deploy/warmlaked@.service "
                   "/etc/systemd/system/warmlaked@.service" in c for c in mine), host
        assert any("systemctl daemon-reload" in c and "enable --now warmlaked@" + nid in c
                   for c in mine), host
        # The secret reaches the host over ssh's stdin, from its file: named, never shown.
        assert any(c.endswith("< " + os.path.join(de["state"], "cluster-secret")) for c in mine)
        assert any("/etc/systemd/system/etcd.service.d/warmlake.conf" in c for c in mine), host
    # What each host's shell runs parses, and so does the root script inside it.
    for c in cmds:
        if not c.startswith("ssh "):
            continue
        argv = shlex.split(c)
        remote = argv[-3] if argv[-2] == "<" else argv[-1]
        scripts = [remote]
        inner = shlex.split(remote)
        if "sh" in inner and inner[inner.index("sh") + 1] == "-c":
            scripts.append(inner[inner.index("sh") + 2])
        for s in scripts:
            r2 = subprocess.run(["sh", "-n", "-c", s], capture_output=True, text=True)
            assert r2.returncode == 0, (s, r2.stderr)
    # The node's data directory, not its drives: warmlaked makes those (a drive0 there
    # before the first start would read as data of the old one-set layout).
    prep = [c for c in cmds if "install -d -o warmlake -g warmlake -m 0750" in c]
    assert len(prep) == 3 and "/var/lib/warmlake /var/lib/warmlake/n3'" in prep[2], prep
    assert "drive" not in " ".join(prep)
    init = [c for c in cmds if "cluster init --map /etc/warmlake/map.json" in c]
    assert len(init) == 1 and "admin@10.9.0.1" in init[0]
    assert ("--etcd http://10.9.0.1:2379,http://10.9.0.2:2379,http://10.9.0.3:2379"
            in init[0])


def test_ssh_deploy_dry_run_init_none(deploy_env):
    """--init none: no systemctl and no unit anywhere; wl-init installed with the paths
    given, etcd and the nodes started by it, the nodes then waited for."""
    de = deploy_env
    r = ssh_deploy(de, de["map"], "--dry-run", "--init", "none", "--etc-dir", "/srv/wl/etc",
                   "--run-user", "wl", "--log-dir", "/srv/wl/log", "--etcd-data-dir", "/srv/etcd")
    assert r.returncode == 0, r.stderr
    cmds = [ln for ln in r.stdout.splitlines() if ln and not ln.startswith("#")]
    assert calls(de) == [] and not any("systemctl" in c or ".service" in c for c in cmds)
    for host, nid in (("10.9.0.1", "n1"), ("10.9.0.2", "n2"), ("10.9.0.3", "n3")):
        mine = [c for c in cmds if host + " " in c or host + ":" in c]
        assert any("install -D -m 0755 .wl-deploy/wl-init /usr/local/bin/wl-init" in c
                   for c in mine), host
        assert any("/usr/local/bin/wl-init start etcd" in c for c in mine), host
        assert any("/usr/local/bin/wl-init start " + nid in c for c in mine), host
        assert any("/usr/local/bin/wl-init wait " + nid in c for c in mine), host
        assert any("install -d -o etcd -g etcd -m 0700 /srv/etcd" in c for c in mine), host
        assert any('chown root:"$(id -gn wl)" /srv/wl/etc/cluster-secret; chmod 0640' in c
                   for c in mine), host
    assert "useradd --system --user-group --home-dir /var/lib/warmlake" in r.stdout
    assert "cluster init --map /srv/wl/etc/map.json" in r.stdout
    for bad, msg in ((["--init", "upstart"], "want systemd or none"),
                     (["--log-dir", "/var/log/x"], "--log-dir is for --init none"),
                     (["--init", "none", "--etc-dir", "etc"], "want an absolute path"),
                     (["--run-user", "Bad User"], "not a user name")):
        r = ssh_deploy(de, de["map"], "--dry-run", *bad)
        assert r.returncode != 0 and msg in r.stderr and r.stdout == "", (bad, r.stderr)


@pytest.mark.parametrize("init", ["systemd", "none"])
def test_ssh_deploy_runs_what_dry_run_prints(deploy_env, init):
    """The real run (against fake ssh/scp that only record) makes exactly the calls the dry
    run printed, the secrets going over stdin."""
    de = deploy_env
    more = ["--init", init] if init == "none" else []
    dry = ssh_deploy(de, de["map"], "--dry-run", "--etcd-hosts", "10.9.0.1", *more)
    assert dry.returncode == 0, dry.stderr
    want = []
    for ln in dry.stdout.splitlines():
        if not ln or ln.startswith("#"):
            continue
        argv, stdin = shlex.split(ln), None
        if len(argv) > 2 and argv[-2] == "<":
            stdin, argv = argv[-1], argv[:-2]
        want.append((argv, stdin))
    r = ssh_deploy(de, de["map"], "--etcd-hosts", "10.9.0.1", *more)
    assert r.returncode == 0, r.stdout + r.stderr
    got = calls(de)
    assert [c["argv"] for c in got] == [w[0] for w in want]
    for c, (_, stdin) in zip(got, want):
        if stdin:
            with open(stdin) as f:
                assert c["stdin"] == f.read()
    # Only the etcd host gets the etcd drop-in (none without systemd); the node files were
    # staged for each host.
    assert sum("etcd.service.d" in " ".join(w[0]) for w in want) == (init == "systemd")
    if init == "none":
        with open(os.path.join(de["state"], "stage", "10.9.0.2", "wl-init")) as f:
            assert "\nETC=/etc/warmlake\nBIN=/usr/local/bin\n" in f.read()
    with open(os.path.join(de["state"], "stage", "10.9.0.2", "n2.env")) as f:
        assert f.read() == "WARMLAKE_ETCD=http://10.9.0.1:2379\nWARMLAKED_ARGS=\n"
    with open(os.path.join(de["state"], "stage", "10.9.0.1", "etcd.env")) as f:
        etcd_env = f.read()
    assert "ETCD_INITIAL_CLUSTER=10.9.0.1=http://10.9.0.1:2380\n" in etcd_env


def test_ssh_deploy_fails_fast(deploy_env):
    de = deploy_env
    # A host that does not answer: the first ssh fails, nothing else is tried.
    r = ssh_deploy(de, de["map"], env={"FAKE_FAIL": "ssh"})
    assert r.returncode != 0 and "ssh to 10.9.0.1" in r.stderr, r.stderr
    assert len(calls(de)) == 1
    os.remove(de["log"])
    bad = {
        "not json": ('{"cluster": "x", "nodes": [', "not JSON: line 1"),
        "no nodes": ('{"cluster": "x", "epoch": 1, "nodes": []}', '"nodes"'),
        "twice": (json.dumps(dict(MAP3, nodes=[MAP3["nodes"][0]] * 2)), "node id n1 twice"),
        "address": (json.dumps(dict(MAP3, nodes=[dict(MAP3["nodes"][0], s3="10.9.0.1")])),
                    "want HOST:PORT"),
        "wildcard": (json.dumps(dict(MAP3, nodes=[dict(MAP3["nodes"][0], s3="0.0.0.0:9000")])),
                     "wildcard"),
        "host name": (json.dumps(dict(MAP3, nodes=[dict(MAP3["nodes"][0], proto="h1.lan:9100")])),
                      "want an IP address"),
        "set": (json.dumps(dict(MAP3, sets=[{"ec": "2+1", "drives": ["n1/0", "n2/0", "n9/0"]}])),
                "no drive n9/0"),
    }
    for name, (text, msg) in bad.items():
        p = os.path.join(de["dir"], "bad.json")
        with open(p, "w") as f:
            f.write(text)
        for dry in ([], ["--dry-run"]) if name == "not json" else (["--dry-run"],):
            r = ssh_deploy(de, p, *dry)
            assert r.returncode != 0 and msg in r.stderr, (name, r.stderr)
            assert r.stdout == "" and calls(de) == [], name
    r = ssh_deploy(de, os.path.join(de["dir"], "missing.json"), "--dry-run")
    assert r.returncode != 0 and "cannot read the map" in r.stderr


# ---- the systemd units

def test_unit_templates_verify():
    sa = shutil.which("systemd-analyze")
    if not sa:
        pytest.skip("no systemd-analyze")
    if not os.path.exists(WARMLAKED):
        pytest.fail("build first: %s missing" % WARMLAKED)
    d = tmpdir("wl-units-")
    try:
        # verify wants ExecStart's binary to exist: the unit as ssh-deploy.sh installs it
        # with --bin-dir pointing at this build.
        bindir = os.path.join(d, "bin")
        os.makedirs(bindir)
        os.symlink(WARMLAKED, os.path.join(bindir, "warmlaked"))
        with open(os.path.join(ROOT, "deploy", "systemd", "warmlaked@.service")) as f:
            unit = f.read()
        assert "/usr/local/bin/warmlaked" in unit
        with open(os.path.join(d, "warmlaked@.service"), "w") as f:
            f.write(unit.replace("/usr/local/bin/", bindir + "/"))
        # The drop-in, on Debian's etcd unit (or a stand-in where etcd-server is missing).
        base = "/lib/systemd/system/etcd.service"
        if os.path.exists(base):
            shutil.copy(base, os.path.join(d, "etcd.service"))
        else:
            with open(os.path.join(d, "etcd.service"), "w") as f:
                f.write("[Service]\nExecStart=/bin/true\n")
        os.makedirs(os.path.join(d, "etcd.service.d"))
        shutil.copy(os.path.join(ROOT, "deploy", "systemd", "etcd.service.d", "warmlake.conf"),
                    os.path.join(d, "etcd.service.d"))
        for u in ("warmlaked@n1.service", "etcd.service"):
            r = subprocess.run([sa, "verify", os.path.join(d, u)], capture_output=True,
                               text=True, timeout=60, cwd=d)
            mine = [ln for ln in (r.stdout + r.stderr).splitlines()
                    if "warmlaked@" in ln or "warmlake.conf" in ln]
            assert r.returncode == 0 and not mine, (u, r.stdout + r.stderr)
    finally:
        shutil.rmtree(d, ignore_errors=True)


# ---- ssh-deploy.sh into real ssh hosts: network namespaces on this machine

NETNS = os.path.join(ROOT, "deploy", "netns-cluster.sh")


def _netns_hosts_usable():
    if os.geteuid() != 0:
        return "needs root (network namespaces, mounts, sshd)"
    try:
        r = subprocess.run(["ip", "netns", "list"], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as e:
        return "ip netns unavailable: %s" % e
    if r.returncode != 0:
        return "ip netns unavailable: %s" % r.stderr.decode().strip()
    return None


def daemons(runid, n):
    """{host index: {"warmlaked": [pid], "etcd": [pid]}}: what runs in each host's
    namespace, found from outside (not from the pid files the deploy keeps)."""
    out = {}
    for i in range(1, n + 1):
        r = subprocess.run(["ip", "netns", "pids", "wl%s-n%d" % (runid, i)],
                           capture_output=True, text=True, timeout=10)
        got = {"warmlaked": [], "etcd": []}
        for pid in r.stdout.split():
            try:
                exe = os.path.basename(os.readlink("/proc/%s/exe" % pid)).replace(" (deleted)", "")
            except OSError:
                continue
            if exe in got and not gone(int(pid)):
                got[exe].append(int(pid))
        out[i] = got
    return out


@pytest.fixture
def netns_hosts():
    """Four ssh hosts (deploy/netns-cluster.sh hosts 4); taken down whatever the test did:
    every process in their namespaces (sshd, and the warmlaked and etcd deployed there) by
    pid, the namespaces, the veth; then checked gone, the daemons the test saw included."""
    why = _netns_hosts_usable()
    if why:
        pytest.skip(why)
    for exe in (WARMLAKED, ADMIN):
        if not os.path.exists(exe):
            pytest.fail("build first: %s missing" % exe)
    if not os.path.exists("/usr/sbin/sshd"):
        pytest.fail("sshd missing: deploy/install-deps.sh installs openssh-server")
    if not shutil.which("etcd"):
        pytest.fail("etcd missing: deploy/install-deps.sh installs etcd-server")
    top = tmpdir("wl-sshnetns-")
    os.chmod(top, 0o755)  # etcd runs as the etcd user: its data is below
    d = os.path.join(top, "hosts")
    h = {"top": top, "dir": d, "seen": set()}
    runid = None
    try:
        r = subprocess.run([NETNS, "--dir", d, "hosts", "4"], capture_output=True, text=True,
                           timeout=90)
        assert r.returncode == 0, r.stdout + r.stderr
        with open(os.path.join(d, "runid")) as f:
            runid = f.read().strip()
        with open(os.path.join(d, "env")) as f:
            h["env"] = dict(ln.strip().split("=", 1) for ln in f if "=" in ln)
        h["runid"] = runid
        yield h
    finally:
        r = subprocess.run([NETNS, "--dir", d, "down"], capture_output=True, text=True,
                           timeout=300)
        left = []
        if runid:
            out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                                 timeout=10).stdout
            left = [ln.split()[0] for ln in out.splitlines() if ln.startswith("wl%s-" % runid)]
        alive = sorted(p for p in h["seen"] if not gone(p))
        logs = ""
        if r.returncode != 0 or left or alive:
            for log in sorted(glob.glob(os.path.join(d, "n*", "fs", "log", "*.log"))):
                with open(log, errors="replace") as f:
                    logs += "--- %s\n%s\n" % (log, f.read()[-1500:])
            for pid in alive:  # (down stops them; never reached unless it failed)
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(top, ignore_errors=True)
        assert r.returncode == 0 and not left and not alive, (
            "down left things behind: rc %d, namespaces %s, pids %s\n%s%s\n%s" % (
                r.returncode, left, alive, r.stdout, r.stderr, logs))


def test_ssh_deploy_into_netns_hosts(netns_hosts):
    """ssh-deploy.sh --init none into four hosts over real ssh (4 nodes x 3 drives, 4+2,
    etcd on the first three): all up, S3 through any node; run again: nothing restarts;
    run with other --warmlaked-args: every node restarts (etcd does not), the data stays."""
    h = netns_hosts
    env, runid, hd = h["env"], h["runid"], h["env"]["HOST_DIR"]
    hosts = env["HOSTS"].split(",")
    assert len(hosts) == 4
    mp = os.path.join(h["top"], "map.json")
    with open(mp, "w") as f:
        json.dump({"cluster": "sshnetns", "epoch": 1, "ec": "4+2", "nodes": [
            {"id": "n%d" % (i + 1), "s3": "%s:9000" % a, "proto": "%s:9100" % a, "drives": 3}
            for i, a in enumerate(hosts)]}, f)
    state = os.path.join(h["top"], "state")
    # The nodes as nobody (a user there already: none is made), as they would run as warmlake.
    base = [SSH_DEPLOY, mp, "--init", "none", "--no-apt", "--run-user", "nobody",
            "--build", BUILD, "--state", state,
            "--ssh-opt", "IdentityFile=" + env["SSH_KEY"],
            "--ssh-opt", "UserKnownHostsFile=" + env["SSH_KNOWN_HOSTS"],
            "--ssh-opt", "StrictHostKeyChecking=yes", "--ssh-opt", "IdentitiesOnly=yes",
            "--etc-dir", hd + "/etc", "--data-root", hd + "/data", "--bin-dir", hd + "/bin",
            "--log-dir", hd + "/log", "--etcd-data-dir", hd + "/etcd"]
    wargs = "--drive-capacity 1G --segment-size 64M --write-quorum 4 --peer-timeout-ms 2000"
    etc_there = os.path.exists("/etc/warmlake")

    def deploy(args):
        t = time.time()
        r = subprocess.run(base + ["--warmlaked-args", args], capture_output=True, text=True,
                           timeout=240, cwd=h["top"])
        assert r.returncode == 0, r.stdout + r.stderr
        print("ssh-deploy: %.1f s" % (time.time() - t))
        return r

    def running():
        ds = daemons(runid, 4)
        for v in ds.values():
            h["seen"].update(v["warmlaked"] + v["etcd"])
        # One node on each host; etcd on the first three.
        assert [len(ds[i]["warmlaked"]) for i in (1, 2, 3, 4)] == [1, 1, 1, 1], ds
        assert [len(ds[i]["etcd"]) for i in (1, 2, 3, 4)] == [1, 1, 1, 0], ds
        for v in ds.values():  # each as its user (setpriv), not root
            for exe, user in (("warmlaked", "nobody"), ("etcd", "etcd")):
                for pid in v[exe]:
                    with open("/proc/%d/status" % pid) as f:
                        uid = [ln.split()[1] for ln in f if ln.startswith("Uid:")][0]
                    assert int(uid) == pwd.getpwnam(user).pw_uid, (exe, pid, uid)
        return ds

    r = deploy(wargs)
    for i in range(1, 5):
        assert re.search(r"node n%d +up" % i, r.stdout), r.stdout
    assert "set 0: 4+2, ok" in r.stdout and "set 1: 4+2, ok" in r.stdout, r.stdout
    first = running()
    # Seen from here too: the deployed secret and keys, etcd on the hosts' addresses.
    with open(os.path.join(state, "cluster-secret")) as f:
        secret = f.read()
    etcd = ",".join("http://%s:2379" % a for a in hosts[:3])
    st = subprocess.run([ADMIN, "--etcd", etcd, "status", "--json"], capture_output=True,
                        text=True, timeout=30, env=dict(os.environ, WARMLAKE_CLUSTER_SECRET=secret))
    assert st.returncode == 0, st.stderr
    assert sorted((n["id"], n["alive"]) for n in json.loads(st.stdout)["nodes"]) == [
        ("n%d" % i, True) for i in range(1, 5)], st.stdout
    # wl-init on a host knows its daemons by the same pids.
    ssh = ["ssh", "-F", "/dev/null", "-i", env["SSH_KEY"], "-o", "IdentitiesOnly=yes",
           "-o", "BatchMode=yes", "-o", "UserKnownHostsFile=" + env["SSH_KNOWN_HOSTS"],
           "-o", "StrictHostKeyChecking=yes", "root@" + hosts[1], hd + "/bin/wl-init status"]
    r2 = subprocess.run(ssh, capture_output=True, text=True, timeout=30)
    assert r2.returncode == 0 and r2.stdout == "n2 running (pid %d)\netcd running (pid %d)\n" % (
        first[2]["warmlaked"][0], first[2]["etcd"][0]), r2.stdout + r2.stderr

    creds = {}
    with open(os.path.join(state, "credentials")) as f:
        for ln in f:
            k, _, v = ln.strip().partition("=")
            creds[k] = v
    ak, sk = creds["WARMLAKE_ACCESS_KEY"], creds["WARMLAKE_SECRET_KEY"]
    c = {i: s3_client("http://%s:9000" % hosts[i - 1], ak, sk) for i in range(1, 5)}
    c[1].create_bucket(Bucket="deployed")
    want = {}
    for i, size in enumerate([0, 1000, 300000, 2 * 1048576 + 5]):
        data = os.urandom(size)
        c[1].put_object(Bucket="deployed", Key="k%d" % i, Body=data)
        want["k%d" % i] = hashlib.md5(data).hexdigest()
    for k, m in want.items():
        assert hashlib.md5(c[3].get_object(Bucket="deployed", Key=k)["Body"].read()).hexdigest() == m

    # Again, the same: nothing is restarted.
    r = deploy(wargs)
    assert running() == first, (first, r.stdout)
    assert "started" not in r.stdout and "stopped" not in r.stdout, r.stdout

    # Another setting: the nodes restart (one at a time, each waited for), etcd does not.
    r = deploy(wargs.replace("--peer-timeout-ms 2000", "--peer-timeout-ms 3000"))
    second = running()
    for i in (1, 2, 3, 4):
        assert second[i]["etcd"] == first[i]["etcd"], (i, first, second)
        assert second[i]["warmlaked"] != first[i]["warmlaked"], (i, first, second)
    assert r.stdout.count("stopped (pid") == 4 and r.stdout.count(" ready (pid") >= 4, r.stdout
    with open(os.path.join(h["dir"], "n3", "fs", "etc", "n3.env")) as f:
        assert "--peer-timeout-ms 3000" in f.read()
    for i in (2, 4):
        for k, m in want.items():
            got = c[i].get_object(Bucket="deployed", Key=k)["Body"].read()
            assert hashlib.md5(got).hexdigest() == m, (i, k)
    data = os.urandom(500000)
    c[4].put_object(Bucket="deployed", Key="after", Body=data)
    assert c[1].get_object(Bucket="deployed", Key="after")["Body"].read() == data
    # Nothing of it went to this machine's own places.
    assert os.path.exists("/etc/warmlake") == etc_there
