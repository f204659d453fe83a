#!/usr/bin/env python3
"""bench/run.sh reader: the training-data reader against its ceiling, on a
local warmlaked (started here, temp drives under $BENCH_DIR) or --endpoint.

Rows (bench/report.py format), for 16 KiB, 100 KiB and 1 MiB samples:
  (a) warmlake.torch ObjectDataset, DataLoader with 4 workers, a BatchSampler
      of 64 (each step one batch GET, or parallel GETs without the extension)
  (b) a plain boto3 map-style Dataset doing the same reads, same workers (in a process of
      its own: see boto3_rate)
  (c) wl-bench GET of the same size, 16 clients: the ceiling
and tar shards (256 MiB; --quick 32 MiB) through ShardDataset against
wl-bench GET of objects that size; checkpoint save and load of a state dict
(2 GiB; --quick 256 MiB) against wl-bench multipart PUT and GET of the same
size (checkpoint_load_into: loaded into the saved state dict's own tensors, as a resume
into a model does, instead of new ones). Samples/s and MB/s; ratio columns against (b) and
(c). The *_tensor rows: the same
warmlake.torch reads with as_tensor=True (samples as uint8 tensors in shared memory, handed to
the main process as file descriptors, where bytes are pickled through a pipe).
"""
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("BUILD", os.path.join(ROOT, "build"))
sys.path.insert(0, os.path.join(ROOT, "client", "python"))
os.environ.setdefault("WARMLAKE_LIB", os.path.join(BUILD, "client", "libwarmlake.so"))
QUICK = os.environ.get("QUICK") == "1" or "--quick" in sys.argv
AK = os.environ.get("AWS_ACCESS_KEY_ID", "AKIAWARMLAKEBENCH001")
SK = os.environ.get("AWS_SECRET_ACCESS_KEY", "warmlake/bench/secret/key/000000000000000")
WORKERS = 4


def row(name, value, unit, ceiling="-"):
    print("ROW\t%s\t%.6g\t%s\t%s" % (name, value, unit, ceiling), flush=True)


def start_server(tmp):
    env = dict(os.environ, WARMLAKE_ACCESS_KEY=AK, WARMLAKE_SECRET_KEY=SK)
    p = subprocess.Popen([os.path.join(BUILD, "server", "warmlaked"), "--listen", "127.0.0.1:0",
                          "--data", tmp, "--drives", "6", "--ec", "4+2", "--drive-capacity",
                          "16G" if not QUICK else "4G", "--segment-size", "64M"],
                         stdout=subprocess.PIPE, stderr=open(os.path.join(tmp, "log"), "w"),
                         env=env)
    deadline = time.time() + 30
    while time.time() < deadline:
        line = p.stdout.readline().decode()
        if "ready port=" in line:
            return p, "http://127.0.0.1:%d" % int(line.split("ready port=")[1])
        if not line:
            break
    p.kill()
    raise SystemExit("reader: warmlaked did not start (see %s/log)" % tmp)


def wlbench(ep, workload, size, prefix, objects, extra=()):
    out = tempfile.mktemp(suffix=".json")
    cmd = [os.path.join(BUILD, "bench", "wlbench", "wl-bench"), workload, "--endpoint", ep,
           "--access-key", AK, "--secret-key", SK, "--bucket", "reader", "--prefix", prefix,
           "--size", size, "--objects", str(objects), "--clients", "16", "--duration",
           "3" if QUICK else "10", "--json", out, "--quiet"] + list(extra)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    with open(out) as f:
        j = json.load(f)
    os.unlink(out)
    op = j["ops"]["get" if workload == "get" else workload]
    return op["ops_per_s"], op["mb_per_s"]


def boto3_dataset(ep, keys):
    import torch

    class B(torch.utils.data.Dataset):
        def __init__(self):
            self.c = None

        def __len__(self):
            return len(keys)

        def __getitem__(self, i):
            if self.c is None:
                import boto3
                from botocore.config import Config
                self.c = boto3.session.Session().client(
                    "s3", endpoint_url=ep, aws_access_key_id=AK, aws_secret_access_key=SK,
                    region_name="us-east-1", config=Config(s3={"addressing_style": "path"},
                                                           max_pool_connections=32))
            return self.c.get_object(Bucket="reader", Key=keys[i])["Body"].read()
    return B()


