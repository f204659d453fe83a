"""warmlaked's options, all from one table: --help lists every flag and config
file key; bad values (flags or INI) exit with status 2 and a message naming
the option and what it accepts; an INI file starts a working server, with
flags overriding it."""
import os
import re
import subprocess

import pytest

from conftest import AK, SK, WARMLAKED, Server

FLAGS = ["listen", "data", "drives", "ec", "drive-capacity", "segment-size", "iu", "dwpd",
         "block", "inline-max", "commit-gather", "segment-pool", "index-cache", "workers", "http-loops", "max-conns", "max-stalled", "log-level", "domain", "region",
         "max-header", "header-timeout", "idle-timeout", "io-timeout", "lifecycle-day-seconds",
         "cluster", "etcd", "etcd-prefix", "node", "cluster-secret-file", "peer-timeout-ms", "hedge-ms", "lease-ttl", "drain-rate",
         "write-quorum", "scrub-interval", "scrub-rate", "reap-grace", "config", "help"]
INI_KEYS = ["[server] listen", "[server] data", "[server] workers", "[server] http_loops", "[server] max_conns",
            "[server] max_stalled", "[server] log_level", "[server] domain", "[server] region",
            "[server] max_header", "[server] header_timeout", "[server] idle_timeout",
            "[server] io_timeout", "[server] lifecycle_day_seconds", "[erasure] k", "[erasure] m", "[erasure] block",
            "[erasure] inline_max",
            "[drives] count", "[drives] capacity", "[drives] segment_size", "[drives] iu",
            "[drives] dwpd", "[drives] commit_gather_us", "[drives] segment_pool", "[drives] index_cache", "[drive.N] path", "[drive.N] capacity", "[drive.N] iu",
            "[drive.N] dwpd", "[user.NAME] access_key", "[user.NAME] secret_key",
            "[cluster] map", "[cluster] etcd", "[cluster] etcd_prefix", "[cluster] node",
            "[cluster] secret_file", "[cluster] peer_timeout_ms", "[cluster] lease_ttl", "[cluster] drain_rate", "[erasure] write_quorum",
            "[erasure] scrub_interval", "[erasure] scrub_rate"]


def run(args, datadir, timeout=20):
    """warmlaked with args after a harmless --listen/--data, so that a value wrongly
    accepted starts nothing outside the test's directory (and the timeout stops it)."""
    if not os.path.exists(WARMLAKED):
        pytest.fail("build first: %s missing" % WARMLAKED)
    return subprocess.run([WARMLAKED, "--listen", "127.0.0.1:0", "--data",
                           os.path.join(datadir, "d")] + args,
                          capture_output=True, text=True, timeout=timeout)


def test_help_lists_every_option(datadir):
    r = run(["--help"], datadir)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert sorted(re.findall(r"^  --([a-z-]+)", out, re.M)) == sorted(FLAGS)
    for key in INI_KEYS:
        assert key in out, key
    # The new options with their defaults and ranges.
    for want in ["--region NAME", "default us-east-1", "--io-timeout SEC",
                 "default 30; 1..86400; [server] io_timeout", "--max-stalled N",
                 "default 256; 1..65536; [server] max_stalled",
                 "default 32; 1..4096; [server] workers", "default 4+2",
                 "--lifecycle-day-seconds SEC",
                 "default 0; 0 or 1..86400; [server] lifecycle_day_seconds"]:
        assert want in out, want
    assert run(["-h"], datadir).stdout == out


