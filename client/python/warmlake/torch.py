"""PyTorch datasets and checkpoints over warmlake.

ObjectDataset: map-style, one object per sample. ds[i] is one GET; ds[[i, j,
...]] (what a DataLoader asks with batch_size=None and a BatchSampler as its
sampler, or torch >= 2's __getitems__) is one batch GET for all of them.

ShardDataset: iterable over tar / webdataset-style shards. Each shard is
read in large sequential ranged parts (the next part in flight while the
current one is split into samples). Per epoch the shard order is shuffled by
(seed, epoch), then samples pass a bounded shuffle buffer seeded by (seed,
epoch, worker): the same (seed, epoch) gives the same order. Shards are dealt
to the global workers (rank x DataLoader worker; rank and world size from
torch.distributed when initialised, else RANK / WORLD_SIZE): every sample
exactly once per epoch. Samples carry __gid__ (global worker) and __seq__
(position in that worker's stream); passing the loader through ds.track()
records what was consumed, state_dict() / load_state_dict() resume mid-epoch
at the next unseen sample of every worker (same world size and workers).

DeviceLoader: batches to a device; with CUDA, tensors are pinned and copied
non_blocking on a side stream one batch ahead; on CPU, batches pass
unchanged.

save_checkpoint / load_checkpoint: a state dict's tensors as one object each
(written in parallel; large ones as multipart uploads with parallel parts),
non-tensor values pickled into one more object, and a manifest written last.
Every save writes under a fresh id, so a save that dies midway leaves the
previous manifest, and its data, intact: a torn checkpoint is never loaded.
load_checkpoint(into=model.state_dict()) reads into existing tensors in place.
"""
import io
import json
import os
import random
import uuid
from concurrent.futures import ThreadPoolExecutor

import torch
from torch.utils.data import Dataset, IterableDataset, get_worker_info

from . import Client, NotFoundError, WarmlakeError
from . import _shm

__all__ = ["ObjectDataset", "ShardDataset", "DeviceLoader", "save_checkpoint",
           "load_checkpoint", "rank_world"]


def rank_world():
    """(rank, world_size): torch.distributed when initialised, else RANK / WORLD_SIZE."""
    try:
        import torch.distributed as dist
        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
    except Exception:
        pass
    return int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))


class _ClientHolder:
    """A client per process: made on first use from a config (DataLoader workers make their
    own; a client never crosses a fork)."""

    def __init__(self, client=None, **cfg):
        self._cfg = client.config if client is not None else cfg
        self._client = client
        self._pid = os.getpid() if client is not None else None

    def get(self):
        if self._client is None or self._pid != os.getpid():
            self._client = Client(**self._cfg)
            self._pid = os.getpid()
        return self._client

    def __getstate__(self):
        return {"_cfg": self._cfg, "_client": None, "_pid": None}


def _sample_tensor(n):
    """An uninitialised 1-D uint8 tensor of n bytes to read a sample into. In a DataLoader
    worker its storage is shared memory, which the loader hands to the main process as a
    file descriptor: no copy, where bytes cross a pipe and are copied 3 to 4 times on the
    way (the main process's share of that was the readers' ceiling)."""
    if n and get_worker_info() is not None:
        return torch.empty(0, dtype=torch.uint8).set_(torch.UntypedStorage._new_shared(n))
    return torch.empty(n, dtype=torch.uint8)


def _via_ring():
    """Whether bytes yielded here cross to the main process through a shared-memory ring
    (in a DataLoader worker, unless WARMLAKE_SHM_RING=0): see _shm. If so, glibc is told to
    keep freed memory before the samples are allocated (_shm.tune_malloc)."""
    if get_worker_info() is None or _shm.ring_size() == 0:
        return False
    _shm.tune_malloc()
    return True


def _tensor_of(data):
    t = _sample_tensor(len(data))
    if len(data):
        t.numpy()[:] = memoryview(data).cast("B")
    return t


