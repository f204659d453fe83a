#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets whose inputs carry checksums
(a fuzzer cannot guess a valid crc32c). Run from the repo root; idempotent."""
import os
import struct


def crc32c(data, crc=0):
    crc ^= 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def layout(k, m, block, size):
    b = struct.pack("<IBBBBIIQI", 0x4C45574C, 1, k, m, 0, block, 0, size, 0)
    return b + struct.pack("<I", crc32c(b))


def record(typ, bucket, key, ver, seq, meta, payload, version=1, pad=0):
    """A segment record (storage/rec.h) with valid header and chunk crcs; version 2
    headers may end in pad zero bytes (the payload then starts aligned on disk)."""
    chunks = [payload[i:i + 65536] for i in range(0, len(payload), 65536)]
    hlen = 48 + len(bucket) + len(key) + len(ver) + len(meta) + 4 * len(chunks) + pad
    fixed = struct.pack("<IHBBIIQQHHHHI", 0x31524C57, version, typ, 0, hlen, 0, seq, len(payload),
                        len(bucket), len(key), len(ver), 0, len(meta))
    body = bucket + key + ver + meta + b"".join(struct.pack("<I", crc32c(c)) for c in chunks)
    body += b"\0" * pad
    crc = crc32c(fixed + b"\0\0\0\0" + body)
    return fixed + struct.pack("<I", crc) + body + payload


def codec_seeds():
    """storage/codec.h values, each after the byte that picks its decoder."""
    sb = struct.pack("<IHBBIIQ", 0x47534C57, 1, 1, 0, 7, 4096, 256 << 20)
    gc = struct.pack("<IHBBIIQ", 0x47534C57, 1, 2, 0, 9, 65536, 5 << 30)
    key = b"o" + b"bkt\0a/b\0v1\0" + struct.pack(">I", 3)
    ent = struct.pack("<BBIQIIQQI", 1, 1, 2, 8192, 1152, 152, 1000, 5, 0xABC) + b"meta"
    tomb = struct.pack("<BBIQIIQQI", 1, 2, 3, 4096, 60, 60, 0, 6, 1)
    v2 = struct.pack("<IHBBIIQQI", 0x47534C57, 2, 1, 0, 11, 4096, 256 << 20, 12345, 0xA1B2C3D4)
    return [b"\0" + sb + struct.pack("<I", crc32c(sb)) + b"\0" * 12,
            b"\6" + gc + struct.pack("<I", crc32c(gc)) + b"\0" * 12,
            b"\0" + v2 + struct.pack("<I", crc32c(v2)),
            b"\1" + key,
            b"\2" + ent,
            b"\2" + tomb,
            b"\3" + struct.pack("<BBBQQQQQ", 1, 1, 0, 5000, 65536, 1, 9, 123),
            b"\3" + struct.pack("<BBBQQQQQ", 1, 2, 1, 0, 4096, 2**64 - 1, 0, 0),
            b"\4" + struct.pack("<BQIQ", 1, 10, 3, 99999),
            b"\5" + struct.pack("<QIQ", 10, 3, 99999)]


def write(name, i, data):
    d = os.path.join("tests/fuzz/corpus", name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed-%02d" % i), "wb") as f:
        f.write(data)


if __name__ == "__main__":
    assert crc32c(b"123456789") == 0xE3069283
    cases = [(4, 2, 256, 3000), (1, 0, 64, 1), (8, 3, 1024, 0), (16, 4, 4096, 70000),
             (6, 3, 128, 1000), (4, 2, 2560, 10240)]
    for i, (k, m, b, s) in enumerate(cases):
        lay = layout(k, m, b if s else 0, s)
        write("ers_layout", i, lay + bytes(range(256)) * 4 + bytes([i * 3]))
    recs = [record(1, b"bkt", b"key", b"", 1, b"meta", b"hello"),
            record(2, b"b", b"", b"v1", 99, b"", b""),
            record(1, b"bucket", b"a/b/c", b"", 7, b"", bytes(range(256)) * 300),
            record(1, b"bkt", b"big", b"", 8, b"m", bytes(range(256)) * 520, 2, 4000),
            record(2, b"b", b"k", b"", 9, b"", b"", 2, 0)]
    for i, r in enumerate(recs):
        write("rec", i, r)
    for i, c in enumerate(codec_seeds()):
        write("codec", i, c)
    authz = (b"AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/"
             b"aws4_request, SignedHeaders=host;range;x-amz-date, Signature="
             b"f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")
    query = (b"X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AK%2F20130524%2Fus-east-1%2F"
             b"s3%2Faws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&"
             b"X-Amz-SignedHeaders=host&X-Amz-Signature=" + b"a" * 64)
    hdrs = b"Host:examplebucket.s3.amazonaws.com\nRange: bytes=0-9\nx-amz-date:20130524T000000Z"
    write("sigv4", 0, authz + b"\0\0/test.txt\0" + hdrs)
    write("sigv4", 1, b"\0" + query + b"\0/a%20b/c$d\0" + hdrs)
    tlv = lambda t, v: struct.pack("<BH", t, len(v)) + v
    head = (b"\x01" + tlv(5, struct.pack("<Q", 1234)) + tlv(2, b"00ff00ff")
            + tlv(1, layout(4, 2, 64, 100)) + tlv(3, b"d41d8cd98f00b204e9800998ecf8427e")
            + tlv(4, b"text/plain") + tlv(6, b"color\0blue\0") + tlv(255, b""))
    write("objmeta", 0, head)
    write("objmeta", 1, b"\x01" + tlv(5, struct.pack("<Q", 9)) + tlv(2, b"ab") + tlv(7, b"")
          + tlv(255, b""))
    # A multipart head, and a head with fields of a later writer (tags 9, 200: skipped).
    write("objmeta", 2, b"\x01" + tlv(5, struct.pack("<Q", 77)) + tlv(2, b"0123456789abcdef" * 2)
          + tlv(8, struct.pack("<QI", 10 << 20, 2)) + tlv(3, b"0123456789abcdef" * 2 + b"-2")
          + tlv(4, b"") + tlv(6, b"") + tlv(255, b""))
    write("objmeta", 3, head[:12] + tlv(9, b"new") + head[12:-3] + tlv(200, b"\0\0") + head[-3:])
    # An inline object (version 2, tag 12: the stores holding its bytes and their crc).
    write("objmeta", 4, b"\x02" + tlv(5, struct.pack("<Q", 1234)) + tlv(2, b"00ff00ff")
          + tlv(1, layout(4, 2, 64, 100)) + tlv(12, struct.pack("<II", 0x7, 0x1234abcd))
          + tlv(3, b"d41d8cd98f00b204e9800998ecf8427e") + tlv(4, b"text/plain")
          + tlv(6, b"color\0blue\0") + tlv(255, b""))
    # Version 3: sparse (tag 13), upload id and ETag in binary (tags 14, 15).
    write("objmeta", 5, b"\x03" + tlv(5, struct.pack("<Q", 99)) + tlv(14, bytes(range(16)))
          + tlv(1, layout(4, 2, 64, 1)) + tlv(12, struct.pack("<II", 0x13, 0x1234abcd))
          + tlv(13, b"") + tlv(15, bytes(range(16, 32))) + tlv(4, b"binary/octet-stream")
          + tlv(6, b"") + tlv(255, b""))
    # A promoted copy: its stamp (tag 11) after its metadata's time (tag 16).
    write("objmeta", 6, head[:-3] + tlv(11, struct.pack("<Q", 5678)) + tlv(16, struct.pack("<Q", 2345))
          + head[-3:])
    write("s3xml", 0, b"\x01<CompleteMultipartUpload><Part><PartNumber>1</PartNumber>"
          b"<ETag>\"0123456789abcdef0123456789abcdef\"</ETag></Part><Part><PartNumber>2"
          b"</PartNumber><ETag>&quot;x&quot;</ETag></Part></CompleteMultipartUpload>")
    write("s3xml", 1, b"\x00<Delete><Quiet>true</Quiet><Object><Key>a &amp; b</Key></Object>"
          b"<Object><Key>c</Key></Object></Delete>")
    write("s3xml", 2, b"\x00<!DOCTYPE d [<!ENTITY a \"aaaa\">]><Delete><Object><Key>&a;</Key>"
          b"</Object></Delete>")
    # Complete with per-part checksums, one part carrying two (refused).
    write("s3xml", 5, b"\x01<CompleteMultipartUpload><Part><PartNumber>1</PartNumber>"
          b"<ETag>e</ETag><ChecksumCRC32>AAAAAA==</ChecksumCRC32></Part><Part><PartNumber>2"
          b"</PartNumber><ChecksumSHA256>47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=</ChecksumSHA256>"
          b"</Part><Part><ChecksumCRC32C>x</ChecksumCRC32C><ChecksumCRC64NVME>y</ChecksumCRC64NVME>"
          b"</Part></CompleteMultipartUpload>")
    write("s3xml", 4, b"\xf0<CORSConfiguration><CORSRule><AllowedOrigin>http://*.example.com"
                      b"</AllowedOrigin><AllowedMethod>GET</AllowedMethod><AllowedHeader>x-amz-*"
                      b"</AllowedHeader><MaxAgeSeconds>60</MaxAgeSeconds></CORSRule>"
                      b"</CORSConfiguration>")
    write("s3xml", 3, b"\x02<Tagging><TagSet><Tag><Key>a b</Key><Value>&amp;</Value></Tag>"
                      b"<Tag><Key>k</Key><Value></Value></Tag></TagSet></Tagging>")
    write("s3c", 0, b"\x02\x07HTTP/1.1 200 OK\r\nETag: \"abc\"\r\nContent-Length: 5\r\n\r\nhello")
    write("s3c", 1, b"\x00\x03HTTP/1.1 503 Slow Down\r\nRetry-After: 1\r\nContent-Length: 62\r\n\r\n"
          b"<Error><Code>SlowDown</Code><Message>x</Message></Error>      ")
    write("s3c", 2, b"\x02\x05HTTP/1.1 206 Partial\r\nContent-Range: bytes 2-4/10\r\n"
          b"Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n")
    write("s3c", 3, b"\x01\x01HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")
    # Batch GET response streams (client/batch.h): n entries, a feed step, then the frames.

    def bframe(index, status, key, etag, size, payload):
        h = struct.pack("<4sIHHHHQQ", b"WLB1", index, status, len(key), len(etag), 0, size,
                        len(payload))
        h += struct.pack("<II", crc32c(h), 0)
        return h + key + etag + payload + struct.pack("<I", crc32c(payload))
    bend = bframe(0xFFFFFFFF, 200, b"", b"", 0, b"")
    write("batch", 0, b"\x03\x05" + bframe(0, 200, b"a/1.jpg", b"e1", 5, b"hello")
          + bframe(1, 206, b"b.bin", b"e2", 100, b"ran") + bframe(2, 404, b"c", b"", 0, b"NoSuchKey")
          + bend)
    write("batch", 1, b"\x00\x01" + bend)
    write("batch", 2, b"\x02\x11" + bframe(0, 200, b"big", b"d41d", 3000, bytes(range(256)) * 11
                                            + bytes(184)) + bframe(1, 200, b"cut", b"x", 5, b"01234")[:-3])
    write("batch", 3, b"\x01\x02" + bframe(0, 503, b"k", b"", 0, b"SlowDown") + bend)
    write("http", 0, b"\x05GET /b/k?list-type=2 HTTP/1.1\r\nHost: x\r\n\r\n"
          b"PUT /b/k HTTP/1.1\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\nabc")
    write("http", 1, b"\x00POST /b?delete HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
          b"3\r\nabc\r\n0\r\n\r\n")
    write("http", 2, b"\x11GET / HTTP/1.1\r\nX-Big: " + b"a" * 3000 + b"\r\n\r\n")
    write("http", 3, b"\x07GET /%41%zz HTTP/1.0\r\nA:\r\nB: c\r\n d\r\n\r\n")
    write("chunked", 0, b"\x02\x07" + b"5\r\nhello\r\n0\r\nx-amz-checksum-crc32:DUoRhQ==\r\n\r\n")
    write("chunked", 1, b"\x00\x03" + b"3\r\nabc\r\n0\r\n\r\n")
    write("chunked", 2, b"\x01\xff" + b"3;chunk-signature=" + b"0" * 64 + b"\r\nabc\r\n")
    # Node protocol frames (proto/wire.h): a header with a valid crc, then a request payload.
    pstr = lambda v: struct.pack("<H", len(v)) + v
    pid = lambda b, k, v, sh: pstr(b) + pstr(k) + pstr(v) + struct.pack("<I", sh)

    def frame(typ, payload, rid=1, flags=0, status=0):
        h = struct.pack("<IBBHQIi", 0x31504C57, 1, typ, flags, rid, len(payload), status)
        return h + struct.pack("<II", crc32c(payload, crc32c(h)), 0) + payload
    put = (struct.pack("<I", 1) + pid(b"bkt", b"key", b"", 3) + b"\x01" + struct.pack("<Q", 99)
           + pstr(b"0123abcd") + pstr(b"4567") + struct.pack("<I", 4) + b"meta"
           + struct.pack("<I", 5) + b"hello")
    write("wire", 0, frame(3, put))
    write("wire", 1, frame(1, struct.pack("<H", 1) + pstr(b"lake") + pstr(b"n1")
                           + struct.pack("<Q", 7) + bytes(range(16))))
    write("wire", 2, frame(9, struct.pack("<I", 0) + pstr(b"bkt") + pstr(b"pre") + b"\x02"
                           + pstr(b"from") + pstr(b"v") + struct.pack("<I", 100) + b"\x01"))
    write("wire", 3, frame(4, struct.pack("<I", 2) + pid(b"b\x01", b"k", b"0f", 33)
                           + struct.pack("<QI", 4096, 65536), rid=9, flags=1, status=-4))
    # A conditional DEL: the head's condition after the id (mode 3, SHARD_IF_AT_MOST).
    write("wire", 4, frame(8, struct.pack("<I", 1) + pid(b"bkt", b"key", b"", 2) + b"\x03"
                           + struct.pack("<Q", 1234) + pstr(b"0123abcd") + pstr(b"89ef")))
    write("cmap", 0, b'{"cluster":"lake","epoch":2,"nodes":['
          b'{"id":"n1","s3":"127.0.0.1:9001","proto":"127.0.0.1:9101","drives":2},'
          b'{"id":"n2","s3":"127.0.0.1:9002","proto":"127.0.0.1:9102","drives":2},'
          b'{"id":"n3","s3":"127.0.0.1:9003","proto":"127.0.0.1:9103","drives":2}]}')
    write("cmap", 1, b'{"cluster":"c","epoch":1,"nodes":[{"id":"a","s3":"h:1","proto":"h:2",'
          b'"drives":3}],"sets":[{"ec":"2+1","drives":["a/2","a/0","a/1"]}]}')
    # Batch GET, the gateway's side (s3/batch.h, fuzz_s3batch): request bodies (first byte
    # even), response streams (odd).
    write("s3batch", 0, b"\x00<BatchGet><Object><Key>a/1.jpg</Key></Object><Object><Key>b.bin"
          b"</Key><Range>bytes=0-1023</Range></Object><Object><Key>c</Key><VersionId>"
          b"0123456789abcdef</VersionId></Object></BatchGet>")
    write("s3batch", 1, b"\x02<?xml version=\"1.0\"?>\n<BatchGet xmlns=\"urn:x\"/>")

    def s3bframe(index, status, key, etag, size, payload):
        h = struct.pack("<4sIHHHHQQ", b"WLB1", index, status, len(key), len(etag), 0, size,
                        len(payload))
        return (h + struct.pack("<II", crc32c(h), 0) + key + etag + payload
                + struct.pack("<I", crc32c(payload)))
    write("s3batch", 2, b"\x01" + s3bframe(0, 200, b"a/1.jpg", b"900150983cd24fb0d6963f7d28e17f72",
                                       3, b"abc")
          + s3bframe(1, 206, b"b.bin", b"e2fc714c4727ee9395f324cd2e7f331f", 4, b"bc")
          + s3bframe(2, 404, b"c", b"", 0, b"NoSuchKey")
          + s3bframe(0xFFFFFFFF, 200, b"", b"", 0, b""))
    write("s3batch", 3, b"\x03" + s3bframe(0, 403, b"k", b"", 0, b"AccessDenied")
          + s3bframe(1, 200, b"k2", b"e", 5, b"hel"))
