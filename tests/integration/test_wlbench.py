"""wl-bench against real servers: a warmlake node (every workload, content
verified, no mismatches, non-zero throughput), nginx serving the files
`wl-bench gen` wrote (plain GETs), and proof that the verification bites:
wrong content on either server is reported and fails the run."""
import json
import os
import shutil
import subprocess
import tempfile

import pytest

from conftest import AK, BUILD, SK, s3_client

WLB = os.path.join(BUILD, "bench", "wlbench", "wl-bench")


def wlb(*args, endpoint=None, expect=0):
    cmd = [WLB] + list(args) + ([] if args[0] == "compare" else ["--quiet"])
    if endpoint:
        cmd += ["--endpoint", endpoint]
    env = dict(os.environ, WARMLAKE_ACCESS_KEY=AK, WARMLAKE_SECRET_KEY=SK)
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == expect, "%s -> %d\n%s\n%s" % (cmd, p.returncode, p.stdout, p.stderr)
    return p.stdout + p.stderr


def run_json(tmp, name, *args, endpoint=None, expect=0):
    path = os.path.join(tmp, name + ".json")
    out = wlb(*args, "--json", path, endpoint=endpoint, expect=expect)
    with open(path) as f:
        return json.load(f), out


@pytest.fixture
def tmp():
    d = tempfile.mkdtemp(prefix="wl-wlb-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_workloads_against_warmlake(server, tmp):
    ep = server.endpoint
    j, _ = run_json(tmp, "put", "put", "--quick", "--size", "4KiB:50,300KiB:40,5MiB:10",
                    "--clients", "4", endpoint=ep)
    assert j["ops"]["put"]["ops"] > 0 and j["ops"]["put"]["mb_per_s"] > 0
    assert j["mismatches"] == 0 and j["errors"] == {}
    for q in ("p50", "p99", "max"):
        assert j["ops"]["put"]["latency_ms"][q] > 0
    j, _ = run_json(tmp, "get", "get", "--quick", "--size", "4KiB:50,300KiB:40,5MiB:10",
                    "--prefix", "g/", "--clients", "4", endpoint=ep)
    assert j["ops"]["get"]["ops"] > 0 and j["mismatches"] == 0 and j["errors"] == {}
    assert j["ops"]["get"]["ttfb_ms"]["p50"] <= j["ops"]["get"]["latency_ms"]["p50"]
    # Ranged GETs over the same objects, verified at their offsets.
    j, _ = run_json(tmp, "range", "get", "--quick", "--size", "4KiB:50,300KiB:40,5MiB:10",
                    "--prefix", "g/", "--no-prepare", "--range", "10000@4KiB", endpoint=ep)
    assert j["ops"]["get"]["ops"] > 0 and j["mismatches"] == 0 and j["errors"] == {}
    j, _ = run_json(tmp, "mixed", "mixed", "--quick", "--size", "64KiB", "--objects", "20",
                    "--mix", "get:50,put:25,stat:15,delete:10", "--clients", "8", endpoint=ep)
    assert j["mismatches"] == 0 and j["errors"] == {}, j
    assert all(j["ops"][o]["ops"] > 0 for o in ("get", "put", "stat", "delete"))
    j, _ = run_json(tmp, "mpu", "multipart", "--quick", "--size", "11MiB", "--part-size", "5MiB",
                    "--clients", "2", "--ops", "3", endpoint=ep)
    assert j["ops"]["multipart"]["ops"] == 3 and j["mismatches"] == 0
    j, _ = run_json(tmp, "list", "list", "--quick", "--size", "0", "--objects", "2500",
                    "--prefix", "l/", "--clients", "2", endpoint=ep)
    assert j["list_keys"] >= 2500 and j["mismatches"] == 0 and j["errors"] == {}
    j, _ = run_json(tmp, "delete", "delete", "--size", "1KiB", "--objects", "50",
                    "--prefix", "d/", endpoint=ep)
    assert j["ops"]["delete"]["ops"] == 50
    # --cleanup deletes what the run wrote.
    wlb("put", "--size", "1KiB", "--ops", "25", "--prefix", "cl/", "--cleanup", endpoint=ep)
    # What the tool wrote is what an ordinary client reads back.
    c = s3_client(ep)
    assert c.list_objects_v2(Bucket="wl-bench", Prefix="cl/")["KeyCount"] == 0
    assert c.list_objects_v2(Bucket="wl-bench", Prefix="d/")["KeyCount"] == 0
    mpu = c.list_objects_v2(Bucket="wl-bench", Prefix="wlb/")["Contents"]
    assert any(o["Size"] == 11 << 20 and o["ETag"].endswith('-3"') for o in mpu)
    # The node's counters, as the bench suite reads them.
    stats = json.loads(wlb("stats", endpoint=ep))
    assert len(stats["drives"]) == 6
    assert stats["total"]["user_bytes"] > 0 and stats["total"]["write_amp"] >= 1.0
    # compare: the change per figure of two runs.
    out = wlb("compare", os.path.join(tmp, "get.json"), os.path.join(tmp, "range.json"))
    assert "get ops/s" in out and "get p99 ms" in out


def test_mismatch_is_loud(server, tmp):
    ep = server.endpoint
    wlb("put", "--size", "64KiB", "--objects", "10", "--ops", "10", "--order", "seq",
        endpoint=ep)
    # Same keys, another seed: every GET must count as a mismatch and fail the run.
    j, out = run_json(tmp, "bad", "get", "--size", "64KiB", "--objects", "10", "--ops", "20",
                      "--no-prepare", "--seed", "2", endpoint=ep, expect=1)
    assert j["mismatches"] == 20
    assert "CONTENT MISMATCH" in out
    # Another size than the one expected is caught too.
    j, _ = run_json(tmp, "bad2", "get", "--size", "65KiB", "--objects", "10", "--ops", "5",
                    "--no-prepare", endpoint=ep, expect=1)
    assert j["mismatches"] == 5
    # Without credentials the tool refuses to run rather than send unsigned requests.
    env = {k: v for k, v in os.environ.items() if "ACCESS" not in k and "SECRET" not in k}
    p = subprocess.run([WLB, "put", "--endpoint", ep, "--quick"], env=env, capture_output=True)
    assert p.returncode == 2


def nginx_conf(d, port):
    user = "user root;" if os.getuid() == 0 else ""
    return f"""worker_processes 1;
daemon off;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
{user}
events {{ worker_connections 256; }}
http {{
  access_log off;
  client_body_temp_path {d}/tmp/b; proxy_temp_path {d}/tmp/p; fastcgi_temp_path {d}/tmp/f;
  uwsgi_temp_path {d}/tmp/u; scgi_temp_path {d}/tmp/s;
  server {{ listen 127.0.0.1:{port}; root {d}/www; }}
}}
"""


def free_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_plain_gets_against_nginx(tmp):
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    if not os.path.exists(nginx):
        pytest.fail("nginx missing: deploy/install-deps.sh installs it")
    os.makedirs(os.path.join(tmp, "tmp"))
    wlb("gen", "--dir", os.path.join(tmp, "www"), "--bucket", "wl", "--prefix", "p/",
        "--objects", "30", "--size", "4KiB:50,1MiB:50")
    port = free_port()
    with open(os.path.join(tmp, "nginx.conf"), "w") as f:
        f.write(nginx_conf(tmp, port))
    proc = subprocess.Popen([nginx, "-c", os.path.join(tmp, "nginx.conf"), "-p", tmp],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        ep = "http://127.0.0.1:%d" % port
        import time
        import urllib.request
        deadline = time.monotonic() + 60  # nginx up, however slowly the machine starts it
        while True:
            try:
                urllib.request.urlopen(ep + "/wl/p/000000000000", timeout=5).read()
                break
            except Exception:
                assert time.monotonic() < deadline and proc.poll() is None, "nginx is not up"
                time.sleep(0.05)
        args = ["get", "--plain", "--bucket", "wl", "--prefix", "p/", "--objects", "30",
                "--size", "4KiB:50,1MiB:50", "--clients", "4"]
        j, _ = run_json(tmp, "ng", *args, "--quick", endpoint=ep)
        assert j["ops"]["get"]["ops"] > 0 and j["ops"]["get"]["mb_per_s"] > 0
        assert j["mismatches"] == 0 and j["errors"] == {}
        # One flipped byte in one file: found, reported, exit status 1.
        victim = os.path.join(tmp, "www", "wl", "p", "000000000003")
        with open(victim, "r+b") as f:
            f.seek(100)
            b = f.read(1)
            f.seek(100)
            f.write(bytes([b[0] ^ 1]))
        j, out = run_json(tmp, "ng2", *args, "--ops", "300", "--order", "seq", endpoint=ep,
                          expect=1)
        assert j["mismatches"] == 10  # key 3 of 30, read in order: 10 of 300 GETs
        assert "000000000003" in out and "offset" in out
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_kill9_during_overwrites_loses_nothing(datadir, tmp):
    """SIGKILL the node while 16 clients overwrite and read 20 keys: after the
    restart every key reads back whole and right (the same seeded content
    is rewritten, so any acknowledged version must verify)."""
    import random
    import time
    from conftest import Server
    s = Server(datadir).start()
    ep = s.endpoint
    sizes = "4KiB:30,700KiB:40,9MiB:30"
    wlb("put", "--size", sizes, "--objects", "20", "--ops", "20", "--order", "seq",
        "--prefix", "ow/", endpoint=ep)
    cmd = [WLB, "mixed", "--mix", "get:50,put:50", "--size", sizes, "--objects", "20",
           "--prefix", "ow/", "--clients", "16", "--duration", "30", "--quiet",
           "--no-prepare", "--endpoint", ep]
    env = dict(os.environ, WARMLAKE_ACCESS_KEY=AK, WARMLAKE_SECRET_KEY=SK)
    load = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        # Kill at a point that depends on the run, not on a clock reading.
        time.sleep(1 + random.random() * 2)
        s.kill9()
        load.terminate()  # its reports go to stderr as they happen, unbuffered
        out, err = load.communicate(timeout=120)
        # Whatever the load saw before the kill, it never read wrong bytes.
        assert b"CONTENT MISMATCH" not in err, err[-2000:]
    finally:
        if load.poll() is None:
            load.kill()
            load.wait()
    s.start()
    try:
        j, _ = run_json(tmp, "after", "get", "--size", sizes, "--objects", "20", "--prefix", "ow/",
                        "--no-prepare", "--order", "seq", "--ops", "60", "--clients", "2",
                        endpoint=s.endpoint)
        assert j["mismatches"] == 0 and j["errors"] == {}, j
        assert j["ops"]["get"]["ops"] == 60
    finally:
        s.stop()