@pytest.mark.parametrize("args,want", [
    (["--workers", "12x"], "--workers: bad value '12x': want a whole number in 1..4096"),
    (["--workers", "+3"], "--workers: bad value '+3'"),
    (["--workers", " 3"], "--workers: bad value ' 3'"),
    (["--workers", "0"], "--workers: bad value '0': want a whole number in 1..4096"),
    (["--workers", "99999999999"], "--workers: bad value '99999999999'"),
    (["--workers", "99999999999999999999999"], "--workers: bad value"),
    (["--drive-capacity", "5Q"], "--drive-capacity: bad value '5Q': want a size in 1M..1024T"),
    (["--drive-capacity", "16G "], "--drive-capacity: bad value"),
    (["--max-header", "2M"], "--max-header: bad value '2M': want a size in 1K..1M"),
    (["--dwpd", "1e3"], "--dwpd: bad value '1e3': want a number in 0..1000"),
    (["--ec", "4+x"], "--ec: bad value '4+x': want K+M, K 1..16, M 0..4"),
    (["--ec", "5+2"], "--drives 6 ([drives] count) must be a multiple of --ec 5+2"),
    (["--block", "100"], "--block 100 ([erasure] block) must be a multiple of 64"),
    (["--iu", "6000"], "--iu 6000 ([drives] iu) must be a power of two"),
    (["--commit-gather", "100001"],
     "--commit-gather: bad value '100001': want a whole number in 0..100000"),
    (["--io-timeout", "0"], "--io-timeout: bad value '0': want a whole number in 1..86400"),
    (["--io-timeout", "86401"], "--io-timeout: bad value"),
    (["--lifecycle-day-seconds", "-1"], "--lifecycle-day-seconds: bad value '-1'"),
    (["--lifecycle-day-seconds", "86401"],
     "--lifecycle-day-seconds: bad value '86401': want a whole number in 0 or 1..86400"),
    (["--max-stalled", "65537"],
     "--max-stalled: bad value '65537': want a whole number in 1..65536"),
    (["--region", "eu west"], "--region: bad value 'eu west'"),
    (["--log-level", "loud"], "--log-level: bad value 'loud': want one of debug"),
    (["--listen", "localhost"], "--listen: bad value 'localhost': want HOST:PORT"),
    (["--header-timeout", "-1"], "--header-timeout: bad value '-1'"),
    (["--workers"], "--workers needs a value"),
    (["--no-such-flag"], "unknown or ambiguous option '--no-such-flag'"),
    (["extra"], "unexpected argument 'extra'"),
])
def test_bad_flag_exits_2(datadir, args, want):
    r = run(args, datadir)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert want in r.stderr, r.stderr
    assert not os.path.exists(os.path.join(datadir, "d")), "drives were created"


@pytest.mark.parametrize("text,line,want", [
    ("[server]\nworkers = abc\n", 2,
     "[server] workers (--workers): bad value 'abc': want a whole number in 1..4096"),
    ("[server]\nregion = us-east-1\n\n[drives]\ncount = +6\n", 5,
     "[drives] count (--drives): bad value '+6'"),
    ("[drive.1]\ncapacity = 5Q\n", 2, "[drive.1] capacity: bad value '5Q'"),
    ("[drive.99]\npath = /tmp/x\n", 2, "[drive.99]: want [drive.N], N a whole number in 0..19"),
    ("[server]\nio_timeout = 0\n", 2, "[server] io_timeout (--io-timeout): bad value '0'"),
    ("[server]\nmax_stalled = 1x\n", 2, "[server] max_stalled (--max-stalled): bad value '1x'"),
    ("[server]\nno_such_key = 1\n", 2, "unknown setting 'no_such_key' in [server]"),
    ("[nowhere]\nx = 1\n", 2, "unknown section [nowhere]"),
])
def test_bad_ini_exits_2(datadir, text, line, want):
    path = os.path.join(datadir, "bad.ini")
    with open(path, "w") as f:
        f.write(text)
    # The file is refused even where a flag would override the value.
    r = run(["--config", path, "--workers", "8", "--drives", "6"], datadir)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "%s, line %d: %s" % (path, line, want) in r.stderr, r.stderr