class ObjectDataset(Dataset):
    """Samples = objects under prefix (or the keys given). transform(data, key) -> sample
    (default: the data). data is bytes, or with as_tensor=True a 1-D torch.uint8 tensor read
    straight into (shared memory in a DataLoader worker, passed to the main process as a
    file descriptor). Bytes from a worker cross through its shared-memory ring (_shm).
    Measured (bench/reader.py, 4 workers, batches of 64, two runs): as_tensor gave 0.68-0.89x
    the bytes rate for 1 MiB samples, 0.39-0.46x at 100 KiB and 0.23-0.28x at 16 KiB (each
    tensor's descriptor is a round trip); before the rings bytes had 0.6x the tensors' rate
    at 1 MiB."""

    def __init__(self, bucket, prefix="", keys=None, client=None, transform=None,
                 as_tensor=False, **cfg):
        self.bucket, self.transform, self.as_tensor = bucket, transform, as_tensor
        self._h = _ClientHolder(client, **cfg)
        if keys is None:
            objs = [o for o in self._h.get().list(bucket, prefix) if "key" in o]
            self.keys = [o["key"] for o in objs]
            self.sizes = [o["size"] for o in objs]
        else:
            self.keys = list(keys)
            self.sizes = [self._h.get().stat(bucket, k)["size"] for k in self.keys]

    def __len__(self):
        return len(self.keys)

    def _out(self, data, i):
        return self.transform(data, self.keys[i]) if self.transform else data

    def __getitem__(self, idx):
        if isinstance(idx, (list, tuple)) or (torch.is_tensor(idx) and idx.dim() == 1):
            return self.__getitems__([int(i) for i in idx])
        i = int(idx)
        c = self._h.get()
        if self.as_tensor:
            t = _sample_tensor(self.sizes[i])
            try:
                n = c.get_into(self.bucket, self.keys[i], t.numpy()) if self.sizes[i] else -1
            except WarmlakeError as e:
                if e.code != -11:
                    raise
                n = -1
            if n != self.sizes[i]:
                t = _tensor_of(c.get(self.bucket, self.keys[i]))
            return self._out(t, i)
        # The size listed saves a HEAD: one GET straight into bytes of that size (an object
        # that grew or shrank since the listing is read again at its new size).
        data = None
        if self.sizes[i]:
            try:
                data = c.get_bytes(self.bucket, self.keys[i], self.sizes[i])
            except WarmlakeError as e:
                if e.code != -11:
                    raise
        if data is None or len(data) != self.sizes[i]:
            data = c.get(self.bucket, self.keys[i])
        return self._out(data, i)

    def __getitems__(self, idxs):
        """Many samples with one batch GET."""
        ring = not self.as_tensor and _via_ring()
        if self.as_tensor:
            ts = [_sample_tensor(self.sizes[i]) for i in idxs]
            res = self._h.get().get_batch(self.bucket, [self.keys[i] for i in idxs],
                                          bufs=[t.numpy() for t in ts])
            out = []
            for i, t, r in zip(idxs, ts, res):
                if isinstance(r, WarmlakeError) and r.code == -11:
                    t = _tensor_of(self._h.get().get(self.bucket, self.keys[i]))
                elif isinstance(r, Exception):
                    raise r
                elif len(r) != len(t):
                    t = t[:len(r)]  # shrank since the listing
                out.append(self._out(t, i))
            return out
        res = self._h.get().get_batch(self.bucket, [self.keys[i] for i in idxs],
                                      sizes=[self.sizes[i] for i in idxs], as_bytes=True)
        out = []
        for i, r in zip(idxs, res):
            if isinstance(r, WarmlakeError) and r.code == -11:
                r = self._h.get().get(self.bucket, self.keys[i])  # grew since the listing
            elif isinstance(r, Exception):
                raise r
            out.append(self._out(r, i))
        return _shm.ShmList(out) if ring else out


# ---- tar shards ----

