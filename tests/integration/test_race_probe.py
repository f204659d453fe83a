"""Probe (skipped unless WL_RACE_PROBE=1): more racing clients on different nodes of a 3-node cluster (4+2), in
combinations test_cluster.py does not cover. Each scenario runs WL_RACE_ROUNDS
rounds (default 40) and fails with every bad round listed."""
import os

import pytest
from botocore.exceptions import ClientError

from conftest import signed_request
from test_cluster import body, md5, race

ROUNDS = int(os.environ.get("WL_RACE_ROUNDS", "40"))
pytestmark = pytest.mark.skipif(not os.environ.get("WL_RACE_PROBE"),
                                reason="a probe (minutes): WL_RACE_PROBE=1 runs it")
SLOW = ("SlowDown", "ServiceUnavailable", "InternalError")


def ok(o):
    return not isinstance(o, str)


def versioned(c, b, status="Enabled"):
    c.create_bucket(Bucket=b)
    c.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": status})


def check(clients, bucket, key, kept=(), gone=(), bodies=None, latest=None, tags=None):
    """Every node: kept ids listed, gone ids not, one IsLatest (latest: that id), every listed
    version readable (and its bytes as bodies says), tags {vid: value} on each. Problems, as a
    list of strings."""
    bad = []
    bodies = bodies or {}
    for ni, c in enumerate(clients):
        r = c.list_object_versions(Bucket=bucket, Prefix=key)
        vs = [v for v in r.get("Versions", []) if v["Key"] == key]
        ms = [m for m in r.get("DeleteMarkers", []) if m["Key"] == key]
        ids = [v["VersionId"] for v in vs] + [m["VersionId"] for m in ms]
        lat = [x["VersionId"] for x in vs + ms if x["IsLatest"]]
        for k in kept:
            if k not in ids:
                bad.append("n%d: acknowledged %s missing (listed %s)" % (ni + 1, k, ids))
        for g in gone:
            if g in ids:
                bad.append("n%d: deleted %s listed" % (ni + 1, g))
        if len(lat) != 1 or (latest and lat != [latest]):
            bad.append("n%d: latest %s want %s" % (ni + 1, lat, latest))
        if len(set(ids)) != len(ids):
            bad.append("n%d: duplicate ids %s" % (ni + 1, ids))
        for v in vs:
            vid = v["VersionId"]
            try:
                got = c.get_object(Bucket=bucket, Key=key, VersionId=vid)["Body"].read()
                if vid in bodies and md5(got) != md5(bodies[vid]):
                    bad.append("n%d: %s wrong bytes" % (ni + 1, vid))
            except ClientError as e:
                bad.append("n%d: listed %s reads %s" % (ni + 1, vid, e.response["Error"]["Code"]))
        for vid, want in (tags or {}).items():
            try:
                ts = c.get_object_tagging(Bucket=bucket, Key=key, VersionId=vid)["TagSet"]
                got = {t["Key"]: t["Value"] for t in ts}.get("r")
                if got != want:
                    bad.append("n%d: %s tag %s want %s" % (ni + 1, vid, got, want))
            except ClientError as e:
                bad.append("n%d: tags of %s: %s" % (ni + 1, vid, e.response["Error"]["Code"]))
    return bad


def size_of(r):
    return 1000 if r % 2 else 300 << 10


OUTS = []


def race2(fns):
    out = race(fns)
    OUTS.append(tuple(o if isinstance(o, str) else "ok" for o in out))
    return out


def brief(out):
    return [x if isinstance(x, str) else (x.get("VersionId") or "ok") if isinstance(x, dict)
            else x for x in out]


def report(bad, rounds):
    import collections
    seen = collections.Counter(OUTS)
    OUTS.clear()
    msg = "%d bad rounds in %d; outcomes %s\n" % (len(bad), rounds, dict(seen)) + "\n".join(str(b) for b in bad)
    print(msg)
    assert not bad, msg


