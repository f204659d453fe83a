"""warmlake: a Python client for S3 servers (best against warmlake), over
libwarmlake.so through ctypes.

    import warmlake
    c = warmlake.Client("http://127.0.0.1:9000", access_key=..., secret_key=...)
    c.put("bkt", "k", b"bytes")
    buf = bytearray(c.stat("bkt", "k")["size"])
    c.get_into("bkt", "k", buf)            # no copy: the body lands in buf
    c.get_batch("bkt", ["a", "b"], sizes)  # batch GET (or parallel GETs)

Reads land in any writable buffer (bytearray, memoryview, numpy array,
torch tensor's numpy view) without a copy; the library's threads release
the GIL for every call. A Client belongs to the process that made it (the
library's threads do not survive fork): torch's DataLoader workers make
their own (warmlake.torch does this).

The library is found at $WARMLAKE_LIB, else $WL_BUILD/client/libwarmlake.so,
else the repository's build/client/, else the system's.
"""
import ctypes
import ctypes.util
import os

__all__ = ["Client", "WarmlakeError", "NotFoundError"]

WL_ENOTFOUND = -4


class WarmlakeError(Exception):
    """A failed call: code (WL_E*), http_status, s3_code, request_id, message."""

    def __init__(self, code, http_status=0, s3_code="", request_id="", message=""):
        super().__init__("%s (code %d, HTTP %d%s%s)" % (
            message or "warmlake error", code, http_status,
            " " + s3_code if s3_code else "", ", request id " + request_id if request_id else ""))
        self.code, self.http_status, self.s3_code = code, http_status, s3_code
        self.request_id, self.message = request_id, message


class NotFoundError(WarmlakeError, KeyError):
    pass


class _Cfg(ctypes.Structure):
    _fields_ = [("endpoints", ctypes.c_char_p), ("access_key", ctypes.c_char_p),
                ("secret_key", ctypes.c_char_p), ("region", ctypes.c_char_p),
                ("conns_per_endpoint", ctypes.c_int), ("threads", ctypes.c_int),
                ("part_size", ctypes.c_uint64), ("max_attempts", ctypes.c_int),
                ("backoff_ms", ctypes.c_int), ("timeout_ms", ctypes.c_int),
                ("no_batch", ctypes.c_int), ("no_verify", ctypes.c_int),
                ("on_bytes", ctypes.c_void_p), ("on_bytes_arg", ctypes.c_void_p),
                ("verify_get", ctypes.c_int)]


class _Err(ctypes.Structure):
    _fields_ = [("code", ctypes.c_int), ("http_status", ctypes.c_int),
                ("s3_code", ctypes.c_char * 64), ("request_id", ctypes.c_char * 128),
                ("message", ctypes.c_char * 256)]


class _Stat(ctypes.Structure):
    _fields_ = [("size", ctypes.c_uint64), ("etag", ctypes.c_char * 128),
                ("last_modified", ctypes.c_char * 64), ("content_type", ctypes.c_char * 128)]


class _Stats(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in (
        "requests", "retries", "bytes_in", "bytes_out", "batch_requests", "batch_entries",
        "single_gets")] + [("batch_unsupported", ctypes.c_int)]


class _Obj(ctypes.Structure):
    _fields_ = [("key", ctypes.c_char_p), ("size", ctypes.c_uint64),
                ("etag", ctypes.c_char * 128), ("last_modified", ctypes.c_char * 64)]


class _List(ctypes.Structure):
    _fields_ = [("objects", ctypes.POINTER(_Obj)), ("n_objects", ctypes.c_size_t),
                ("prefixes", ctypes.POINTER(ctypes.c_char_p)), ("n_prefixes", ctypes.c_size_t),
                ("truncated", ctypes.c_int), ("next_token", ctypes.c_char_p)]


class _Item(ctypes.Structure):
    _fields_ = [("key", ctypes.c_char_p), ("off", ctypes.c_uint64), ("len", ctypes.c_uint64),
                ("buf", ctypes.c_void_p), ("cap", ctypes.c_size_t), ("got", ctypes.c_size_t),
                ("object_size", ctypes.c_uint64), ("code", ctypes.c_int),
                ("http_status", ctypes.c_int), ("s3_code", ctypes.c_char * 64)]