class _Chunks:
    """A byte stream given as an iterator of chunks (bytes-like), read in order. A chunk may
    be a view of a buffer that is reused once the next chunk is asked for (read_ahead with
    buffers): nothing here keeps a reference to one across that."""

    def __init__(self, chunks):
        self._it = iter(chunks)
        self._mv = memoryview(b"")
        self._pos = 0

    def _more(self):
        try:
            c = next(self._it)
        except StopIteration:
            self._mv, self._pos = memoryview(b""), 0
            return False
        self._mv, self._pos = memoryview(c).cast("B"), 0
        return True

    def readinto(self, out):
        """Fill out (a writable buffer) with the next bytes; how many there were."""
        out = memoryview(out).cast("B")
        o = 0
        while o < len(out):
            k = min(len(self._mv) - self._pos, len(out) - o)
            if k:
                out[o:o + k] = self._mv[self._pos:self._pos + k]
                self._pos += k
                o += k
            elif not self._more():
                break
        return o

    def read(self, n):
        """The next n bytes as bytes (fewer at the end of the stream). Bytes within one chunk
        are copied once, straight from it."""
        mv, pos = self._mv, self._pos
        if len(mv) - pos >= n:
            self._pos = pos + n
            return bytes(mv[pos:pos + n])
        pieces, want = [], n
        while want:
            avail = len(self._mv) - self._pos
            if avail >= want:
                pieces.append(self._mv[self._pos:self._pos + want])
                self._pos += want
                break
            if avail:
                # Copied now: this chunk's buffer may be refilled once the next is asked for.
                pieces.append(bytes(self._mv[self._pos:]))
                want -= avail
            if not self._more():
                break
        return b"".join(pieces)

    def skip(self, n):
        """Drop the next n bytes; whether there were that many."""
        while n:
            avail = len(self._mv) - self._pos
            if avail >= n:
                self._pos += n
                return True
            n -= avail
            if not self._more():
                return False
        return True


_ZERO_BLOCK = bytes(512)


def _tar_members(chunks, alloc=None):
    """(name, bytes) of the regular files of a tar stream given as an iterator of byte
    chunks, parsed incrementally (a member may span chunks; each member's bytes are copied
    once out of its chunk). alloc(n): the buffer-like object (a tensor) to copy a file's n
    bytes into instead of bytes."""
    st = _Chunks(chunks)
    longname = None
    while True:
        h = st.read(512)
        if len(h) < 512:
            return
        if h == _ZERO_BLOCK:
            return  # end of archive
        if h[257:262] not in (b"ustar", b"\0\0\0\0\0") and sum(h) == 0:
            return
        chk = int(h[148:156].split(b"\0")[0].strip() or b"0", 8)
        if chk != sum(h[:148]) + 256 + sum(h[156:]):
            raise ValueError("tar: bad header checksum")
        name = h[0:100].split(b"\0")[0].decode()
        prefix = h[345:500].split(b"\0")[0].decode() if h[257:262] == b"ustar" else ""
        if prefix:
            name = prefix + "/" + name
        size = int(h[124:136].split(b"\0")[0].strip() or b"0", 8)
        typ = h[156:157]
        padded = (size + 511) // 512 * 512
        if alloc is not None and typ in (b"0", b"\0", b"7"):
            data = alloc(size)
            got = st.readinto(data.numpy() if torch.is_tensor(data) else data) if size else 0
        else:
            data = st.read(size)
            got = len(data)
        if got < size or not st.skip(padded - size):
            raise ValueError("tar: cut member %s" % name)
        if typ == b"L":  # GNU long name for the next member
            longname = data.split(b"\0")[0].decode()
            continue
        if longname:
            name, longname = longname, None
        if typ in (b"0", b"\0", b"7"):
            yield name, data


def _samples(members, sample=dict):
    """Group consecutive members into webdataset samples (sample(), a dict): key = path up to
    the first dot of the base name; each member becomes a field named by the rest."""
    cur, key = None, None
    for name, data in members:
        d, base = os.path.split(name)
        if "." in base:
            stem, ext = base.split(".", 1)
        else:
            stem, ext = base, ""
        k = os.path.join(d, stem)
        if k != key:
            if cur is not None:
                yield cur
            cur, key = sample(), k
            cur["__key__"] = k
        cur[ext] = data
    if cur is not None:
        yield cur


def _seed(*parts):
    return int.from_bytes(json.dumps(parts).encode(), "little") % (1 << 61)


