"""warmlake.torch on CPU (Debian's python3-torch) against a real warmlaked:
every sample exactly once per epoch across 2 ranks x 2 DataLoader workers,
shuffles that differ per epoch and repeat per seed, resume mid-epoch with
exactly the remaining samples, tar shard parsing, map-style samples through
batch GET, checkpoints bit-exact, and a save killed midway never loaded
while the previous one still is."""
import hashlib
import io
import os
import signal
import subprocess
import sys
import tarfile

import pytest

from conftest import AK, ROOT, SK
from pyclient import LIB, need_lib

torch = pytest.importorskip("torch")

NSHARDS, PER = 8, 25  # 200 samples


@pytest.fixture
def client(server):
    need_lib()
    import warmlake
    c = warmlake.Client(server.endpoint, access_key=AK, secret_key=SK)
    c.create_bucket("trn")
    yield c
    c.close()


def sample_bytes(i):
    return hashlib.sha256(b"sample %d" % i).digest() * (1 + i % 7)


@pytest.fixture
def shards(client):
    """NSHARDS tar shards of PER webdataset samples (.cls, .bin), odd sizes."""
    keys = []
    for s in range(NSHARDS):
        b = io.BytesIO()
        with tarfile.open(fileobj=b, mode="w", format=tarfile.USTAR_FORMAT) as t:
            for j in range(PER):
                i = s * PER + j
                for ext, data in (("cls", str(i).encode()), ("bin", sample_bytes(i))):
                    info = tarfile.TarInfo("d%d/s%04d.%s" % (s, i, ext))
                    info.size = len(data)
                    t.addfile(info, io.BytesIO(data))
        key = "shards/%02d.tar" % s
        client.put("trn", key, b.getvalue())
        keys.append(key)
    return keys


