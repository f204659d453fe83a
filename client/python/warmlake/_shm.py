"""Bytes from DataLoader workers to the main process through a shared-memory ring.

torch's DataLoader pickles what a worker yields through one pipe that every worker
shares: the main process reads it 64 KiB at a time (multiprocessing's Connection allocates
a buffer of the whole remaining message for every read) and copies each bytes object out of
the pickle again. That main process is the reader's bottleneck: on the bench machine bytes
crossed at 176-608 MB/s with no network at all (docs/design-notes.md, "Bytes from
DataLoader workers").

Here a worker owns one ring (a memfd mapped in both processes). A batch (a ShmList) or a
sample (a ShmDict) is pickled by multiprocessing (only: plain pickle and copy see a
list or a dict) with its large bytes copied into the ring and only
(offset, length) in the pipe; the main process rebuilds them as plain bytes with one copy
out of the ring and then releases that space. Nothing in the main process ever sees a
ring: it gets plain lists, dicts and bytes.

Protocol: positions are monotonic 64-bit byte counts. The worker allocates at its head
(in pickling order, which is the order of the messages in its pipe, which is the order the
main process unpickles them in); the main process, after copying a message's bytes out,
writes the end of its last span as the ring's tail into the ring's first 8 bytes with
pwrite, and the worker reads it with pread (the system calls order the copies against the
release on any CPU). Space below the tail is free. A message never waits for space: bytes
that do not fit are pickled as before. A message the main process never unpickles only
delays the release until a later one is.

A ring starts at 8 MiB and is replaced by one twice the size of a message whose bytes
take more than half of it (a batch of 64 samples of 1 MiB), up to WARMLAKE_SHM_RING bytes
(default 512 MiB; 0: no ring). A small ring's pages are reused soon: each page's first
touch (a fault and a zeroed page, in both processes) cost as much as its copy, and a
256 MiB ring was not reused at all in a shard's 256 MiB (shards at 256 MiB per worker:
a fixed 256 MiB ring ran no faster than the pipe, 32 MiB 1.2-1.5x, 8 MiB with the
thresholds set before the first sample another 1.08-1.4x, three A/B pairs).

The first message of a ring carries its descriptor (multiprocessing's DupFd); later ones
name it by (pid, token, fd). The main process keeps the rings it has mapped; a worker's new
ring retires its older ones there (its messages all came first), and rings of workers no
longer alive are dropped when a new ring comes: a finished DataLoader's rings stay mapped
in the main process until the next one's first message (at most workers x ring size).

Both processes allocate a new bytes object per sample. With glibc's defaults a batch of
1 MiB objects is carved from the top of the heap and given back to the kernel when the batch
is freed (the trim threshold follows the mmap threshold, here 2 MiB), so every batch
faulted in and zeroed fresh pages: copies into them ran at 0.9 GB/s against 4-4.7 GB/s into
reused heap memory (the design notes). Where a ring is used, both
processes set glibc's mmap threshold to its maximum (32 MiB, where its own dynamic threshold
ends up for such sizes) and the trim threshold to 256 MiB, unless MALLOC_MMAP_THRESHOLD_ /
MALLOC_TRIM_THRESHOLD_ say otherwise or WARMLAKE_MALLOC_TUNE=0.
"""
import ctypes
import ctypes.util
import mmap
import multiprocessing.reduction
import os
import struct
import threading

MAX_RING = 512 << 20
FIRST_RING = 8 << 20
MIN_BYTES = 8192  # smaller bytes are pickled: the span costs about as much
_HDR = 4096        # the tail lives here; data from this offset on

_worker_ring = None          # this process's ring (in a DataLoader worker)
_worker_lock = threading.Lock()
_mapped = {}                 # (pid, token) -> (fd, mmap), in the process that unpickles
_mapped_lock = threading.Lock()


_tuned = False


def tune_malloc():
    """glibc: keep freed heap memory for the next allocations of this size (see above)."""
    global _tuned
    if _tuned:
        return
    _tuned = True
    if os.environ.get("WARMLAKE_MALLOC_TUNE", "1") in ("0", ""):
        return
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return
    M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
    if "MALLOC_MMAP_THRESHOLD_" not in os.environ:
        mallopt(M_MMAP_THRESHOLD, 32 << 20)
    if "MALLOC_TRIM_THRESHOLD_" not in os.environ:
        mallopt(M_TRIM_THRESHOLD, 256 << 20)


def ring_size():
    """The largest ring a worker may make (0: none)."""
    v = os.environ.get("WARMLAKE_SHM_RING")
    if v is None or v == "":
        return MAX_RING
    return max(0, int(v))


class _Ring:
    def __init__(self, size):
        self.size = size
        self.fd = os.memfd_create("warmlake-ring", os.MFD_CLOEXEC)
        os.ftruncate(self.fd, _HDR + size)
        self.mm = mmap.mmap(self.fd, _HDR + size)
        self.pid = os.getpid()
        self.token = int.from_bytes(os.urandom(8), "little")
        self.head = 0       # bytes allocated so far
        self.tail = 0       # last tail read from the ring
        self.announced = False

    def alloc(self, n):
        """The ring offset of n free bytes, or None (full)."""
        pos = self.head % self.size
        skip = self.size - pos if pos + n > self.size else 0  # wrap: waste the end
        need = skip + n
        if self.head + need - self.tail > self.size:
            self.tail = struct.unpack("<Q", os.pread(self.fd, 8, 0))[0]
            if self.head + need - self.tail > self.size:
                return None
        self.head += need
        return (self.head - n) % self.size

    def close(self):
        # The main process has (or gets, through the DupFd) its own descriptor.
        self.mm.close()
        os.close(self.fd)