class ShardDataset(IterableDataset):
    """Samples from tar shards (keys given, or every key under prefix ending in .tar). A
    sample's fields are bytes, or with as_tensor=True 1-D torch.uint8 tensors (shared memory
    in a DataLoader worker, passed as file descriptors). Bytes samples from a worker cross
    through its shared-memory ring (_shm). Measured with batch_size=None (one sample per
    message, 1 MiB members): bytes were faster (557-582 against 208-294 MB/s)."""

    def __init__(self, bucket, shards=None, prefix="", seed=0, shuffle_buffer=1000,
                 part_size=16 << 20, shuffle=True, client=None, rank=None, world_size=None,
                 as_tensor=False, **cfg):
        self.bucket, self.seed, self.shuffle = bucket, seed, shuffle
        self.as_tensor = as_tensor
        self.shuffle_buffer, self.part_size = max(1, shuffle_buffer), part_size
        self._h = _ClientHolder(client, **cfg)
        if shards is None:
            shards = [o["key"] for o in self._h.get().list(bucket, prefix)
                      if "key" in o and o["key"].endswith(".tar")]
        self.shards = sorted(shards)
        self.epoch = 0
        self._rank, self._world = rank, world_size
        self._skip = {}   # gid -> samples of that worker's stream to drop (resume)
        self._next = {}   # gid -> next unseen sample, as tracked
        self._total = None

    def set_epoch(self, epoch):
        self.epoch = epoch
        self._skip, self._next = {}, {}

    def _rw(self):
        if self._rank is not None:
            return self._rank, self._world or 1
        return rank_world()

    def _gid(self):
        rank, world = self._rw()
        wi = get_worker_info()
        wid, nw = (wi.id, wi.num_workers) if wi else (0, 1)
        return rank * nw + wid, world * nw

    def shard_order(self, epoch=None):
        """The shards in the order of an epoch."""
        order = list(self.shards)
        if self.shuffle:
            random.Random(_seed(self.seed, self.epoch if epoch is None else epoch)).shuffle(order)
        return order

    def _read(self, key, buffers=None):
        """A shard's bytes in part_size chunks, in order, with the next parts in flight
        (libwarmlake's prefetch queue). buffers (at least 2 of part_size): the parts are read
        into them in turn and yielded as views, each valid until the next is asked for."""
        c = self._h.get()
        st = c.stat(self.bucket, key)
        size = st["size"]
        # If-Match: a shard replaced while read fails instead of splicing two versions.
        parts = [(key, o, min(self.part_size, size - o), st["etag"])
                 for o in range(0, size, self.part_size)]
        yield from c.read_ahead(self.bucket, parts, depth=3, mem_bound=4 * self.part_size,
                                buffers=buffers)

    def __iter__(self):
        gid, total = self._gid()
        mine = self.shard_order()[gid::total]
        rng = random.Random(_seed(self.seed, self.epoch, gid))
        skip = self._skip.get(gid, 0)
        seq = 0

        def stream():
            # One set of part buffers for every shard of this worker: parts land in memory
            # already mapped, and each sample's bytes are copied out of them once.
            # Bytes samples from a worker cross to the main process through a shared-memory
            # ring instead of the pipe (_shm): they arrive there as plain dicts.
            sample = _shm.ShmDict if not self.as_tensor and _via_ring() else dict
            bufs = [bytearray(self.part_size) for _ in range(4)] if mine else None
            for key in mine:
                yield from _samples(_tar_members(self._read(key, bufs),
                                                 _sample_tensor if self.as_tensor else None),
                                    sample)

        buf = []
        for s in stream():
            if not self.shuffle:
                out = [s]
            elif len(buf) < self.shuffle_buffer:
                buf.append(s)
                continue
            else:
                j = rng.randrange(len(buf))
                out, buf[j] = [buf[j]], s
            for o in out:
                if seq >= skip:
                    o["__gid__"], o["__seq__"] = gid, seq
                    yield o
                seq += 1
        rng.shuffle(buf)
        for o in buf:
            if seq >= skip:
                o["__gid__"], o["__seq__"] = gid, seq
                yield o
            seq += 1

    # -- resume --

    def track(self, batches):
        """Pass batches (collated dicts, or lists of samples) through, recording the samples
        consumed so that state_dict() can resume after them."""
        for b in batches:
            self.observe(b)
            yield b

    def observe(self, batch):
        """Record the samples of one batch (or one sample) as consumed."""
        if isinstance(batch, dict):
            gids, seqs = batch["__gid__"], batch["__seq__"]
            if isinstance(gids, int) or (torch.is_tensor(gids) and gids.dim() == 0):
                gids, seqs = [gids], [seqs]  # one sample (batch_size=None)
            pairs = zip([int(g) for g in gids], [int(s) for s in seqs])
        elif isinstance(batch, (list, tuple)):
            pairs = [(int(s["__gid__"]), int(s["__seq__"])) for s in batch]
        else:
            raise TypeError("observe: a collated dict or a list of samples")
        for g, s in pairs:
            if s + 1 > self._next.get(g, 0):
                self._next[g] = s + 1

    def state_dict(self):
        nxt = dict(self._skip)
        for g, n in self._next.items():
            nxt[g] = max(n, nxt.get(g, 0))
        rank, world = self._rw()
        return {"seed": self.seed, "epoch": self.epoch, "next": {str(g): n for g, n in
                                                                 nxt.items()}}

    def load_state_dict(self, sd):
        self.seed, self.epoch = sd["seed"], sd["epoch"]
        self._skip = {int(g): int(n) for g, n in sd["next"].items()}
        self._next = {}