def test_missing_ini_and_incomplete_user(datadir):
    r = run(["--config", os.path.join(datadir, "none.ini")], datadir)
    assert r.returncode == 2 and "cannot read" in r.stderr, r.stderr
    path = os.path.join(datadir, "user.ini")
    with open(path, "w") as f:
        f.write("[user.alice]\naccess_key = AKIAALICE\n")
    r = run(["--config", path], datadir)
    assert r.returncode == 2 and "[user.alice] needs access_key and secret_key" in r.stderr


INI_AK, INI_SK = "AKIAWARMLAKEINIUSER1", "ini/user/secret/key/for/tests000000000000"


def write_ini(datadir):
    # listen, data, drives and k/m are overridden by the flags Server passes: were the
    # file to win, the server could not start (port 1, a missing directory, 3 != 4+2).
    path = os.path.join(datadir, "warmlaked.ini")
    with open(path, "w") as f:
        f.write("; warmlaked test configuration\n"
                "[server]\nlisten = 127.0.0.1:1\ndata = /nonexistent/warmlake\n"
                "region = eu-west-3\nworkers = 4\nmax_conns = 64\nlog_level = warn\n"
                "io_timeout = 20\nmax_stalled = 16\nheader_timeout = 10\nidle_timeout = 20\n"
                "max_header = 32k\n"
                "[erasure]\nk = 2\nm = 1\nblock = 256K\n"
                "[drives]\ncount = 3\ncapacity = 1G\nsegment_size = 32M\ndwpd = 0\n"
                "[user.ini]\naccess_key = %s\nsecret_key = %s\n" % (INI_AK, INI_SK))
    return path


def client(endpoint, region, ak=INI_AK, sk=INI_SK):
    """A boto3 client that signs for region (the server may insist on its own)."""
    import boto3
    from botocore.config import Config
    return boto3.session.Session().client(
        "s3", endpoint_url=endpoint, aws_access_key_id=ak, aws_secret_access_key=sk,
        region_name=region, config=Config(s3={"addressing_style": "path"},
                                          retries={"max_attempts": 2}))


def test_ini_with_overriding_flags(datadir):
    path = write_ini(datadir)
    s = Server(datadir, extra=["--config", path]).start()
    try:
        # The user from the file, and the region from the file.
        c = client(s.endpoint, "eu-west-3")
        c.create_bucket(Bucket="from-ini",
                        CreateBucketConfiguration={"LocationConstraint": "eu-west-3"})
        assert c.get_bucket_location(Bucket="from-ini")["LocationConstraint"] == "eu-west-3"
        c.put_object(Bucket="from-ini", Key="k", Body=b"x" * 300000)
        assert c.get_object(Bucket="from-ini", Key="k")["Body"].read() == b"x" * 300000
        # The environment's users still work alongside (and see only their own buckets).
        env = client(s.endpoint, "eu-west-3", AK, SK)
        assert "from-ini" not in [b["Name"] for b in env.list_buckets()["Buckets"]]
    finally:
        s.stop()
    # A flag overrides the file's region, wherever --config stands.
    s = Server(datadir, extra=["--region", "ap-south-2", "--config", path]).start()
    try:
        c = client(s.endpoint, "ap-south-2")
        assert c.get_bucket_location(Bucket="from-ini")["LocationConstraint"] == "ap-south-2"
        assert c.get_object(Bucket="from-ini", Key="k")["Body"].read() == b"x" * 300000
    finally:
        s.stop()


def test_write_quorum_outside_k_to_n_refused(datadir):
    env = dict(os.environ, WARMLAKE_ACCESS_KEY="wq-test-key", WARMLAKE_SECRET_KEY="wq-test-secret-0")
    for q in ("3", "7"):
        r = subprocess.run([WARMLAKED, "--listen", "127.0.0.1:0", "--data",
                            os.path.join(datadir, "d"), "--drive-capacity", "256M",
                            "--segment-size", "16M", "--write-quorum", q],
                           capture_output=True, text=True, timeout=20, env=env)
        assert r.returncode != 0, r.stderr
        assert "--write-quorum %s is outside k..k+m (4..6)" % q in r.stderr, r.stderr