def _ring(need):
    """This worker's ring, made or replaced by a larger one so that need bytes take at most
    half of it where the limit allows; None without one."""
    global _worker_ring
    r = _worker_ring
    if r is not None and r.pid != os.getpid():
        r = None
    limit = ring_size()
    if not limit:
        return None
    if r is None or (2 * need > r.size and r.size < limit):
        size = min(limit, max(FIRST_RING, 1 << (2 * need - 1).bit_length()))
        try:
            new = _Ring(size)
        except (OSError, AttributeError):  # no memfd here: bytes are pickled
            os.environ["WARMLAKE_SHM_RING"] = "0"
            return None
        if r is not None:
            r.close()
        r = _worker_ring = new
        tune_malloc()
    return r


class _Span:
    """Where one bytes object lies in the ring (what crosses the pipe instead)."""
    __slots__ = ("off", "n")

    def __init__(self, off, n):
        self.off, self.n = off, n

    def __reduce__(self):
        return (_Span, (self.off, self.n))


def _swap(v, ring, spans):
    """v with its large bytes (also inside lists and tuples) copied into ring as _Spans."""
    if type(v) is bytes:
        if len(v) < MIN_BYTES:
            return v
        off = ring.alloc(len(v))
        if off is None:
            return v
        ring.mm[_HDR + off:_HDR + off + len(v)] = v
        spans.append(ring.head)
        return _Span(off, len(v))
    if type(v) in (list, tuple):
        return type(v)(_swap(x, ring, spans) for x in v)
    return v


def _big(v):
    if type(v) is bytes:
        return len(v) if len(v) >= MIN_BYTES else 0
    if type(v) in (list, tuple):
        return sum(_big(x) for x in v)
    return 0


def _pack(items):
    """(ring ref, items with spans) for a reduce, or None when no ring is used."""
    need = sum(_big(x) for x in items)
    if not need:
        return None
    with _worker_lock:
        ring = _ring(need)
        if ring is None:
            return None
        spans = []
        out = [_swap(x, ring, spans) for x in items]
        if not spans:
            return None
        if ring.announced:
            fd = None
        else:
            fd = multiprocessing.reduction.DupFd(ring.fd)
            ring.announced = True
        return (ring.pid, ring.token, ring.fd, fd, ring.size, max(spans)), out


def _mapping(ref):
    pid, token, fdnum, df, size, _ = ref
    with _mapped_lock:
        m = _mapped.get((pid, token))
        if m is not None:
            return m
        fd = df.detach() if df is not None else os.open("/proc/%d/fd/%d" % (pid, fdnum),
                                                        os.O_RDWR | os.O_CLOEXEC)
        for k in list(_mapped):
            try:
                os.kill(k[0], 0)
            except ProcessLookupError:
                _drop(k)
            except OSError:
                pass
        for k in [k for k in _mapped if k[0] == pid]:
            _drop(k)  # this worker's older rings: their messages all came before
        m = (fd, mmap.mmap(fd, _HDR + size))
        _mapped[(pid, token)] = m
        tune_malloc()
        return m


def _drop(k):
    fd, mm = _mapped.pop(k)
    mm.close()
    os.close(fd)


def _unswap(v, mm):
    if type(v) is _Span:
        return mm[_HDR + v.off:_HDR + v.off + v.n]
    if type(v) in (list, tuple):
        return type(v)(_unswap(x, mm) for x in v)
    return v


def _unpack(ref, items):
    fd, mm = _mapping(ref)
    out = [_unswap(x, mm) for x in items]
    os.pwrite(fd, struct.pack("<Q", ref[5]), 0)  # release: the tail past this message
    return out


def _rebuild_list(ref, items):
    return _unpack(ref, items)


def _rebuild_dict(ref, keys, items):
    return dict(zip(keys, _unpack(ref, items)))


class ShmList(list):
    """A list (a batch of samples) whose large bytes cross to the main process through the
    worker's ring when multiprocessing pickles it (a DataLoader's result queue); it arrives
    there as a plain list. Other pickling and copying see a list."""


class ShmDict(dict):
    """A dict (a sample) whose large bytes values (or lists of them, after collation) cross
    to the main process through the worker's ring when multiprocessing pickles it; it
    arrives there as a plain dict."""


def _reduce_list(v):
    p = _pack(v)
    if p is None:
        return (list, (list(v),))
    return (_rebuild_list, p)


def _reduce_dict(v):
    keys = list(v)
    p = _pack([v[k] for k in keys])
    if p is None:
        return (dict, (dict(v),))
    return (_rebuild_dict, (p[0], keys, p[1]))


# Only multiprocessing's pickler (queues, pipes between processes) moves bytes through the
# ring: plain pickle, copy and deepcopy never make spans that outlive their process.
multiprocessing.reduction.ForkingPickler.register(ShmList, _reduce_list)
multiprocessing.reduction.ForkingPickler.register(ShmDict, _reduce_dict)


def _after_fork():
    # A child (a DataLoader worker forked from the main process) keeps neither the parent's
    # mappings nor its ring.
    global _worker_ring, _worker_lock, _mapped_lock
    _worker_lock, _mapped_lock = threading.Lock(), threading.Lock()
    for k in list(_mapped):
        _drop(k)
    _worker_ring = None


os.register_at_fork(after_in_child=_after_fork)