def test_tag_noncurrent_racing_its_delete(cluster):
    """PutObjectTagging (even rounds) / PutObjectAcl (odd: every 4th) of noncurrent v1 by id
    through one node, DELETE ?versionId=v1 through another."""
    cs = [n.s3() for n in cluster]
    versioned(cs[0], "tnd")
    bad = []
    for r in range(ROUNDS):
        key, size = "k%d" % r, size_of(r // 2)
        b1, b2 = body(size, 10 * r), body(size, 10 * r + 1)
        v1 = cs[0].put_object(Bucket="tnd", Key=key, Body=b1)["VersionId"]
        v2 = cs[1].put_object(Bucket="tnd", Key=key, Body=b2)["VersionId"]
        a, b = [(0, 1), (1, 2), (2, 0)][r % 3]
        if r % 4 == 3:
            meta = lambda: cs[a].put_object_acl(Bucket="tnd", Key=key, VersionId=v1,
                                                ACL="public-read") and "acl"
        else:
            meta = lambda: cs[a].put_object_tagging(Bucket="tnd", Key=key, VersionId=v1, Tagging={
                "TagSet": [{"Key": "r", "Value": str(r)}]}) and "tagged"
        out = race2([meta, lambda: cs[b].delete_object(Bucket="tnd", Key=key, VersionId=v1)])
        gone = [v1] if ok(out[1]) else []
        p = check(cs, "tnd", key, kept=[v2], gone=gone, bodies={v2: b2}, latest=v2)
        if p:
            bad.append((key, size, brief(out), p))
    report(bad, ROUNDS)


def test_tag_noncurrent_racing_its_promotion(cluster):
    """PutObjectTagging of noncurrent v1 by id through one node while DELETE ?versionId=v2
    (current) through another promotes v1: the acknowledged tags stay on v1."""
    cs = [n.s3() for n in cluster]
    versioned(cs[0], "tpr")
    bad = []
    for r in range(ROUNDS):
        key, size = "k%d" % r, size_of(r)
        b1, b2 = body(size, 10 * r), body(size, 10 * r + 1)
        v1 = cs[0].put_object(Bucket="tpr", Key=key, Body=b1)["VersionId"]
        v2 = cs[1].put_object(Bucket="tpr", Key=key, Body=b2)["VersionId"]
        a, b = [(0, 1), (1, 2), (2, 0)][r % 3]
        out = race2([lambda: cs[a].put_object_tagging(Bucket="tpr", Key=key, VersionId=v1, Tagging={
            "TagSet": [{"Key": "r", "Value": str(r)}]}) and "tagged",
            lambda: cs[b].delete_object(Bucket="tpr", Key=key, VersionId=v2) and "deleted"])
        tags = {v1: str(r)} if out[0] == "tagged" else {}
        gone = [v2] if out[1] == "deleted" else []
        p = check(cs, "tpr", key, kept=[v1], gone=gone, bodies={v1: b1, v2: b2},
                  latest=v1 if gone else None, tags=tags)
        if p:
            bad.append((key, size, brief(out), p))
    report(bad, ROUNDS)


def test_tag_current_by_id_racing_put_and_marker(cluster):
    """PutObjectTagging of current v2 by id, a PUT and a DELETE (marker) through the three
    nodes: v2 keeps its tags (noncurrent by then), the PUT's version and the marker stay."""
    cs = [n.s3() for n in cluster]
    versioned(cs[0], "tcm")
    bad = []
    for r in range(ROUNDS):
        key, size = "k%d" % r, size_of(r)
        b1, b2, b3 = (body(size, 10 * r + j) for j in range(3))
        cs[0].put_object(Bucket="tcm", Key=key, Body=b1)
        v2 = cs[1].put_object(Bucket="tcm", Key=key, Body=b2)["VersionId"]
        out = race2([lambda: cs[r % 3].put_object_tagging(
            Bucket="tcm", Key=key, VersionId=v2,
            Tagging={"TagSet": [{"Key": "r", "Value": str(r)}]}) and "tagged",
            lambda: cs[(r + 1) % 3].put_object(Bucket="tcm", Key=key, Body=b3),
            lambda: cs[(r + 2) % 3].delete_object(Bucket="tcm", Key=key)])
        kept = [o["VersionId"] for o in out[1:] if ok(o)] + [v2]
        bodies = {v2: b2}
        if ok(out[1]):
            bodies[out[1]["VersionId"]] = b3
        p = check(cs, "tcm", key, kept=kept, bodies=bodies,
                  tags={v2: str(r)} if out[0] == "tagged" else {})
        if p:
            bad.append((key, size, brief(out), p))
    report(bad, ROUNDS)


def test_copy_racing_marker_and_delete_of_source(cluster):
    """CopyObject of v1 (by id) onto the same key through n1, a DELETE (marker) through n2 and
    DELETE ?versionId=v2 (current) through n3; round variants also delete v1 (the source)."""
    cs = [n.s3() for n in cluster]
    versioned(cs[0], "cpy")
    bad = []
    for r in range(ROUNDS):
        key, size = "k%d" % r, size_of(r)
        b1, b2 = body(size, 10 * r), body(size, 10 * r + 1)
        v1 = cs[0].put_object(Bucket="cpy", Key=key, Body=b1)["VersionId"]
        v2 = cs[1].put_object(Bucket="cpy", Key=key, Body=b2)["VersionId"]
        src = {"Bucket": "cpy", "Key": key, "VersionId": v1}
        delid = v1 if r % 3 == 2 else v2
        o = [r % 3, (r + 1) % 3, (r + 2) % 3]
        out = race2([lambda: cs[o[0]].copy_object(Bucket="cpy", Key=key, CopySource=src),
                    lambda: cs[o[1]].delete_object(Bucket="cpy", Key=key),
                    lambda: cs[o[2]].delete_object(Bucket="cpy", Key=key, VersionId=delid)])
        kept, bodies = [], {}
        if ok(out[0]):
            kept.append(out[0]["VersionId"])
            bodies[out[0]["VersionId"]] = b1
        if ok(out[1]):
            kept.append(out[1]["VersionId"])
        gone = [delid] if ok(out[2]) else []
        bodies.update({v1: b1, v2: b2})
        p = check(cs, "cpy", key, kept=kept, gone=gone, bodies=bodies)
        if p:
            bad.append((key, size, brief(out), p))
    report(bad, ROUNDS)


def test_complete_racing_put_and_marker(cluster):
    """CompleteMultipartUpload onto a versioned key through n1, a PUT through n2, a DELETE
    (marker) through n3, and DELETE ?versionId of the current version (odd rounds)."""
    cs = [n.s3() for n in cluster]
    versioned(cs[0], "mpr")
    bad = []
    part = body(5 << 20, 77)
    for r in range(ROUNDS):
        key, size = "k%d" % r, size_of(r)
        b1, b3 = body(size, 10 * r), body(size, 10 * r + 2)
        v1 = cs[0].put_object(Bucket="mpr", Key=key, Body=b1)["VersionId"]
        up = cs[0].create_multipart_upload(Bucket="mpr", Key=key)["UploadId"]
        e1 = cs[1].upload_part(Bucket="mpr", Key=key, UploadId=up, PartNumber=1,
                               Body=part)["ETag"]
        e2 = cs[2].upload_part(Bucket="mpr", Key=key, UploadId=up, PartNumber=2,
                               Body=b3[:1000])["ETag"]
        fns = [lambda: cs[r % 3].complete_multipart_upload(
            Bucket="mpr", Key=key, UploadId=up, MultipartUpload={"Parts": [
                {"PartNumber": 1, "ETag": e1}, {"PartNumber": 2, "ETag": e2}]}),
            lambda: cs[(r + 1) % 3].put_object(Bucket="mpr", Key=key, Body=b3),
            lambda: cs[(r + 2) % 3].delete_object(Bucket="mpr", Key=key)]
        if r % 2:
            fns.append(lambda: cs[(r + 1) % 3].delete_object(Bucket="mpr", Key=key, VersionId=v1))
        out = race2(fns)
        kept, bodies = [], {}
        if ok(out[0]):
            kept.append(out[0]["VersionId"])
            bodies[out[0]["VersionId"]] = part + b3[:1000]
        if ok(out[1]):
            kept.append(out[1]["VersionId"])
            bodies[out[1]["VersionId"]] = b3
        if ok(out[2]):
            kept.append(out[2]["VersionId"])
        gone = [v1] if len(out) > 3 and ok(out[3]) else []
        if not gone:
            bodies[v1] = b1
        p = check(cs, "mpr", key, kept=kept, gone=gone, bodies=bodies)
        if p:
            bad.append((key, size, brief(out), p))
    report(bad, ROUNDS)


def test_batch_delete_racing_single_deletes_and_put(cluster):
    """DeleteObjects of [v1, v2] through n1, DELETE ?versionId=v2 through n2, a PUT (even
    rounds) or a DELETE (marker, odd) through n3."""
    cs = [n.s3() for n in cluster]
    versioned(cs[0], "bat")
    bad = []
    for r in range(ROUNDS):
        key, size = "k%d" % r, size_of(r // 2)
        b1, b2, b3, b4 = (body(size, 10 * r + j) for j in range(4))
        v0 = cs[2].put_object(Bucket="bat", Key=key, Body=b4)["VersionId"]
        v1 = cs[0].put_object(Bucket="bat", Key=key, Body=b1)["VersionId"]
        v2 = cs[1].put_object(Bucket="bat", Key=key, Body=b2)["VersionId"]
        third = (lambda: cs[(r + 2) % 3].put_object(Bucket="bat", Key=key, Body=b3)) if r % 2 == 0 \
            else (lambda: cs[(r + 2) % 3].delete_object(Bucket="bat", Key=key))
        out = race2([lambda: cs[r % 3].delete_objects(Bucket="bat", Delete={"Objects": [
            {"Key": key, "VersionId": v1}, {"Key": key, "VersionId": v2}]}),
            lambda: cs[(r + 1) % 3].delete_object(Bucket="bat", Key=key, VersionId=v2),
            third])
        gone, kept, bodies = set(), [v0], {v0: b4}
        if ok(out[0]):
            errs = [e for e in out[0].get("Errors", []) if e["Code"] != "SlowDown"]
            if errs:
                bad.append((key, "batch errors", errs))
            gone |= {d["VersionId"] for d in out[0].get("Deleted", [])}
        if ok(out[1]):
            gone.add(v2)
        if ok(out[2]):
            kept.append(out[2]["VersionId"])
            if r % 2 == 0:
                bodies[out[2]["VersionId"]] = b3
        p = check(cs, "bat", key, kept=kept, gone=sorted(gone), bodies=bodies)
        if p:
            bad.append((key, size, brief(out), p))
    report(bad, ROUNDS)


def test_suspended_null_overwrites_racing_null_deletes(cluster):
    """Suspended versioning over a versioned v1: the null version N current. A PUT (a new
    null version) through n1, DELETE ?versionId=null through n2, and a DELETE (a null
    marker) through n3 on odd rounds. v1 stays; no listed version unreadable."""
    cs = [n.s3() for n in cluster]
    versioned(cs[0], "sus")
    bad = []
    b1s = {}
    for r in range(ROUNDS):
        key = "k%d" % r
        b1s[key] = body(size_of(r // 2), 10 * r)
        b1s[key + "v"] = cs[0].put_object(Bucket="sus", Key=key, Body=b1s[key])["VersionId"]
    cs[0].put_bucket_versioning(Bucket="sus", VersioningConfiguration={"Status": "Suspended"})
    for r in range(ROUNDS):
        key, size = "k%d" % r, size_of(r // 2)
        v1, b1 = b1s[key + "v"], b1s[key]
        bn, b3 = body(size, 10 * r + 1), body(size, 10 * r + 2)
        cs[1].put_object(Bucket="sus", Key=key, Body=bn)
        fns = [lambda: cs[r % 3].put_object(Bucket="sus", Key=key, Body=b3) and "put",
               lambda: cs[(r + 1) % 3].delete_object(Bucket="sus", Key=key, VersionId="null")
               and "delnull"]
        if r % 2:
            fns.append(lambda: cs[(r + 2) % 3].delete_object(Bucket="sus", Key=key) and "marker")
        out = race2(fns)
        p = check(cs, "sus", key, kept=[v1], bodies={v1: b1})
        # The null version, if listed, reads as the PUT's body or the first null's.
        if p:
            bad.append((key, size, brief(out), p))
    report(bad, ROUNDS)


def test_if_match_put_racing_delete_by_id(cluster):
    """PUT If-Match: v2's ETag through n1 while DELETE ?versionId=v2 (current) through n2 and
    DELETE ?versionId=v1 through n3 (odd rounds)."""
    cs = [n.s3() for n in cluster]
    versioned(cs[0], "ifm")
    bad = []
    for r in range(ROUNDS):
        key, size = "k%d" % r, size_of(r // 2)
        b0, b1, b2, b3 = (body(size, 10 * r + j) for j in range(4))
        v0 = cs[2].put_object(Bucket="ifm", Key=key, Body=b0)["VersionId"]
        v1 = cs[0].put_object(Bucket="ifm", Key=key, Body=b1)["VersionId"]
        r2 = cs[1].put_object(Bucket="ifm", Key=key, Body=b2)
        v2, etag = r2["VersionId"], r2["ETag"]
        node = cluster[r % 3]

        def put():
            st, _, hd = signed_request(node.port, "PUT", "/ifm/" + key, b3,
                                       headers={"If-Match": etag})
            return {"VersionId": hd.get("x-amz-version-id")} if st == 200 else str(st)
        fns = [put, lambda: cs[(r + 1) % 3].delete_object(Bucket="ifm", Key=key, VersionId=v2)]
        if r % 2:
            fns.append(lambda: cs[(r + 2) % 3].delete_object(Bucket="ifm", Key=key, VersionId=v1))
        out = race2(fns)
        kept, bodies = [v0], {v0: b0}
        if ok(out[0]):
            kept.append(out[0]["VersionId"])
            bodies[out[0]["VersionId"]] = b3
        gone = [v2] if ok(out[1]) else []
        if len(out) > 2 and ok(out[2]):
            gone.append(v1)
        p = check(cs, "ifm", key, kept=kept, gone=gone, bodies=bodies)
        if ok(out[0]) and ok(out[1]):
            # Both acknowledged: the PUT saw v2 current, so it came before the delete of v2;
            # its version stays (checked above).
            pass
        if p:
            bad.append((key, size, brief(out), p))
    report(bad, ROUNDS)


def test_if_none_match_put_racing_delete_of_the_only_version(cluster):
    """With only v1 stored: PUT If-None-Match: * through n1, DELETE ?versionId=v1 through n2,
    and (odd rounds) a DELETE (marker) through n3. An acknowledged conditional PUT found no
    current version (v1 deleted, or a marker): its version stays listed and readable."""
    cs = [n.s3() for n in cluster]
    versioned(cs[0], "inm")
    bad = []
    for r in range(ROUNDS):
        key, size = "k%d" % r, size_of(r // 2)
        b1, b2 = body(size, 10 * r), body(size, 10 * r + 1)
        v1 = cs[0].put_object(Bucket="inm", Key=key, Body=b1)["VersionId"]
        node = cluster[r % 3]

        def put():
            st, _, hd = signed_request(node.port, "PUT", "/inm/" + key, b2,
                                       headers={"If-None-Match": "*"})
            return {"VersionId": hd.get("x-amz-version-id")} if st == 200 else str(st)
        fns = [put, lambda: cs[(r + 1) % 3].delete_object(Bucket="inm", Key=key, VersionId=v1)]
        if r % 2:
            fns.append(lambda: cs[(r + 2) % 3].delete_object(Bucket="inm", Key=key))
        out = race2(fns)
        kept, bodies = [], {}
        if ok(out[0]):
            kept.append(out[0]["VersionId"])
            bodies[out[0]["VersionId"]] = b2
        if len(out) > 2 and ok(out[2]):
            kept.append(out[2]["VersionId"])
        gone = [v1] if ok(out[1]) else []
        p = check(cs, "inm", key, kept=kept, gone=gone, bodies=bodies) if kept else []
        if not kept:  # nothing acknowledged but the delete: no listed version, or v1 if kept
            r_ = cs[0].list_object_versions(Bucket="inm", Prefix=key)
            ids = [v["VersionId"] for v in r_.get("Versions", []) if v["Key"] == key]
            if gone and v1 in ids:
                p = ["deleted v1 listed"]
        if p:
            bad.append((key, size, brief(out), p))
    report(bad, ROUNDS)


def test_tag_by_id_racing_promotion_put_and_marker(cluster):
    """PutObjectAcl (odd) / PutObjectTagging (even) of noncurrent v1 by id, DELETE
    ?versionId=v2 (current: promotes v1), and a PUT or a DELETE (marker), through the three
    nodes: v1's acknowledged tags stay, the PUT/marker stays, v2 goes."""
    cs = [n.s3() for n in cluster]
    versioned(cs[0], "tpp")
    bad = []
    for r in range(ROUNDS):
        key, size = "k%d" % r, size_of(r // 2)
        b1, b2, b3 = (body(size, 10 * r + j) for j in range(3))
        v1 = cs[0].put_object(Bucket="tpp", Key=key, Body=b1)["VersionId"]
        v2 = cs[1].put_object(Bucket="tpp", Key=key, Body=b2)["VersionId"]
        o = [r % 3, (r + 1) % 3, (r + 2) % 3]
        third = (lambda: cs[o[2]].put_object(Bucket="tpp", Key=key, Body=b3)) if r % 4 < 2 \
            else (lambda: cs[o[2]].delete_object(Bucket="tpp", Key=key))
        out = race2([lambda: cs[o[0]].put_object_tagging(
            Bucket="tpp", Key=key, VersionId=v1,
            Tagging={"TagSet": [{"Key": "r", "Value": str(r)}]}) and "tagged",
            lambda: cs[o[1]].delete_object(Bucket="tpp", Key=key, VersionId=v2) and "deleted",
            third])
        kept, bodies = [v1], {v1: b1}
        if ok(out[2]):
            kept.append(out[2]["VersionId"])
            if r % 4 < 2:
                bodies[out[2]["VersionId"]] = b3
        gone = [v2] if out[1] == "deleted" else []
        p = check(cs, "tpp", key, kept=kept, gone=gone, bodies=bodies,
                  tags={v1: str(r)} if out[0] == "tagged" else {})
        if p:
            bad.append((key, size, brief(out), p))
    report(bad, ROUNDS)


def test_tag_current_racing_delete_of_current_by_id(cluster):
    """PutObjectTagging without a version id (the current v2) through n1 and DELETE
    ?versionId=v2 through n2: v2 gone, v1 current and readable; a tagging acknowledged
    went to v2 (gone with it) or to v1 (then v1 has it)."""
    cs = [n.s3() for n in cluster]
    versioned(cs[0], "tcd")
    bad = []
    for r in range(ROUNDS):
        key, size = "k%d" % r, size_of(r // 2)
        b1, b2 = body(size, 10 * r), body(size, 10 * r + 1)
        v1 = cs[0].put_object(Bucket="tcd", Key=key, Body=b1)["VersionId"]
        v2 = cs[1].put_object(Bucket="tcd", Key=key, Body=b2)["VersionId"]
        out = race2([lambda: cs[r % 3].put_object_tagging(
            Bucket="tcd", Key=key, Tagging={"TagSet": [{"Key": "r", "Value": str(r)}]}) and "tagged",
            lambda: cs[(r + 1) % 3].delete_object(Bucket="tcd", Key=key, VersionId=v2) and "deleted"])
        gone = [v2] if out[1] == "deleted" else []
        p = check(cs, "tcd", key, kept=[v1], gone=gone, bodies={v1: b1, v2: b2},
                  latest=v1 if gone else None)
        if p:
            bad.append((key, size, brief(out), p))
    report(bad, ROUNDS)


def test_copy_onto_key_racing_tagging_and_delete_by_id(cluster):
    """CopyObject of the key onto itself (REPLACE metadata) through n1, PutObjectTagging of v2
    (current) by id through n2, DELETE ?versionId=v1 through n3."""
    cs = [n.s3() for n in cluster]
    versioned(cs[0], "cpt")
    bad = []
    for r in range(ROUNDS):
        key, size = "k%d" % r, size_of(r // 2)
        b1, b2 = body(size, 10 * r), body(size, 10 * r + 1)
        v1 = cs[0].put_object(Bucket="cpt", Key=key, Body=b1)["VersionId"]
        v2 = cs[1].put_object(Bucket="cpt", Key=key, Body=b2)["VersionId"]
        o = [r % 3, (r + 1) % 3, (r + 2) % 3]
        out = race2([lambda: cs[o[0]].copy_object(
            Bucket="cpt", Key=key, CopySource={"Bucket": "cpt", "Key": key},
            MetadataDirective="REPLACE", Metadata={"m": str(r)}),
            lambda: cs[o[1]].put_object_tagging(
                Bucket="cpt", Key=key, VersionId=v2,
                Tagging={"TagSet": [{"Key": "r", "Value": str(r)}]}) and "tagged",
            lambda: cs[o[2]].delete_object(Bucket="cpt", Key=key, VersionId=v1) and "deleted"])
        kept, bodies = [v2], {v2: b2}
        if ok(out[0]):
            kept.append(out[0]["VersionId"])
        gone = [v1] if out[2] == "deleted" else []
        p = check(cs, "cpt", key, kept=kept, gone=gone, bodies=bodies,
                  tags={v2: str(r)} if out[1] == "tagged" else {})
        if ok(out[0]):
            vid = out[0]["VersionId"]
            for c in cs:
                try:
                    got = c.get_object(Bucket="cpt", Key=key, VersionId=vid)["Body"].read()
                    if md5(got) not in (md5(b1), md5(b2)):
                        p.append("copy %s bytes neither v1 nor v2" % vid)
                except ClientError as e:
                    p.append("copy %s reads %s" % (vid, e.response["Error"]["Code"]))
        if p:
            bad.append((key, size, brief(out), p))
    report(bad, ROUNDS)