def epoch_samples(server, rank, world, workers, epoch, seed=7, state=None, stop=None):
    """The samples one rank sees in an epoch, in order: (key, cls). state: resume from;
    stop: consume only this many, then return (samples, state_dict)."""
    import warmlake.torch as wt
    ds = wt.ShardDataset("trn", prefix="shards/", seed=seed, shuffle_buffer=10,
                         part_size=5000, rank=rank, world_size=world,
                         endpoints=server.endpoint, access_key=AK, secret_key=SK)
    ds.set_epoch(epoch)
    if state:
        ds.load_state_dict(state)
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=workers)
    out = []
    for s in ds.track(loader):
        i = int(s["cls"])
        assert s["bin"] == sample_bytes(i)  # bytes verified
        assert s["__key__"] == "d%d/s%04d" % (i // PER, i)
        out.append(i)
        if stop is not None and len(out) == stop:
            break
    return out, ds.state_dict()


def test_exactly_once_shuffle_resume(server, shards):
    seen = []
    per_rank = {}
    for rank in range(2):
        got, _ = epoch_samples(server, rank, 2, 2, epoch=0)
        per_rank[rank] = got
        seen += got
    assert sorted(seen) == list(range(NSHARDS * PER))  # each sample once over 2 x 2 workers
    # The same (seed, epoch) repeats; another epoch or seed shuffles differently.
    again, _ = epoch_samples(server, 0, 2, 2, epoch=0)
    assert again == per_rank[0]
    other, _ = epoch_samples(server, 0, 2, 2, epoch=1)
    assert other != per_rank[0]
    assert sorted(other + epoch_samples(server, 1, 2, 2, epoch=1)[0]) == \
        list(range(NSHARDS * PER))
    reseeded, _ = epoch_samples(server, 0, 2, 2, epoch=0, seed=8)
    assert reseeded != per_rank[0]
    # Resume mid-epoch: the rest, exactly, for each rank.
    for rank in range(2):
        first, state = epoch_samples(server, rank, 2, 2, epoch=3, stop=17)
        rest, _ = epoch_samples(server, rank, 2, 2, epoch=3, state=state)
        full, _ = epoch_samples(server, rank, 2, 2, epoch=3)
        assert not set(first) & set(rest)
        assert sorted(first + rest) == sorted(full)
        assert len(first) == 17


def test_tar_parsing_pieces():
    need_lib()
    import warmlake.torch as wt
    b = io.BytesIO()
    with tarfile.open(fileobj=b, mode="w", format=tarfile.GNU_FORMAT) as t:
        names = ["a/x.jpg", "a/x.json", "b" * 150 + "/long.name.txt", "c", "d.bin"]
        for n in names:
            data = n.encode() * 3
            info = tarfile.TarInfo(n)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
        d = tarfile.TarInfo("dir")
        d.type = tarfile.DIRTYPE
        t.addfile(d)
    raw = b.getvalue()
    for step in (1, 7, 512, 513, len(raw)):
        chunks = (raw[i:i + step] for i in range(0, len(raw), step))
        members = list(wt._tar_members(chunks))
        assert [m[0] for m in members] == names
        assert all(d == n.encode() * 3 for n, d in members)
    samples = list(wt._samples(wt._tar_members([raw])))
    assert samples[0] == {"__key__": "a/x", "jpg": b"a/x.jpg" * 3, "json": b"a/x.json" * 3}
    assert samples[1]["__key__"] == "b" * 150 + "/long"
    assert samples[1]["name.txt"] == names[2].encode() * 3
    with pytest.raises(ValueError):
        list(wt._tar_members([raw[:700]]))  # cut inside a member


def test_tar_parsing_reused_chunks():
    """Chunks that are views of buffers refilled as soon as the next chunk is asked for (as
    read_ahead with buffers gives them): the members are still right, so the parser keeps
    nothing of a chunk past it."""
    need_lib()
    import warmlake.torch as wt
    b = io.BytesIO()
    blobs = [os.urandom(n) for n in (0, 1, 511, 512, 513, 5000, 20000, 3)]
    with tarfile.open(fileobj=b, mode="w", format=tarfile.GNU_FORMAT) as t:
        for i, d in enumerate(blobs):
            info = tarfile.TarInfo(("x" * 120 if i == 5 else "") + "m%d.bin" % i)
            info.size = len(d)
            t.addfile(info, io.BytesIO(d))
    raw = b.getvalue()

    def scribbled(step):
        bufs = [bytearray(step) for _ in range(2)]
        for n, i in enumerate(range(0, len(raw), step)):
            buf = bufs[n % 2]
            piece = raw[i:i + step]
            buf[:len(piece)] = piece
            yield memoryview(buf)[:len(piece)]
            buf[:] = b"\xff" * step  # refilled: what was handed out is gone

    for step in (1, 100, 512, 700, 4096, 9999, len(raw)):
        members = list(wt._tar_members(scribbled(step)))
        assert [d for _, d in members] == blobs
        assert all(type(d) is bytes for _, d in members)
        assert members[5][0] == "x" * 120 + "m5.bin"


def test_object_dataset_batch(server, client):
    import warmlake.torch as wt
    for i in range(40):
        client.put("trn", "obj/%03d" % i, sample_bytes(i))
    ds = wt.ObjectDataset("trn", prefix="obj/", endpoints=server.endpoint, access_key=AK,
                          secret_key=SK, transform=lambda b, k: (k, b))
    assert len(ds) == 40
    assert ds[3] == ("obj/003", sample_bytes(3))
    # A BatchSampler as the sampler: each step is one batch GET of its indices.
    sampler = torch.utils.data.BatchSampler(torch.utils.data.RandomSampler(range(40)), 6, False)
    loader = torch.utils.data.DataLoader(ds, batch_size=None, sampler=sampler, num_workers=2)
    got = [kb for batch in loader for kb in batch]
    assert all(type(b) is bytes for _, b in got)
    assert sorted(k for k, _ in got) == ["obj/%03d" % i for i in range(40)]
    assert all(b == sample_bytes(int(k[4:])) for k, b in got)
    # Objects that changed size since the listing are read whole all the same.
    client.put("trn", "obj/000", b"grown" * 1000)
    client.put("trn", "obj/001", b"s")
    assert ds[0] == ("obj/000", b"grown" * 1000) and ds[1] == ("obj/001", b"s")
    assert ds[[0, 1, 2]] == [("obj/000", b"grown" * 1000), ("obj/001", b"s"),
                             ("obj/002", sample_bytes(2))]


def test_as_tensor(server, client, shards):
    """as_tensor=True: samples are uint8 tensors with the same bytes (from workers, through
    shared memory), for objects (single and batch, grown and shrunk since the listing) and
    shard members."""
    import warmlake.torch as wt
    for i in range(20):
        client.put("trn", "tobj/%03d" % i, sample_bytes(i))
    client.put("trn", "tobj/empty", b"")
    ds = wt.ObjectDataset("trn", prefix="tobj/", client=client, as_tensor=True,
                          transform=lambda t, k: (k, t))
    k, t = ds[3]
    assert torch.is_tensor(t) and t.dtype == torch.uint8 and bytes(t.numpy()) == sample_bytes(3)
    assert bytes(ds[len(ds) - 1][1].numpy()) == b""
    sampler = torch.utils.data.BatchSampler(torch.utils.data.RandomSampler(range(len(ds))), 6,
                                            False)
    loader = torch.utils.data.DataLoader(ds, batch_size=None, sampler=sampler, num_workers=2)
    got = {k: bytes(t.numpy()) for batch in loader for k, t in batch}
    assert got == dict({"tobj/%03d" % i: sample_bytes(i) for i in range(20)},
                       **{"tobj/empty": b""})
    client.put("trn", "tobj/000", b"grown" * 1000)
    client.put("trn", "tobj/001", b"s")
    assert [bytes(t.numpy()) for _, t in ds[[0, 1, 2]]] == [b"grown" * 1000, b"s",
                                                           sample_bytes(2)]
    assert bytes(ds[0][1].numpy()) == b"grown" * 1000 and bytes(ds[1][1].numpy()) == b"s"
    sds = wt.ShardDataset("trn", shards=shards, part_size=5000, shuffle_buffer=10,
                          client=client, as_tensor=True)
    n = 0
    for s in torch.utils.data.DataLoader(sds, batch_size=None, num_workers=2):
        i = int(bytes(s["cls"].numpy()))
        assert torch.is_tensor(s["bin"]) and bytes(s["bin"].numpy()) == sample_bytes(i)
        n += 1
    assert n == NSHARDS * PER


def test_device_loader_cpu():
    need_lib()
    import warmlake.torch as wt
    batches = [{"x": torch.arange(4)}, [torch.ones(2)]]
    out = list(wt.DeviceLoader(batches, device="cpu"))
    assert torch.equal(out[0]["x"], torch.arange(4)) and torch.equal(out[1][0], torch.ones(2))


def state():
    g = torch.Generator().manual_seed(5)
    return {
        "model": {"w": torch.randn(1024, 1024 * 3, generator=g),  # 12 MiB: multipart
                  "b": torch.randn(7, generator=g).to(torch.bfloat16),
                  "i": torch.arange(10, dtype=torch.int64),
                  "m": torch.rand(5, generator=g) > 0.5,
                  "e": torch.empty(0, 3)},
        "step": 42, "name": "run-1", "lr": [0.1, 0.01],
    }


def same(a, b):
    assert a.keys() == b.keys()
    for k in a:
        if isinstance(a[k], dict):
            same(a[k], b[k])
        elif torch.is_tensor(a[k]):
            assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape
            assert torch.equal(a[k].view(-1).view(torch.uint8) if a[k].numel() else a[k],
                               b[k].view(-1).view(torch.uint8) if b[k].numel() else b[k])
        else:
            assert a[k] == b[k]


KILLER = r"""
import sys, time, torch
sys.path.insert(0, sys.argv[1])
import warmlake, warmlake.torch as wt
c = warmlake.Client(sys.argv[2], access_key=sys.argv[3], secret_key=sys.argv[4])
sd = {"t%d" % i: torch.full((1000,), float(i)) for i in range(6)}
def progress(name):
    print("wrote", name, flush=True)
    time.sleep(60)  # killed here: some tensors written, no manifest
wt.save_checkpoint(c, "trn", sys.argv[5], sd, threads=1, progress=progress)
"""


def kill_mid_save(server, prefix):
    p = subprocess.Popen([sys.executable, "-c", KILLER, os.path.join(ROOT, "client", "python"),
                          server.endpoint, AK, SK, prefix], stdout=subprocess.PIPE,
                         env=dict(os.environ, WARMLAKE_LIB=LIB))
    try:
        line = p.stdout.readline()
        assert line.startswith(b"wrote"), line
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()


def test_checkpoint_round_trip_and_torn(server, client):
    import warmlake
    import warmlake.torch as wt
    sd = state()
    m = wt.save_checkpoint(client, "trn", "ck/step1", sd)
    assert len(m["tensors"]) == 5
    same(sd, wt.load_checkpoint(client, "trn", "ck/step1"))
    # into: tensors of the same path, dtype and shape are read in place, others allocated.
    dst = {"model": {"w": torch.zeros(1024, 1024 * 3), "b": torch.zeros(7),  # dtype differs
                     "i": torch.zeros(10, dtype=torch.int64),
                     "m": torch.zeros(5, dtype=torch.bool), "e": torch.empty(0, 3)},
           "step": 0}
    before = {k: v for k, v in dst["model"].items()}
    got = wt.load_checkpoint(client, "trn", "ck/step1", into=dst)
    same(sd, got)
    for k in ("w", "i", "m", "e"):
        assert got["model"][k] is before[k]
    assert got["model"]["b"] is not before["b"] and not before["b"].any()
    assert dst["step"] == 0  # into's other values are left alone
    w = torch.zeros(1024, 1024 * 3, requires_grad=True)
    got = wt.load_checkpoint(client, "trn", "ck/step1", into={"model": {"w": w}})
    assert got["model"]["w"] is not w and not w.detach().any()
    same(sd, got)
    # A save killed midway: nothing loadable there; the previous checkpoint still is.
    kill_mid_save(server, "ck/step2")
    with pytest.raises(warmlake.NotFoundError):
        wt.load_checkpoint(client, "trn", "ck/step2")
    same(sd, wt.load_checkpoint(client, "trn", "ck/step1"))
    # Killed while overwriting the same prefix: the old checkpoint is what loads.
    kill_mid_save(server, "ck/step1")
    same(sd, wt.load_checkpoint(client, "trn", "ck/step1"))
    # A completed save replaces it, and the old data goes.
    sd2 = {"x": torch.arange(5)}
    wt.save_checkpoint(client, "trn", "ck/step1", sd2)
    same(sd2, wt.load_checkpoint(client, "trn", "ck/step1"))
    data = [o["key"] for o in client.list("trn", "ck/step1/data/")]
    assert len(data) == 1
    # Data changed under a manifest: refused, not loaded.
    client.put("trn", data[0], b"\0" * 40)
    with pytest.raises(warmlake.WarmlakeError):
        wt.load_checkpoint(client, "trn", "ck/step1")


def test_spawned_workers(server, client):
    """Datasets and clients cross into spawned processes as their configuration."""
    import pickle
    import warmlake.torch as wt
    for i in range(10):
        client.put("trn", "sp/%d" % i, sample_bytes(i))
    c2 = pickle.loads(pickle.dumps(client))
    assert c2.get("trn", "sp/3") == sample_bytes(3)
    c2.close()
    ds = wt.ObjectDataset("trn", prefix="sp/", client=client)
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2,
                                         multiprocessing_context="spawn")
    assert sorted(loader) == sorted(sample_bytes(i) for i in range(10))