def boto3_run(ep, prefix):
    """(b) in this process: what --boto3 runs."""
    import torch
    import warmlake
    client = warmlake.Client(ep, access_key=AK, secret_key=SK)
    keys = [o["key"] for o in client.list("reader", prefix) if "key" in o]
    return timed(torch.utils.data.DataLoader(
        boto3_dataset(ep, keys), batch_size=64, num_workers=WORKERS,
        collate_fn=lambda x: x, sampler=drawn(keys)))


def drawn(keys):
    """The samples an epoch draws: every key once in random order, and at least 40 batches
    of 64 (each key again in a new order): timed() starts at the first batch, by when the
    workers have up to 8 more fetched (prefetch_factor 2), which with 600 keys (9 batches)
    was most of the run."""
    import torch
    return torch.utils.data.RandomSampler(keys, num_samples=max(len(keys), 64 * 40))


def boto3_rate(ep, prefix):
    """(b) in a process of its own: in this one the warmlake rows have set glibc's malloc
    thresholds (warmlake._shm), which speed up any reader's bytes here (boto3's 1 MiB row:
    129-150 samples/s without, 186-428 with, two A/B pairs), and a boto3 user does not get
    that."""
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--boto3", ep, prefix],
                         check=True, stdout=subprocess.PIPE).stdout
    return tuple(json.loads(out.decode().strip().splitlines()[-1]))


def timed(loader):
    """Samples/s and MB/s from the first batch on (worker start-up is not reading)."""
    t = None
    n = b = 0
    for batch in loader:
        if t is None:
            t = time.time()
            continue
        for s in batch:
            n += 1
            b += len(s)
    dt = time.time() - t
    return n / dt, b / dt / 1e6


def samples(ep, client):
    import torch
    import warmlake.torch as wt
    for label, size, n in (("16KiB", "16KiB", 3000), ("100KiB", "100KiB", 2000),
                           ("1MiB", "1MiB", 600)):
        if QUICK:
            n //= 5
        prefix = "s%s/" % label
        c_ops, c_mb = wlbench(ep, "get", size, prefix, n)
        keys = [o["key"] for o in client.list("reader", prefix) if "key" in o]
        ds = wt.ObjectDataset("reader", keys=keys, client=client)
        sampler = torch.utils.data.BatchSampler(drawn(keys), 64, False)
        a_ops, a_mb = timed(torch.utils.data.DataLoader(ds, batch_size=None, sampler=sampler,
                                                        num_workers=WORKERS))
        sampler = torch.utils.data.BatchSampler(drawn(keys), 64, False)
        t_ops, t_mb = timed(torch.utils.data.DataLoader(
            wt.ObjectDataset("reader", keys=keys, client=client, as_tensor=True),
            batch_size=None, sampler=sampler, num_workers=WORKERS))
        b_ops, b_mb = boto3_rate(ep, prefix)
        row("wlbench_get_%s" % label, c_ops, "ops/s")
        row("boto3_dataset_%s" % label, b_ops, "samples/s", "wlbench_get_%s" % label)
        row("warmlake_dataset_%s" % label, a_ops, "samples/s", "wlbench_get_%s" % label)
        row("warmlake_vs_boto3_%s" % label, a_ops / b_ops, "ratio", 1)
        row("warmlake_dataset_%s_MBps" % label, a_mb, "MB/s", c_mb)
        row("warmlake_dataset_tensor_%s" % label, t_ops, "samples/s", "wlbench_get_%s" % label)
        row("warmlake_tensor_vs_boto3_%s" % label, t_ops / b_ops, "ratio", 1)
        row("warmlake_dataset_tensor_%s_MBps" % label, t_mb, "MB/s", c_mb)