class DeviceLoader:
    """Batches from loader moved to device. With CUDA: tensors pinned and copied non_blocking
    on a side stream, one batch ahead. Without: batches unchanged."""

    def __init__(self, loader, device=None):
        self.loader = loader
        self.cuda = torch.cuda.is_available() and (device is None or
                                                   torch.device(device).type == "cuda")
        self.device = torch.device(device) if device else (
            torch.device("cuda") if self.cuda else torch.device("cpu"))

    def _move(self, b):
        if torch.is_tensor(b):
            if not b.is_pinned():
                b = b.pin_memory()
            return b.to(self.device, non_blocking=True)
        if isinstance(b, dict):
            return {k: self._move(v) for k, v in b.items()}
        if isinstance(b, (list, tuple)):
            return type(b)(self._move(v) for v in b)
        return b

    def _record(self, b, stream):
        """Tell the caching allocator that b is used on stream (it was made on the side one)."""
        if torch.is_tensor(b):
            if b.is_cuda:
                b.record_stream(stream)
        elif isinstance(b, dict):
            for v in b.values():
                self._record(v, stream)
        elif isinstance(b, (list, tuple)):
            for v in b:
                self._record(v, stream)

    def __iter__(self):
        if not self.cuda:
            yield from self.loader
            return
        side = torch.cuda.Stream()
        it = iter(self.loader)
        end = object()

        def prep():
            try:
                b = next(it)
            except StopIteration:
                return end
            with torch.cuda.stream(side):
                return self._move(b)

        nxt = prep()
        while nxt is not end:
            main = torch.cuda.current_stream()
            main.wait_stream(side)  # the consumer's work on cur waits for its copy
            cur = nxt
            self._record(cur, main)
            nxt = prep()  # the next copy runs while the consumer uses cur
            yield cur

    def __len__(self):
        return len(self.loader)


# ---- checkpoints ----

def _flatten(sd, path=()):
    for k, v in sd.items():
        if isinstance(v, dict) and all(isinstance(x, str) for x in v):
            yield from _flatten(v, path + (k,))
        else:
            yield path + (k,), v


def _put_path(sd, path, v):
    for p in path[:-1]:
        sd = sd.setdefault(p, {})
    sd[path[-1]] = v


def save_checkpoint(client, bucket, prefix, state_dict, threads=8, progress=None):
    """Write state_dict under prefix: tensors in parallel, the manifest last. progress(name)
    is called after each tensor is written. Returns the manifest."""
    ckpt = uuid.uuid4().hex
    data = "%s/data/%s/" % (prefix.rstrip("/"), ckpt)
    tensors, extra = [], {}
    for path, v in _flatten(state_dict):
        if not all(isinstance(p, str) for p in path):
            raise TypeError("state dict keys must be strings")
        if torch.is_tensor(v):
            tensors.append((path, v))
        else:
            extra[json.dumps(path)] = v

    def put(i):
        path, t = tensors[i]
        t = t.detach().contiguous().cpu()
        raw = t.reshape(-1).view(torch.uint8).numpy() if t.numel() else b""
        key = data + str(i)
        etag = client.put(bucket, key, raw)
        if progress:
            progress(".".join(path))
        return {"path": list(path), "dtype": str(t.dtype).split(".")[1],
                "shape": list(t.shape), "nbytes": int(t.numel() * t.element_size()),
                "key": key, "etag": etag}

    with ThreadPoolExecutor(max_workers=threads) as ex:
        entries = list(ex.map(put, range(len(tensors))))
    manifest = {"format": 1, "id": ckpt, "tensors": entries}
    if extra:
        b = io.BytesIO()
        torch.save(extra, b)
        manifest["extra"] = {"key": data + "extra.pt",
                             "etag": client.put(bucket, data + "extra.pt", b.getvalue()),
                             "nbytes": len(b.getvalue())}
    client.put(bucket, "%s/manifest.json" % prefix.rstrip("/"),
               json.dumps(manifest).encode(), content_type="application/json")
    # The data of earlier saves under this prefix is no longer named by the manifest.
    for o in client.list(bucket, "%s/data/" % prefix.rstrip("/")):
        if "key" in o and not o["key"].startswith(data):
            try:
                client.delete(bucket, o["key"])
            except WarmlakeError:
                pass
    return manifest