def _find_lib():
    here = os.path.dirname(os.path.abspath(__file__))
    cands = [os.environ.get("WARMLAKE_LIB")]
    if os.environ.get("WL_BUILD"):
        cands.append(os.path.join(os.environ["WL_BUILD"], "client", "libwarmlake.so"))
    cands.append(os.path.join(here, "..", "..", "..", "build", "client", "libwarmlake.so"))
    for c in cands:
        if c and os.path.exists(c):
            return c
    return ctypes.util.find_library("warmlake") or "libwarmlake.so"


_lib = None


def _load():
    global _lib
    if _lib is not None:
        return _lib
    L = ctypes.CDLL(_find_lib())
    P, S, U64, I = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_uint64, ctypes.c_int
    sz, psz = ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)
    sigs = {
        "wl_client_new": [ctypes.POINTER(_Cfg), ctypes.POINTER(P)],
        "wl_client_free": [P],
        "wl_client_stats": [P, ctypes.POINTER(_Stats)],
        "wl_stat": [P, S, S, ctypes.POINTER(_Stat)],
        "wl_get": [P, S, S, U64, U64, P, sz, psz, ctypes.POINTER(_Stat)],
        "wl_get_parallel": [P, S, S, P, sz, psz, ctypes.POINTER(_Stat)],
        "wl_get_fd": [P, S, S, I, ctypes.POINTER(_Stat)],
        "wl_put": [P, S, S, P, sz, S, ctypes.c_char_p],
        "wl_put_fd": [P, S, S, I, U64, S, ctypes.c_char_p],
        "wl_delete": [P, S, S],
        "wl_copy": [P, S, S, S, S, ctypes.c_char_p],
        "wl_bucket_create": [P, S],
        "wl_bucket_delete": [P, S],
        "wl_list": [P, S, S, S, S, I, ctypes.POINTER(ctypes.POINTER(_List))],
        "wl_list_free": [ctypes.POINTER(_List)],
        "wl_get_many": [P, S, ctypes.POINTER(_Item), sz],
        "wl_get_batch": [P, S, ctypes.POINTER(_Item), sz],
        "wl_presign": [P, S, S, S, ctypes.c_long, ctypes.c_char_p, sz],
        "wl_prefetch_new": [P, S, I, sz, ctypes.POINTER(P)],
        "wl_prefetch_push": [P, S, U64, U64, P],
        "wl_prefetch_push_if": [P, S, U64, U64, S, P],
        "wl_prefetch_push_into": [P, S, U64, U64, S, P, sz, P],
        "wl_prefetch_next": [P, ctypes.POINTER(P), psz, ctypes.POINTER(P)],
        "wl_prefetch_free": [P],
        "wl_free": [P],
    }
    for name, args in sigs.items():
        f = getattr(L, name)
        f.argtypes = args
        f.restype = None if name in ("wl_client_free", "wl_list_free", "wl_client_stats",
                                     "wl_prefetch_free", "wl_free") else I
    L.wl_last_error.restype = ctypes.POINTER(_Err)
    L.wl_last_error.argtypes = []
    _lib = L
    return L


def _raise(rc):
    e = _load().wl_last_error().contents
    cls = NotFoundError if rc == WL_ENOTFOUND else WarmlakeError
    raise cls(rc, e.http_status, e.s3_code.decode(errors="replace"),
              e.request_id.decode(errors="replace"), e.message.decode(errors="replace"))


def _b(s):
    return s.encode() if isinstance(s, str) else s


def _addr(buf, writable=True):
    """(address, length in bytes, keepalive) of a contiguous buffer, without copying."""
    mv = memoryview(buf)
    if not mv.contiguous:
        raise ValueError("buffer must be contiguous")
    n = mv.nbytes
    if n == 0:
        return None, 0, None
    if isinstance(buf, bytes) and not writable:
        p = ctypes.c_char_p(buf)  # points into the bytes object itself
        return ctypes.cast(p, ctypes.c_void_p).value, n, (p, buf)
    if mv.readonly:
        if writable:
            raise ValueError("buffer is read-only")
        # A read-only buffer that is not bytes (e.g. a read-only numpy array): its address
        # through numpy when it is one, else one copy.
        try:
            import numpy as np
            a = np.frombuffer(mv, dtype=np.uint8)
            return a.ctypes.data, n, (a, mv)
        except ImportError:
            b = bytes(mv)
            return _addr(b, writable=False)
    c = (ctypes.c_char * n).from_buffer(mv.cast("B"))
    return ctypes.addressof(c), n, (c, mv)


