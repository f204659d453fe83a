"""warmlaked under two more of Debian's S3 clients, each used as its users use it:
restic (a backup repository: init, two snapshots, a full check that reads every pack
back, a restore compared by hash) and s3fs (the bucket mounted as a file system over
FUSE: files written through the mount read back through S3 and the other way round,
appends, renames, directories, deletes). Every byte is checked by hash."""
import os
import random
import shutil
import subprocess
import time

import pytest

from conftest import AK, SK, s3_client, sha, tree_hashes


def blob(n, seed):
    r = random.Random(seed)
    return r.randbytes(n)


def make_tree(root, files):
    for name, (n, seed) in files.items():
        p = os.path.join(root, name)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(blob(n, seed))


def test_restic_backup_check_and_restore(server, datadir):
    if not shutil.which("restic"):
        pytest.skip("restic not installed")
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="restic")
    env = dict(os.environ, AWS_ACCESS_KEY_ID=AK, AWS_SECRET_ACCESS_KEY=SK,
               RESTIC_PASSWORD="correct horse battery staple",
               RESTIC_REPOSITORY="s3:%s/restic/repo" % server.endpoint,
               RESTIC_CACHE_DIR=os.path.join(datadir, "restic-cache"))
    env.pop("AWS_CA_BUNDLE", None)

    def restic(*args):
        r = subprocess.run(["restic", "--no-lock" if args[0] == "snapshots" else "--quiet"] +
                           list(args), capture_output=True, timeout=600, env=env)
        assert r.returncode == 0, (args, r.stdout[-1500:], r.stderr[-1500:])
        return r.stdout.decode()

    src = os.path.join(datadir, "src")
    # Small files (inline objects), one across blocks, one of many chunks (restic packs
    # its chunks into pack files of a few MiB: multipart-sized and erasure-coded here).
    files = {"etc/a.conf": (120, 1), "etc/b.conf": (0, 2), "data/mid.bin": (300000, 3),
             "data/big.bin": (12 * (1 << 20) + 17, 4), "deep/x/y/z.txt": (4096, 5)}
    make_tree(src, files)
    restic("init")
    restic("backup", src)
    # A second snapshot after a change: only new chunks are uploaded, the first stays.
    with open(os.path.join(src, "etc/a.conf"), "ab") as f:
        f.write(b"changed\n")
    make_tree(src, {"data/new.bin": (2 * (1 << 20), 6)})
    restic("backup", src)
    assert restic("snapshots", "--json").count('"short_id"') == 2
    restic("check", "--read-data")  # every pack downloaded and verified
    dst = os.path.join(datadir, "dst")
    restic("restore", "latest", "--target", dst)
    assert tree_hashes(os.path.join(dst, os.path.relpath(src, "/"))) == tree_hashes(src)
    # The repository's objects are S3 objects like any other: listed, each read in full.
    keys = [o["Key"] for p in c.get_paginator("list_objects_v2").paginate(Bucket="restic")
            for o in p.get("Contents", [])]
    assert any(k.startswith("repo/data/") for k in keys) and "repo/config" in keys