def _get_path(sd, path):
    for p in path:
        if not isinstance(sd, dict) or p not in sd:
            return None
        sd = sd[p]
    return sd


def _in_place(t, e, dtype):
    """Whether tensor t (on the CPU or a CUDA device) can take entry e's bytes in place."""
    return (torch.is_tensor(t) and t.device.type in ("cpu", "cuda") and t.dtype == dtype and
            list(t.shape) == list(e["shape"]) and t.is_contiguous() and not t.requires_grad)


def load_checkpoint(client, bucket, prefix, threads=8, map_location=None, into=None):
    """The state dict saved under prefix. NotFoundError when no save completed there;
    WarmlakeError when its data does not match the manifest.

    into: a state dict (a model's, or one loaded before) whose tensors of the same path,
    dtype and shape (contiguous, not requiring grad: detach them, or pass
    model.state_dict(), whose tensors are detached) are read into in place and returned;
    a CUDA tensor is read through pinned host memory and copied to its device. Other
    tensors are allocated (and moved to map_location, which in-place ones are not).
    This saves faulting in fresh memory, which cost this
    machine half the load rate (bench/reader.py: 410-575 MB/s into new tensors, 1.0-1.17
    GB/s into reused ones). A load that fails midway leaves those tensors partly
    overwritten."""
    prefix = prefix.rstrip("/")
    try:
        manifest = json.loads(client.get(bucket, prefix + "/manifest.json"))
    except NotFoundError:
        raise NotFoundError(-4, 404, "NoSuchKey", message="no complete checkpoint at %s/%s" %
                            (bucket, prefix))
    listed = {o["key"]: o for o in client.list(bucket, "%s/data/%s/" % (prefix, manifest["id"]))
              if "key" in o}

    def get(e):
        o = listed.get(e["key"])
        if o is None or o["size"] != e["nbytes"] or o["etag"] != e["etag"]:
            raise WarmlakeError(-5, message="checkpoint %s/%s: %s missing or changed" %
                                (bucket, prefix, e["key"]))
        dtype = getattr(torch, e["dtype"])
        dst = _get_path(into, tuple(e["path"])) if into is not None else None
        if dst is not None and _in_place(dst, e, dtype):
            if e["nbytes"] and dst.device.type == "cpu":
                n = client.get_into(bucket, e["key"], dst.reshape(-1).view(torch.uint8).numpy())
                if n != e["nbytes"]:
                    raise WarmlakeError(-5, message="checkpoint tensor %s short" % e["key"])
            elif e["nbytes"]:
                # A device tensor: read into pinned host memory, then one copy to the
                # device (synchronous: the staging buffer is freed on return).
                staging = torch.empty(e["nbytes"], dtype=torch.uint8, pin_memory=True)
                n = client.get_into(bucket, e["key"], staging.numpy())
                if n != e["nbytes"]:
                    raise WarmlakeError(-5, message="checkpoint tensor %s short" % e["key"])
                dst.reshape(-1).view(torch.uint8).copy_(staging)
            return e, dst
        if e["nbytes"] == 0:
            t = torch.empty(e["shape"], dtype=dtype)
            return e, t.to(map_location) if map_location else t
        raw = torch.empty(e["nbytes"], dtype=torch.uint8)
        n = client.get_into(bucket, e["key"], raw.numpy())
        if n != e["nbytes"]:
            raise WarmlakeError(-5, message="checkpoint tensor %s short" % e["key"])
        t = raw.view(dtype).reshape(e["shape"])
        return e, t.to(map_location) if map_location else t

    out = {}
    with ThreadPoolExecutor(max_workers=threads) as ex:
        for e, t in ex.map(get, manifest["tensors"]):
            _put_path(out, tuple(e["path"]), t)
    if "extra" in manifest:
        extra = torch.load(io.BytesIO(client.get(bucket, manifest["extra"]["key"])))
        for path, v in extra.items():
            _put_path(out, tuple(json.loads(path)), v)
    return out