def big_bytes(i):
    """Samples large enough (8 KiB and more) to cross through the workers' rings."""
    return hashlib.sha256(b"big %d" % i).digest() * (300 + 97 * (i % 13))


def test_shm_ring_in_process(monkeypatch):
    """The ring's protocol in one process: what multiprocessing pickles comes back as plain
    lists, dicts and bytes, equal; the ring wraps, grows for a large message, and a message
    that finds it full is pickled as before; space comes back once the message is loaded.
    Plain pickle and deepcopy do not use the ring."""
    import copy
    import pickle
    from multiprocessing.reduction import ForkingPickler
    from warmlake import _shm

    def dumps(o):
        return bytes(ForkingPickler.dumps(o))
    monkeypatch.setenv("WARMLAKE_SHM_RING", str(1 << 20))
    monkeypatch.setattr(_shm, "FIRST_RING", 128 << 10)
    monkeypatch.setattr(_shm, "_worker_ring", None)
    blobs = [big_bytes(i) for i in range(40)]
    for i in range(40):  # many small messages: the 128 KiB ring wraps
        items = [blobs[i], b"small", 7, [b"x", 3]]
        out = pickle.loads(dumps(_shm.ShmList(items)))
        assert type(out) is list and out == items and type(out[0]) is bytes
    assert _shm._worker_ring.size == 128 << 10 and _shm._worker_ring.head > 3 * (128 << 10)
    # A message of more than half the ring: a larger ring (up to the limit).
    d = _shm.ShmDict(__key__="k", bin=blobs[:12], t=(blobs[12], 5), cls=b"1")
    out = pickle.loads(dumps(d))
    assert type(out) is dict and out == dict(d)
    assert type(out["bin"]) is list and type(out["t"]) is tuple
    assert _shm._worker_ring.size == 1 << 20
    # Messages not loaded yet hold their space: bytes that do not fit are pickled.
    msgs = [dumps(_shm.ShmList(blobs[j:j + 8])) for j in range(0, 40, 8)]
    assert len(msgs[0]) < 4096 and len(msgs[-1]) > 9000
    assert [pickle.loads(m) for m in msgs] == [blobs[j:j + 8] for j in range(0, 40, 8)]
    m = dumps(_shm.ShmList(blobs[:8]))
    assert len(m) < 4096 and pickle.loads(m) == blobs[:8]  # the space came back
    plain = _shm.ShmList(blobs[:2])
    assert len(pickle.dumps(plain)) > len(blobs[0]) + len(blobs[1])
    assert copy.deepcopy(plain) == plain and pickle.loads(pickle.dumps(plain)) == plain
    monkeypatch.setenv("WARMLAKE_SHM_RING", "0")
    assert len(dumps(_shm.ShmList(blobs[:2]))) > len(blobs[0]) + len(blobs[1])