def mount_s3fs(endpoint, bucket, mnt, datadir):
    """Mount bucket at mnt with s3fs (path-style, plain http); returns the process."""
    pw = os.path.join(datadir, "s3fs.passwd")
    with open(pw, "w") as f:
        f.write("%s:%s\n" % (AK, SK))
    os.chmod(pw, 0o600)
    os.makedirs(mnt, exist_ok=True)
    # -f: in the foreground, as a child the test owns (and kills if it must).
    p = subprocess.Popen(["s3fs", bucket, mnt, "-f", "-o", "url=%s" % endpoint,
                          "-o", "use_path_request_style", "-o", "passwd_file=%s" % pw,
                          "-o", "nonempty", "-o", "stat_cache_expire=1",
                          "-o", "enable_noobj_cache",
                          # Bounded waits: a file operation on the mount must not hang the
                          # suite if the node stops answering (s3fs waits 300 s by default).
                          "-o", "connect_timeout=10", "-o", "readwrite_timeout=60",
                          "-o", "retries=2"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    for _ in range(200):
        if os.path.ismount(mnt):
            return p
        if p.poll() is not None:
            break
        time.sleep(0.05)
    err = p.stderr.read().decode(errors="replace") if p.poll() is not None else ""
    if p.poll() is None:
        p.kill()
        p.wait()
    pytest.skip("s3fs could not mount here (FUSE unavailable?): %s" % err[-500:])


def unmount(p, mnt):
    if os.path.ismount(mnt):
        subprocess.run(["fusermount", "-u", mnt], capture_output=True, timeout=60)
    try:
        p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
    if os.path.ismount(mnt):
        subprocess.run(["umount", "-l", mnt], capture_output=True, timeout=60)


def test_s3fs_mount_reads_and_writes_through(server, datadir):
    if not shutil.which("s3fs") or not os.path.exists("/dev/fuse"):
        pytest.skip("s3fs or /dev/fuse not available")
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="fuse")
    # Written through S3 first: seen through the mount.
    before = blob(3 * (1 << 20) + 5, 10)
    c.put_object(Bucket="fuse", Key="from-s3/obj.bin", Body=before)
    mnt = os.path.join(datadir, "mnt")
    p = mount_s3fs(server.endpoint, "fuse", mnt, datadir)
    try:
        with open(os.path.join(mnt, "from-s3/obj.bin"), "rb") as f:
            assert sha(f.read()) == sha(before)
        # Written through the mount: files of several sizes (s3fs uploads the large one in
        # multipart parts), a directory tree, read back through S3 by hash.
        files = {"a.txt": (10, 11), "dir/b.bin": (70000, 12), "dir/sub/c.bin": (21 << 20, 13),
                 "empty": (0, 14)}
        make_tree(mnt, files)
        for name, (n, seed) in files.items():
            got = c.get_object(Bucket="fuse", Key=name)["Body"].read()
            assert len(got) == n and sha(got) == sha(blob(n, seed)), name
        # An append (s3fs rewrites the object) and an overwrite in the middle.
        with open(os.path.join(mnt, "a.txt"), "ab") as f:
            f.write(b"-appended")
        with open(os.path.join(mnt, "dir/b.bin"), "r+b") as f:
            f.seek(1000)
            f.write(b"X" * 100)
        b = bytearray(blob(70000, 12))
        b[1000:1100] = b"X" * 100
        assert c.get_object(Bucket="fuse", Key="a.txt")["Body"].read() == \
            blob(10, 11) + b"-appended"
        assert sha(c.get_object(Bucket="fuse", Key="dir/b.bin")["Body"].read()) == sha(bytes(b))
        # A rename is a copy and a delete underneath: the new key holds the bytes, the old
        # one is gone.
        os.rename(os.path.join(mnt, "dir/sub/c.bin"), os.path.join(mnt, "moved.bin"))
        assert sha(c.get_object(Bucket="fuse", Key="moved.bin")["Body"].read()) == \
            sha(blob(21 << 20, 13))
        keys = {o["Key"] for o in c.list_objects_v2(Bucket="fuse").get("Contents", [])}
        assert "dir/sub/c.bin" not in keys and "moved.bin" in keys
        # Directory listings through the mount are the bucket's common prefixes.
        assert sorted(os.listdir(mnt)) == sorted(["a.txt", "dir", "empty", "from-s3",
                                                  "moved.bin"])
        assert "b.bin" in os.listdir(os.path.join(mnt, "dir"))
        # Deletes through the mount.
        os.remove(os.path.join(mnt, "a.txt"))
        shutil.rmtree(os.path.join(mnt, "dir"))
        keys = {o["Key"] for o in c.list_objects_v2(Bucket="fuse").get("Contents", [])}
        assert not [k for k in keys if k == "a.txt" or k.startswith("dir/")], keys
    finally:
        unmount(p, mnt)
    # After the unmount the objects written through it are plain S3 objects.
    assert sha(c.get_object(Bucket="fuse", Key="moved.bin")["Body"].read()) == \
        sha(blob(21 << 20, 13))