def shards(ep, client):
    import torch
    import warmlake.torch as wt
    size = (32 if QUICK else 256) << 20
    nshards, per = (2 if QUICK else 4), 256
    c_ops, c_mb = wlbench(ep, "get", "%dMiB" % (size >> 20), "shardceil/", nshards)
    keys = []
    for s in range(nshards):
        b = io.BytesIO()
        with tarfile.open(fileobj=b, mode="w", format=tarfile.USTAR_FORMAT) as t:
            for j in range(per):
                data = os.urandom(size // per - 1024)
                info = tarfile.TarInfo("%05d.bin" % (s * per + j))
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
        keys.append("shards/%02d.tar" % s)
        client.put("reader", keys[-1], b.getvalue())
    mbs = {}
    for as_tensor in (False, True):
        ds = wt.ShardDataset("reader", shards=keys, client=client, shuffle_buffer=64,
                             as_tensor=as_tensor)
        t = None
        nb = 0
        for s in torch.utils.data.DataLoader(ds, batch_size=None,
                                             num_workers=min(WORKERS, nshards)):
            if t is None:
                t = time.time()  # from the first sample on: worker start-up is not reading
                continue
            nb += len(s["bin"])
        mbs[as_tensor] = nb / (time.time() - t) / 1e6
    row("wlbench_get_%dMiB" % (size >> 20), c_mb, "MB/s")
    row("warmlake_shards_%dMiB" % (size >> 20), mbs[False], "MB/s",
        "wlbench_get_%dMiB" % (size >> 20))
    row("warmlake_shards_tensor_%dMiB" % (size >> 20), mbs[True], "MB/s",
        "wlbench_get_%dMiB" % (size >> 20))


def checkpoint(ep, client):
    import torch
    import warmlake.torch as wt
    total = (256 if QUICK else 2048) << 20
    per = 256 << 20 if not QUICK else 64 << 20
    sd = {"t%d" % i: torch.randn(per // 4) for i in range(total // per)}
    _, put_mb = wlbench(ep, "put", "%dMiB" % (per >> 20), "ckceil/", total // per,
                        ["--part-size", "8MiB"])
    _, get_mb = wlbench(ep, "get", "%dMiB" % (per >> 20), "ckceil/", total // per,
                        ["--no-prepare"])
    t = time.time()
    wt.save_checkpoint(client, "reader", "ck", sd)
    save = total / (time.time() - t) / 1e6
    t = time.time()
    wt.load_checkpoint(client, "reader", "ck")
    load = total / (time.time() - t) / 1e6
    t = time.time()
    wt.load_checkpoint(client, "reader", "ck", into=sd)  # resuming into a model's tensors
    load_into = total / (time.time() - t) / 1e6
    row("wlbench_put_%dMiB" % (per >> 20), put_mb, "MB/s")
    row("wlbench_get_%dMiB_ck" % (per >> 20), get_mb, "MB/s")
    row("checkpoint_save_%dMiB" % (total >> 20), save, "MB/s", "wlbench_put_%dMiB" % (per >> 20))
    row("checkpoint_load_%dMiB" % (total >> 20), load, "MB/s",
        "wlbench_get_%dMiB_ck" % (per >> 20))
    row("checkpoint_load_into_%dMiB" % (total >> 20), load_into, "MB/s",
        "wlbench_get_%dMiB_ck" % (per >> 20))


def main():
    if "--boto3" in sys.argv:
        i = sys.argv.index("--boto3")
        print(json.dumps(boto3_run(sys.argv[i + 1], sys.argv[i + 2])))
        return
    import warmlake
    ep = None
    if "--endpoint" in sys.argv:
        ep = sys.argv[sys.argv.index("--endpoint") + 1]
    tmp = proc = None
    if not ep:
        tmp = tempfile.mkdtemp(prefix="reader-", dir=os.environ.get("BENCH_DIR", "/tmp"))
        proc, ep = start_server(tmp)
    try:
        client = warmlake.Client(ep, access_key=AK, secret_key=SK, part_size=8 << 20)
        try:
            client.create_bucket("reader")
        except warmlake.WarmlakeError:
            pass
        samples(ep, client)
        shards(ep, client)
        checkpoint(ep, client)
        print("# client counters: %s" % json.dumps(client.stats()))
    finally:
        if proc:
            proc.terminate()
            proc.wait(timeout=60)
            subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    main()