@pytest.mark.parametrize("ring", ["", str(256 << 10)])
def test_shm_ring_workers(server, client, monkeypatch, ring):
    """Large bytes from DataLoader workers (through their rings; a small one wraps and
    overflows) arrive whole and as plain bytes in plain lists and dicts: ObjectDataset
    batches, ShardDataset samples one by one and collated."""
    import warmlake.torch as wt
    from warmlake import _shm
    monkeypatch.setenv("WARMLAKE_SHM_RING", ring)
    for i in range(30):
        client.put("trn", "big/%03d" % i, big_bytes(i))
    ds = wt.ObjectDataset("trn", prefix="big/", client=client)
    sampler = torch.utils.data.BatchSampler(torch.utils.data.RandomSampler(range(30)), 7, False)
    got = []
    for batch in torch.utils.data.DataLoader(ds, batch_size=None, sampler=sampler,
                                             num_workers=2):
        assert type(batch) is list and all(type(b) is bytes for b in batch)
        got += batch
    assert sorted(got) == sorted(big_bytes(i) for i in range(30))
    assert _shm._mapped  # the bytes came through rings
    keys = []
    for s in range(3):
        b = io.BytesIO()
        with tarfile.open(fileobj=b, mode="w", format=tarfile.USTAR_FORMAT) as t:
            for j in range(10):
                i = s * 10 + j
                for ext, data in (("cls", str(i).encode()), ("bin", big_bytes(i))):
                    info = tarfile.TarInfo("s%04d.%s" % (i, ext))
                    info.size = len(data)
                    t.addfile(info, io.BytesIO(data))
        keys.append("bigshards/%d.tar" % s)
        client.put("trn", keys[-1], b.getvalue())
    sds = wt.ShardDataset("trn", shards=keys, part_size=20000, shuffle_buffer=4, client=client)
    seen = []
    for s in torch.utils.data.DataLoader(sds, batch_size=None, num_workers=2):
        assert type(s) is dict and type(s["bin"]) is bytes
        i = int(s["cls"])
        assert s["bin"] == big_bytes(i)
        seen.append(i)
    assert sorted(seen) == list(range(30))
    seen = []
    for b in torch.utils.data.DataLoader(sds, batch_size=4, num_workers=2):
        assert type(b) is dict and type(b["bin"]) is list
        for c, data in zip(b["cls"], b["bin"]):
            assert type(data) is bytes and data == big_bytes(int(c))
            seen.append(int(c))
    assert sorted(seen) == list(range(30))
    if not ring:
        loader = torch.utils.data.DataLoader(ds, batch_size=None, sampler=sampler,
                                             num_workers=2, multiprocessing_context="spawn")
        assert sorted(b for batch in loader for b in batch) == sorted(got)
