#!/usr/bin/env python3
"""bench/reader_device.py: the training-data reader feeding a GPU, against its ceiling, on a
local warmlaked started here (6 file drives under $BENCH_DIR, EC 4+2). For a host with CUDA
(on one without, the device rows are left out); on a lent GPU host without this project's
packages, through tests/integration/device_bundle.sh (BUILD=.gpu/build).

Rows (bench/report.py format), same run:
  wlbench_get_64MiB       wl-bench GET of 64 MiB objects, 16 clients: the ceiling
  shards_host_64MiB       ShardDataset (tar shards of 64 MiB, 256 KiB samples), DataLoader
                          with 4 workers, batches of 32 made into one tensor in the worker
  shards_cuda_64MiB       the same through DeviceLoader into CUDA memory (pinned, non_blocking
                          on a side stream), synchronized before the clock stops; each batch
                          summed on the GPU, so the bytes are used where they land
Each reader row is one pass over the shards, timed from its first batch (worker start-up is
not reading), ratio to the ceiling."""
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.abspath(os.environ.get("BUILD", os.path.join(ROOT, "build")))
sys.path.insert(0, os.path.join(ROOT, "client", "python"))
os.environ.setdefault("WARMLAKE_LIB", os.path.join(BUILD, "client", "libwarmlake.so"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reader import AK, SK, start_server  # noqa: E402 (the host reader bench's node and keys)
SHARD, SAMPLE, NSHARDS, WORKERS, BATCH = 64 << 20, 256 << 10, 8, 4, 32


def row(name, value, unit, ceiling="-"):
    print("ROW\t%s\t%.6g\t%s\t%s" % (name, value, unit, ceiling), flush=True)


def ceiling(ep):
    out = tempfile.mktemp(suffix=".json")
    subprocess.run([os.path.join(BUILD, "bench", "wlbench", "wl-bench"), "get", "--endpoint", ep,
                    "--access-key", AK, "--secret-key", SK, "--bucket", "devread", "--prefix",
                    "ceil/", "--size", "64MiB", "--objects", "8", "--clients", "16",
                    "--duration", "8", "--json", out, "--quiet"],
                   check=True, stdout=subprocess.DEVNULL)
    with open(out) as f:
        mb = json.load(f)["ops"]["get"]["mb_per_s"]
    os.unlink(out)
    return mb


def read_pass(ds, device):
    import torch
    import warmlake.torch as wt

    def collate(samples):
        # One batch tensor filled in the worker: one descriptor per batch crosses to the
        # main process, not one per sample.
        out = torch.empty((len(samples), len(samples[0]["bin"])), dtype=torch.uint8)
        for i, s in enumerate(samples):
            out[i] = torch.frombuffer(s["bin"], dtype=torch.uint8)
        return out

    loader = torch.utils.data.DataLoader(ds, batch_size=BATCH, num_workers=WORKERS,
                                         collate_fn=collate, pin_memory=device == "cuda")
    nb, total, t = 0, None, None
    for b in (wt.DeviceLoader(loader, device="cuda") if device == "cuda" else loader):
        if t is None:
            t = time.time()  # from the first batch on: worker start-up is not reading
            continue
        # The bytes used where they are: summed as int64 words (b.sum(dtype=torch.int64)
        # widens each byte first, 190 ms a batch on this host's CPU: it was the bottleneck).
        s = b.view(torch.int64).sum()
        total = s if total is None else total + s
        nb += b.numel()
    if device == "cuda":
        torch.cuda.synchronize()
    return nb / (time.time() - t) / 1e6


def main():
    import torch
    import warmlake
    import warmlake.torch as wt
    tmp = tempfile.mkdtemp(prefix="readerdev-", dir=os.environ.get("BENCH_DIR", "/tmp"))
    proc, ep = start_server(tmp)
    try:
        c = warmlake.Client(ep, access_key=AK, secret_key=SK, part_size=8 << 20)
        c.create_bucket("devread")
        keys, per = [], SHARD // SAMPLE
        for s in range(NSHARDS):
            b = io.BytesIO()
            with tarfile.open(fileobj=b, mode="w", format=tarfile.USTAR_FORMAT) as t:
                for j in range(per):
                    data = os.urandom(SAMPLE - 1024)
                    info = tarfile.TarInfo("%06d.bin" % (s * per + j))
                    info.size = len(data)
                    t.addfile(info, io.BytesIO(data))
            keys.append("shards/%02d.tar" % s)
            c.put("devread", keys[-1], b.getvalue())
        ceil = ceiling(ep)
        row("wlbench_get_64MiB", ceil, "MB/s")
        ds = wt.ShardDataset("devread", shards=keys, client=c, shuffle_buffer=64)
        row("shards_host_64MiB", read_pass(ds, "cpu"), "MB/s", "wlbench_get_64MiB")
        if torch.cuda.is_available():
            row("shards_cuda_64MiB", read_pass(ds, "cuda"), "MB/s", "wlbench_get_64MiB")
            print("# device: %s, torch %s" % (torch.cuda.get_device_name(0), torch.__version__))
        c.close()
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    main()