_new_bytes_fn = None
_FRESH_MIN = 4096  # below this a copy costs less than the call that avoids it


def _fresh_bytes(n):
    """(a new bytes object of n bytes, the address of its contents) for the library to read
    into, or None where this Python cannot make one (then a bytearray and a copy it is). The
    object is filled before any other code sees it (CPython's PyBytes_FromStringAndSize(NULL,
    n) contract: an object nobody else holds may be written), so the bytes handed out are
    the ones received, not a copy of them."""
    global _new_bytes_fn
    if n < _FRESH_MIN:
        return None
    if _new_bytes_fn is None:
        try:
            f = ctypes.pythonapi.PyBytes_FromStringAndSize
            f.argtypes, f.restype = [ctypes.c_void_p, ctypes.c_ssize_t], ctypes.py_object
            _new_bytes_fn = f
        except (AttributeError, OSError):
            _new_bytes_fn = False
    if not _new_bytes_fn:
        return None
    b = _new_bytes_fn(None, n)
    return b, ctypes.cast(ctypes.c_char_p(b), ctypes.c_void_p).value


def _read_bytes(n, read):
    """bytes of up to n bytes filled by read(address, capacity, keepalive) -> bytes read:
    straight into a new bytes object where one can be made, else via a bytearray."""
    fb = _fresh_bytes(n)
    if fb is None:
        buf = bytearray(n)
        addr, cap, keep = _addr(buf)
        got = read(addr, cap)
        del keep
        return bytes(buf) if got == n else bytes(memoryview(buf)[:got])
    b, addr = fb
    got = read(addr, n)
    return b if got == n else b[:got]


