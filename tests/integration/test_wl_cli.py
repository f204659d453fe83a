"""The `wl` command line against a real warmlaked, twice: with batch GET
tried (warmlake's extension; a server without it answers 4xx and the client
falls back to single GETs) and as a plain S3 client (WARMLAKE_NO_BATCH=1,
nothing changed on the server). Content is verified by hash, on the server
through boto3 and on disk after downloads."""
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import urllib.request

import pytest

from conftest import AK, BUILD, SK, s3_client, sha, tree_hashes

WL = os.path.join(BUILD, "client", "wl")


@pytest.fixture(params=["batch", "plain"])
def mode(request):
    return request.param


@pytest.fixture
def tmp():
    d = tempfile.mkdtemp(prefix="wl-cli-", dir=os.environ.get("WL_TEST_DIR", "/tmp"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def wl(server, *args, mode="batch", expect=0, env=None, endpoint=True):
    e = dict(os.environ)
    for k in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "WARMLAKE_ENDPOINTS",
              "WARMLAKE_NO_BATCH", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        e.pop(k, None)
    e.update(AWS_ACCESS_KEY_ID=AK, AWS_SECRET_ACCESS_KEY=SK,
             AWS_SHARED_CREDENTIALS_FILE="/nonexistent", AWS_CONFIG_FILE="/nonexistent")
    if endpoint:
        e["AWS_ENDPOINT_URL"] = server.endpoint
    if mode == "plain":
        e["WARMLAKE_NO_BATCH"] = "1"
    e.update(env or {})
    p = subprocess.run([WL] + list(args), capture_output=True, env=e, timeout=120)
    assert p.returncode == expect, "wl %s -> %d\n%s\n%s" % (args, p.returncode, p.stdout,
                                                           p.stderr.decode(errors="replace"))
    return p.stdout.decode(), p.stderr.decode()


def make_tree(root):
    """Files of many sizes (empty, small, multipart-sized), nested, odd names; {rel: sha}."""
    sizes = {"empty": 0, "one": 1, "a/small": 1000, "a/b/mid": 100_000, "a/b/c/big": 11_000_000,
             "name with space.txt": 77, "a/ünï.bin": 3000}
    for i in range(20):
        sizes["many/f%02d" % i] = 500 + i * 37
    out = {}
    for rel, n in sizes.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        data = os.urandom(n)
        with open(path, "wb") as f:
            f.write(data)
        out[rel] = sha(data)
    return out


def test_cp_tree_round_trip(server, tmp, mode):
    src, dst = os.path.join(tmp, "src"), os.path.join(tmp, "dst")
    want = make_tree(src)
    wl(server, "mb", "wl://tree", mode=mode)
    out, err = wl(server, "cp", "-r", "--part-size", "5", "-j", "3", src, "wl://tree/up",
                  mode=mode)
    assert out.count("upload: ") == len(want)
    assert "\r" not in err  # no progress bar when stderr is not a terminal
    # On the server, byte for byte (boto3 reads them back).
    s3 = s3_client(server.endpoint)
    got = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket="tree", Prefix="up/"):
        for o in page.get("Contents", []):
            body = s3.get_object(Bucket="tree", Key=o["Key"])["Body"].read()
            got[o["Key"][3:]] = sha(body)
    assert got == want
    # The 11 MB file went up in parts.
    assert s3.head_object(Bucket="tree", Key="up/a/b/c/big")["ETag"].strip('"').endswith("-3")
    # And down again, through batch GET or single GETs.
    out, err = wl(server, "--stats", "--verify", "cp", "-r", "wl://tree/up", dst, mode=mode)
    assert tree_hashes(dst) == want
    stats = json.loads(err.strip().splitlines()[-1])
    if mode == "plain":
        assert stats["batch_requests"] == 0
    else:
        assert stats["batch_requests"] >= 1
    # Every small object came one way or the other, each exactly once.
    small = sum(1 for k in want if k != "a/b/c/big")
    assert stats["batch_entries"] + stats["single_gets"] == small
    # Single files: into a directory, and to a named file.
    wl(server, "cp", os.path.join(src, "a/small"), "wl://tree/single/", mode=mode)
    wl(server, "cp", "wl://tree/single/small", os.path.join(tmp, "copy"), mode=mode)
    with open(os.path.join(tmp, "copy"), "rb") as f:
        assert sha(f.read()) == want["a/small"]


def test_ls_stat_du_cat_rm_rb(server, tmp, mode):
    s3 = s3_client(server.endpoint)
    wl(server, "mb", "wl://lsb", mode=mode)
    blobs = {"x/1": os.urandom(10), "x/2": os.urandom(2000), "x/y/3": os.urandom(9_000_000),
             "top": b"t"}
    for k, v in blobs.items():
        s3.put_object(Bucket="lsb", Key=k, Body=v)
    out, _ = wl(server, "--json", "ls", "wl://lsb/x/", mode=mode)
    rows = [json.loads(l) for l in out.splitlines()]
    assert {r.get("key") for r in rows if "key" in r} == {"x/1", "x/2"}
    assert [r["prefix"] for r in rows if "prefix" in r] == ["x/y/"]
    out, _ = wl(server, "ls", "-r", "wl://lsb", mode=mode)
    assert sorted(l.split()[-1] for l in out.splitlines()) == sorted(blobs)
    out, _ = wl(server, "--json", "ls", mode=mode)
    assert "lsb" in [json.loads(l)["bucket"] for l in out.splitlines()]
    out, _ = wl(server, "--json", "stat", "wl://lsb/x/2", mode=mode)
    st = json.loads(out)
    assert st["size"] == 2000
    assert st["etag"] == hashlib.md5(blobs["x/2"]).hexdigest()
    out, _ = wl(server, "--json", "du", "wl://lsb/x", mode=mode)
    assert json.loads(out) == {"bytes": 9_002_010, "objects": 3}
    # cat streams the object in ranged parts (8 MiB default: two here).
    p = subprocess.run([WL, "cat", "wl://lsb/x/y/3"], capture_output=True, timeout=60,
                       env=dict(os.environ, AWS_ACCESS_KEY_ID=AK, AWS_SECRET_ACCESS_KEY=SK,
                                AWS_ENDPOINT_URL=server.endpoint))
    assert p.returncode == 0 and sha(p.stdout) == sha(blobs["x/y/3"])
    # Errors name the S3 code and the request id; exit 1.
    _, err = wl(server, "stat", "wl://lsb/none", mode=mode, expect=1)
    assert "404" in err and "request id" in err
    _, err = wl(server, "rb", "wl://lsb", mode=mode, expect=1)
    assert "BucketNotEmpty" in err
    wl(server, "rm", "wl://lsb/top", mode=mode)
    wl(server, "rm", "-r", "wl://lsb/x/", mode=mode)
    assert s3.list_objects_v2(Bucket="lsb")["KeyCount"] == 0
    s3.put_object(Bucket="lsb", Key="again", Body=b"1")
    wl(server, "rb", "--force", "wl://lsb", mode=mode)
    assert "lsb" not in [b["Name"] for b in s3.list_buckets()["Buckets"]]
    # Usage errors: exit 2.
    wl(server, "cp", "a", "b", mode=mode, expect=2)
    wl(server, "frobnicate", mode=mode, expect=2)


def test_sync(server, tmp, mode):
    src, back = os.path.join(tmp, "src"), os.path.join(tmp, "back")
    want = make_tree(src)
    wl(server, "mb", "wl://syn", mode=mode)
    out, _ = wl(server, "sync", src, "wl://syn/p", mode=mode)
    assert out.count("upload: ") == len(want)
    out, _ = wl(server, "sync", src, "wl://syn/p", mode=mode)
    assert out == ""  # nothing changed, nothing sent
    with open(os.path.join(src, "a/small"), "wb") as f:
        f.write(b"changed size")
    want["a/small"] = sha(b"changed size")
    out, _ = wl(server, "sync", src, "wl://syn/p", mode=mode)
    assert out.splitlines() == ["upload: %s -> wl://syn/p/a/small" % os.path.join(src, "a/small")]
    out, _ = wl(server, "sync", "wl://syn/p", back, mode=mode)
    assert tree_hashes(back) == want
    out, _ = wl(server, "sync", "wl://syn/p", back, mode=mode)
    assert out == ""


def test_presign(server, tmp, mode):
    s3 = s3_client(server.endpoint)
    wl(server, "mb", "wl://pre", mode=mode)
    s3.put_object(Bucket="pre", Key="a b/c", Body=b"presigned body")
    out, _ = wl(server, "presign", "--expires", "60", "wl://pre/a b/c", mode=mode)
    assert urllib.request.urlopen(out.strip(), timeout=10).read() == b"presigned body"


def test_config_files_and_node_list(server, tmp, mode):
    """Keys and endpoint from aws-style files under a profile; a node list with a dead node."""
    creds, conf = os.path.join(tmp, "credentials"), os.path.join(tmp, "config")
    with open(creds, "w") as f:
        f.write("[default]\naws_access_key_id = WRONG\naws_secret_access_key = wrong\n"
                "[lake]\naws_access_key_id = %s\naws_secret_access_key = %s\n" % (AK, SK))
    with open(conf, "w") as f:
        f.write("[profile lake]\nregion = us-east-1\nendpoint_url = %s\n" % server.endpoint)
    env = {"AWS_SHARED_CREDENTIALS_FILE": creds, "AWS_CONFIG_FILE": conf,
           "AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": ""}
    wl(server, "--profile", "lake", "mb", "wl://cfg", mode=mode, env=env, endpoint=False)
    wl(server, "ls", mode=mode, env=dict(env, AWS_PROFILE="lake"), endpoint=False)
    # The default profile's keys are wrong; its config has no endpoint.
    _, err = wl(server, "ls", mode=mode, env=env, endpoint=False, expect=2)
    assert "no endpoint" in err
    _, err = wl(server, "--endpoint", server.endpoint, "ls", mode=mode, env=env,
                endpoint=False, expect=1)
    assert "403" in err
    # Two nodes, one of them down: every request still lands.
    nodes = "http://127.0.0.1:1,%s" % server.endpoint
    src = os.path.join(tmp, "src")
    want = make_tree(src)
    wl(server, "cp", "-r", src, "wl://cfg/n", mode=mode, env={"WARMLAKE_ENDPOINTS": nodes},
       endpoint=False)
    wl(server, "cp", "-r", "wl://cfg/n", os.path.join(tmp, "dst"), mode=mode,
       env={"WARMLAKE_ENDPOINTS": nodes}, endpoint=False)
    assert tree_hashes(os.path.join(tmp, "dst")) == want


def test_progress_on_terminal(server, tmp):
    """On a terminal the meter draws (bytes, total, rate); --quiet and --json keep it off."""
    import pty
    src = os.path.join(tmp, "f")
    with open(src, "wb") as f:
        f.write(os.urandom(3_000_000))
    wl(server, "mb", "wl://tty")

    def run(*args):
        master, slave = pty.openpty()
        env = dict(os.environ, AWS_ACCESS_KEY_ID=AK, AWS_SECRET_ACCESS_KEY=SK,
                   AWS_ENDPOINT_URL=server.endpoint)
        p = subprocess.Popen([WL] + list(args), stdout=subprocess.PIPE, stderr=slave, env=env)
        os.close(slave)
        out = b""
        while True:
            try:
                b = os.read(master, 4096)
            except OSError:
                break
            if not b:
                break
            out += b
        p.wait(timeout=60)
        os.close(master)
        assert p.returncode == 0
        return out.decode(errors="replace")

    err = run("cp", src, "wl://tty/f")
    assert "/ 2.9 MiB" in err and "/s" in err
    assert run("--quiet", "cp", src, "wl://tty/g") == ""
    assert run("--json", "cp", "wl://tty/f", os.path.join(tmp, "back")) == ""


def test_download_never_leaves_target(server, tmp, mode):
    """Keys with '..' components are skipped (reported), not written outside the target."""
    s3 = s3_client(server.endpoint)
    wl(server, "mb", "wl://esc", mode=mode)
    s3.put_object(Bucket="esc", Key="up/ok..name", Body=b"fine")
    s3.put_object(Bucket="esc", Key="up/../evil", Body=b"evil")
    s3.put_object(Bucket="esc", Key="up/a/../../evil2", Body=b"evil")
    dst = os.path.join(tmp, "inner", "dst")
    _, err = wl(server, "cp", "-r", "wl://esc/up", dst, mode=mode)
    assert tree_hashes(os.path.join(tmp, "inner")) == {"dst/ok..name": sha(b"fine")}
    assert "up/a/../../evil2" in err


def test_copy_between_buckets(server, tmp, mode):
    """wl:// to wl://: server-side copies of a key (named, or into a prefix) and of a tree."""
    s3 = s3_client(server.endpoint)
    for b in ("cpa", "cpb"):
        wl(server, "mb", "wl://" + b, mode=mode)
    blobs = {"t/x": os.urandom(100), "t/d/y": os.urandom(7_000_000), "t/z": b""}
    for k, v in blobs.items():
        s3.put_object(Bucket="cpa", Key=k, Body=v)
    wl(server, "cp", "wl://cpa/t/x", "wl://cpb/named", mode=mode)
    wl(server, "cp", "wl://cpa/t/x", "wl://cpb/into/", mode=mode)
    out, _ = wl(server, "--json", "cp", "-r", "wl://cpa/t", "wl://cpb/tree", mode=mode)
    assert len(out.splitlines()) == 3
    got = {o["Key"]: sha(s3.get_object(Bucket="cpb", Key=o["Key"])["Body"].read())
           for o in s3.list_objects_v2(Bucket="cpb")["Contents"]}
    want = {"named": sha(blobs["t/x"]), "into/x": sha(blobs["t/x"])}
    want.update({"tree/" + k[2:]: sha(v) for k, v in blobs.items()})
    assert got == want
    _, err = wl(server, "cp", "wl://cpa/none", "wl://cpb/n", mode=mode, expect=1)
    assert "NoSuchKey" in err or "404" in err