def _env_endpoints():
    for k in ("WARMLAKE_ENDPOINTS", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"):
        if os.environ.get(k):
            return os.environ[k]
    raise WarmlakeError(-3, message="no endpoint: give one, or set WARMLAKE_ENDPOINTS or "
                        "AWS_ENDPOINT_URL")


class Client:
    """A libwarmlake client: endpoints ("http://h:p", a list or comma-separated; default from
    WARMLAKE_ENDPOINTS / AWS_ENDPOINT_URL), keys (default AWS_ACCESS_KEY_ID /
    AWS_SECRET_ACCESS_KEY; none: unsigned). Thread-safe; one per process."""

    def __init__(self, endpoints=None, access_key=None, secret_key=None, region=None,
                 threads=8, conns_per_endpoint=16, part_size=8 << 20, max_attempts=5,
                 no_batch=None, verify_get=False):
        L = _load()
        if endpoints is None:
            endpoints = _env_endpoints()
        if not isinstance(endpoints, (str, bytes)):
            endpoints = ",".join(endpoints)
        access_key = access_key if access_key is not None else os.environ.get("AWS_ACCESS_KEY_ID")
        secret_key = secret_key if secret_key is not None else os.environ.get(
            "AWS_SECRET_ACCESS_KEY")
        if no_batch is None:
            no_batch = os.environ.get("WARMLAKE_NO_BATCH", "0") not in ("", "0")
        self.config = dict(endpoints=endpoints, access_key=access_key, secret_key=secret_key,
                           region=region, threads=threads, conns_per_endpoint=conns_per_endpoint,
                           part_size=part_size, max_attempts=max_attempts, no_batch=no_batch,
                           verify_get=verify_get)
        cfg = _Cfg(_b(endpoints), _b(access_key) if access_key else None,
                   _b(secret_key) if secret_key else None, _b(region) if region else None,
                   conns_per_endpoint, threads, part_size, max_attempts, 0, 0, int(no_batch), 0,
                   None, None, int(verify_get))
        self._c = ctypes.c_void_p()
        self._pid = os.getpid()
        rc = L.wl_client_new(ctypes.byref(cfg), ctypes.byref(self._c))
        if rc:
            _raise(rc)

    def __reduce__(self):
        # Pickled into DataLoader workers (spawn) as its configuration: a new client there.
        return (_client_from_config, (self.config,))

    def close(self):
        if self._c and os.getpid() == self._pid:
            _load().wl_client_free(self._c)
        self._c = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()

    def _h(self):
        if os.getpid() != self._pid:
            raise WarmlakeError(-3, message="a Client cannot be used across fork; make one in "
                                "each process")
        return self._c

    # -- objects --

    def stat(self, bucket, key):
        st = _Stat()
        rc = _load().wl_stat(self._h(), _b(bucket), _b(key), ctypes.byref(st))
        if rc:
            _raise(rc)
        return {"size": st.size, "etag": st.etag.decode(),
                "last_modified": st.last_modified.decode(),
                "content_type": st.content_type.decode()}

    def get_into(self, bucket, key, buf, offset=0, length=None):
        """Read into buf (any writable contiguous buffer): the whole object (parallel ranged
        parts when large) or `length` bytes from offset. Returns the bytes read."""
        addr, cap, keep = _addr(buf)
        got = ctypes.c_size_t()
        if offset == 0 and length is None:
            rc = _load().wl_get_parallel(self._h(), _b(bucket), _b(key), addr, cap,
                                         ctypes.byref(got), None)
        else:
            rc = _load().wl_get(self._h(), _b(bucket), _b(key), offset, length or 0, addr, cap,
                                ctypes.byref(got), None)
        del keep
        if rc:
            _raise(rc)
        return got.value

    def get(self, bucket, key, offset=0, length=None):
        """The object (or a range) as bytes."""
        whole = False
        if length is None:
            length = self.stat(bucket, key)["size"] - offset
            if length <= 0:
                return b""
            whole = offset == 0
        return self.get_bytes(bucket, key, length, offset=0 if whole else offset,
                              length=None if whole else length)

    def get_bytes(self, bucket, key, size, offset=0, length=None):
        """Like get_into, into a new bytes object of size bytes (received into it, not copied)
        that is returned, cut to the bytes read. WarmlakeError code -11 (WL_ETOOLARGE) when
        the object (or range) is larger than size."""
        b, k = _b(bucket), _b(key)

        def read(addr, cap):
            got = ctypes.c_size_t()
            if offset == 0 and length is None:
                rc = _load().wl_get_parallel(self._h(), b, k, addr, cap, ctypes.byref(got), None)
            else:
                rc = _load().wl_get(self._h(), b, k, offset, length or 0, addr, cap,
                                    ctypes.byref(got), None)
            if rc:
                _raise(rc)
            return got.value
        return _read_bytes(size, read)

    def get_file(self, bucket, key, path):
        with open(path, "wb") as f:
            rc = _load().wl_get_fd(self._h(), _b(bucket), _b(key), f.fileno(), None)
        if rc:
            _raise(rc)

    def put(self, bucket, key, data, content_type=None):
        """PUT a bytes-like object (multipart with parallel parts when large). Returns the
        ETag."""
        addr, n, keep = _addr(data, writable=False)
        etag = ctypes.create_string_buffer(128)
        rc = _load().wl_put(self._h(), _b(bucket), _b(key), addr, n,
                            _b(content_type) if content_type else None, etag)
        del keep
        if rc:
            _raise(rc)
        return etag.value.decode()

    def put_file(self, bucket, key, path, content_type=None):
        etag = ctypes.create_string_buffer(128)
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            rc = _load().wl_put_fd(self._h(), _b(bucket), _b(key), f.fileno(), size,
                                   _b(content_type) if content_type else None, etag)
        if rc:
            _raise(rc)
        return etag.value.decode()

    def copy(self, src_bucket, src_key, bucket, key):
        """Server-side copy (no bytes through this process). Returns the new ETag."""
        etag = ctypes.create_string_buffer(128)
        rc = _load().wl_copy(self._h(), _b(src_bucket), _b(src_key), _b(bucket), _b(key), etag)
        if rc:
            _raise(rc)
        return etag.value.decode()

    def delete(self, bucket, key):
        rc = _load().wl_delete(self._h(), _b(bucket), _b(key))
        if rc:
            _raise(rc)

    def create_bucket(self, bucket):
        rc = _load().wl_bucket_create(self._h(), _b(bucket))
        if rc:
            _raise(rc)

    def delete_bucket(self, bucket):
        rc = _load().wl_bucket_delete(self._h(), _b(bucket))
        if rc:
            _raise(rc)

    def list(self, bucket, prefix="", delimiter=None, page_size=1000):
        """Every object under prefix (all pages) as dicts: key, size, etag, last_modified;
        with a delimiter, common prefixes too as {"prefix": ...}."""
        L = _load()
        token = None
        while True:
            lp = ctypes.POINTER(_List)()
            rc = L.wl_list(self._h(), _b(bucket), _b(prefix) if prefix else None,
                           _b(delimiter) if delimiter else None, token, page_size,
                           ctypes.byref(lp))
            if rc:
                _raise(rc)
            try:
                l = lp.contents
                for i in range(l.n_prefixes):
                    yield {"prefix": l.prefixes[i].decode()}
                for i in range(l.n_objects):
                    o = l.objects[i]
                    yield {"key": o.key.decode(), "size": o.size, "etag": o.etag.decode(),
                           "last_modified": o.last_modified.decode()}
                token = l.next_token if l.truncated and l.next_token else None
                token = bytes(token) if token else None
            finally:
                L.wl_list_free(lp)
            if not token:
                return

    def presign(self, bucket, key, expires=3600, method="GET"):
        out = ctypes.create_string_buffer(8192)
        rc = _load().wl_presign(self._h(), _b(method), _b(bucket), _b(key), expires, out, 8192)
        if rc:
            _raise(rc)
        return out.value.decode()

    # -- many objects --

    def get_batch(self, bucket, keys, sizes=None, bufs=None, ranges=None, batch=True,
                  as_bytes=False):
        """Read many objects in one go: warmlake's batch GET (single GETs in parallel on
        servers without it, or with batch=False). keys: list of str. Either bufs (writable
        buffers, one per key: filled, nothing copied) or sizes (the capacity of each; a
        bytearray is made) must be given. ranges: optional list of (offset, length) or None.
        Returns a list, per key, of a memoryview of the bytes read (into its buffer), or the
        WarmlakeError of that key. as_bytes (with sizes): bytes objects instead, received
        straight into (not copied) when the size given was the size read."""
        n = len(keys)
        addrs = [None] * n
        if bufs is None:
            if sizes is None:
                raise ValueError("give sizes or bufs")
            bufs = []
            for i, s in enumerate(sizes):
                s = max(int(s), 0)
                fb = _fresh_bytes(s) if as_bytes else None
                if fb is None:
                    bufs.append(bytearray(s))
                else:
                    bufs.append(fb[0])
                    addrs[i] = fb[1], s, None
        elif as_bytes:
            raise ValueError("as_bytes is for sizes, not bufs")
        items = (_Item * n)()
        keep = []
        bkeys = [_b(k) for k in keys]
        for i in range(n):
            addr, cap, k = addrs[i] or _addr(bufs[i])
            keep.append(k)
            items[i].key = bkeys[i]
            items[i].buf = addr
            items[i].cap = cap
            if ranges and ranges[i]:
                items[i].off, items[i].len = ranges[i]
        f = _load().wl_get_batch if batch else _load().wl_get_many
        rc = f(self._h(), _b(bucket), items, n)
        if rc < 0:
            _raise(rc)
        out = []
        for i in range(n):
            it = items[i]
            if it.code:
                cls = NotFoundError if it.code == WL_ENOTFOUND else WarmlakeError
                out.append(cls(it.code, it.http_status, it.s3_code.decode(errors="replace"),
                               message="GET %s/%s" % (bucket, keys[i])))
            elif as_bytes:
                b = bufs[i]
                out.append(b if isinstance(b, bytes) and it.got == len(b) else
                           bytes(memoryview(b)[:it.got]))
            else:
                out.append(memoryview(bufs[i]).cast("B")[:it.got])
        del keep
        return out

    def read_ahead(self, bucket, items, depth=4, mem_bound=256 << 20, buffers=None):
        """Yield the bytes of items in order while up to depth GETs run ahead (libwarmlake's
        prefetch queue, at most mem_bound bytes held). items: keys (whole objects), or
        (key, offset, length) or (key, offset, length, etag) tuples (etag: sent as If-Match,
        so parts of one object all come from one version). A failed item raises its error
        when its turn comes.

        buffers: a list of at least 2 writable buffers, each large enough for any item, to
        read into in turn instead of new bytes per item (no allocation, no copy): each item
        is then yielded as a memoryview into its buffer, valid only until the next item is
        asked for (its buffer is then read into again); at most len(buffers) - 1 GETs run
        ahead."""
        if buffers is not None:
            yield from self._read_ahead_into(bucket, items, depth, mem_bound, buffers)
            return
        L = _load()
        pf = ctypes.c_void_p()
        rc = L.wl_prefetch_new(self._h(), _b(bucket), depth, mem_bound, ctypes.byref(pf))
        if rc:
            _raise(rc)
        try:
            it = iter(items)
            pushed = taken = 0
            done = False
            while True:
                while not done and pushed - taken < depth * 2:
                    try:
                        x = next(it)
                    except StopIteration:
                        done = True
                        break
                    if isinstance(x, (str, bytes)):
                        x = (x, 0, 0)
                    key, off, ln = x[:3]
                    etag = x[3] if len(x) > 3 else None
                    rc = L.wl_prefetch_push_if(pf, _b(key), off, ln,
                                               _b(etag) if etag else None, None)
                    if rc:
                        _raise(rc)
                    pushed += 1
                if taken == pushed:
                    return
                data, n, tag = ctypes.c_void_p(), ctypes.c_size_t(), ctypes.c_void_p()
                rc = L.wl_prefetch_next(pf, ctypes.byref(data), ctypes.byref(n),
                                        ctypes.byref(tag))
                taken += 1
                if rc:
                    _raise(rc)
                try:
                    out = ctypes.string_at(data, n.value) if n.value else b""
                finally:
                    L.wl_free(data)
                yield out
        finally:
            L.wl_prefetch_free(pf)

    def _read_ahead_into(self, bucket, items, depth, mem_bound, buffers):
        L = _load()
        if len(buffers) < 2:
            raise ValueError("read_ahead: give at least 2 buffers")
        bufs = [_addr(b) for b in buffers]  # (address, capacity, keepalive)
        views = [memoryview(b).cast("B") for b in buffers]
        depth = max(1, min(depth, len(bufs) - 1))
        pf = ctypes.c_void_p()
        rc = L.wl_prefetch_new(self._h(), _b(bucket), depth, mem_bound, ctypes.byref(pf))
        if rc:
            _raise(rc)
        try:
            it = iter(items)
            pushed = taken = 0
            done = False
            while True:
                # Buffer i % n is free once item i - n has been consumed (taken): the consumer
                # of item taken - 1 has asked for the next, so at most n - 1 are held or read.
                while not done and pushed - taken < depth:
                    try:
                        x = next(it)
                    except StopIteration:
                        done = True
                        break
                    if isinstance(x, (str, bytes)):
                        x = (x, 0, 0)
                    key, off, ln = x[:3]
                    etag = x[3] if len(x) > 3 else None
                    addr, cap, _ = bufs[pushed % len(bufs)]
                    rc = L.wl_prefetch_push_into(pf, _b(key), off, ln,
                                                 _b(etag) if etag else None, addr, cap, None)
                    if rc:
                        _raise(rc)
                    pushed += 1
                if taken == pushed:
                    return
                data, n, tag = ctypes.c_void_p(), ctypes.c_size_t(), ctypes.c_void_p()
                rc = L.wl_prefetch_next(pf, ctypes.byref(data), ctypes.byref(n),
                                        ctypes.byref(tag))
                i = taken % len(bufs)
                taken += 1
                if rc:
                    _raise(rc)
                yield views[i][:n.value]
        finally:
            L.wl_prefetch_free(pf)
            del bufs

    def stats(self):
        s = _Stats()
        _load().wl_client_stats(self._h(), ctypes.byref(s))
        return {n: getattr(s, n) for n, _ in _Stats._fields_}


def _client_from_config(cfg):
    return Client(**cfg)
