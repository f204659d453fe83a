"""Answers a third hostile probe found wrong, each checked against what AWS S3 documents
(or, where S3 says nothing, the RFCs); each test says which. Under WL_CLUSTER the racing
tests go through every node of the cluster at once."""
import base64
import hashlib
import re
import threading
import xml.etree.ElementTree as ET

from botocore.exceptions import ClientError

from conftest import Server, s3_client, signed_request

BUSY = ("SlowDown", "ServiceUnavailable")


def code_of(body):
    return ET.fromstring(body).findtext("Code")


def md5_b64(b):
    return base64.b64encode(hashlib.md5(b).digest()).decode()


def clients(server):
    """A client per node (one on a single node), without retries: a retried PUT would hide
    the answer of the first."""
    nodes = getattr(server, "nodes", None) or [server]
    return [s3_client(n.endpoint, retry=False) for n in nodes]


def race(fns):
    """Run the callables at once (a barrier), each's result or its S3 error code."""
    barrier, out = threading.Barrier(len(fns)), [None] * len(fns)

    def run(i):
        barrier.wait()
        try:
            out[i] = fns[i]()
        except ClientError as e:
            out[i] = e.response["Error"]["Code"]
    ts = [threading.Thread(target=run, args=(i,)) for i in range(len(fns))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return out


def lc_rule(name, days):
    return {"ID": name, "Filter": {"Prefix": ""}, "Status": "Enabled",
            "Expiration": {"Days": days}}


def expiration_rule(c, bucket, key):
    """The rule-id of the x-amz-expiration a HEAD of key answers (None without one)."""
    h = c.head_object(Bucket=bucket, Key=key)["ResponseMetadata"]["HTTPHeaders"]
    m = re.search(r'rule-id="([^"]*)"', h.get("x-amz-expiration", ""))
    return m.group(1) if m else None


def lifecycle_id(c, bucket):
    """The ID of the one rule the bucket's configuration has (None: no configuration)."""
    try:
        return c.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"][0]["ID"]
    except ClientError as e:
        assert e.response["Error"]["Code"] == "NoSuchLifecycleConfiguration", e.response
        return None


def lifecycle_race(server, rounds, strict):
    """PutBucketLifecycleConfiguration through every node at once (4), while
    PutBucketTagging rewrites the bucket record through every node too (12), round after
    round; every node caches the configuration (a HEAD) before each round. Checks after
    each round: every node answers the same configuration, in GET and in the
    x-amz-expiration of a HEAD (its cached copy), and it is one of the round's PUTs (or the
    one before, when none got through); strict: one answered 200."""
    cs = clients(server)
    c = cs[0]
    c.create_bucket(Bucket="lcrace")
    c.put_object(Bucket="lcrace", Key="k", Body=b"x")
    stands = None
    for r in range(rounds):
        for cl in cs:
            assert expiration_rule(cl, "lcrace", "k") == stands, r
        names = ["r%d-%d" % (r, i) for i in range(4)]

        def put(i):
            cs[i % len(cs)].put_bucket_lifecycle_configuration(
                Bucket="lcrace", LifecycleConfiguration={"Rules": [lc_rule(names[i], i + 1)]})
            return "ok"

        def tag(j):
            cs[j % len(cs)].put_bucket_tagging(Bucket="lcrace", Tagging={
                "TagSet": [{"Key": "t", "Value": str(j)}]})
            return "tag"
        out = race([lambda i=i: put(i) for i in range(4)] +
                   [lambda j=j: tag(j) for j in range(12)])
        assert all(o in ("ok", "tag") + BUSY for o in out), (r, out)
        got = [lifecycle_id(cl, "lcrace") for cl in cs]
        if strict and "ok" in out:
            assert got[0] in names and out[names.index(got[0])] == "ok", (r, out, got)
        elif strict:
            assert got[0] == stands, (r, out, got)
        else:
            assert got[0] in names + [stands], (r, out, got)
        assert got == [got[0]] * len(cs), (r, out, got)
        stands = got[0]
        heads = [expiration_rule(cl, "lcrace", "k") for cl in cs]
        assert heads == [stands] * len(cs), (r, out, got, heads)


def test_racing_lifecycle_puts_every_node_answers_what_stands(server):
    """S3: a PutBucketLifecycleConfiguration replaces the whole configuration, and every
    later GET answers the one in force. Seen on a 4-node cluster (3 runs in 4 within 20
    rounds): PUTs stored their configuration, then failed to name it in the bucket record
    (refused by the racing rewrites) and answered 503; GET answered the stored one while
    every node's HEAD kept the x-amz-expiration of the one before it, cached under the
    record's unchanged entry, until the next PUT that got through."""
    lifecycle_race(server, 20, strict=False)


def test_racing_lifecycle_puts_answer_what_they_stored(server):
    """The same race: a configuration that stands is one whose PUT answered 200 (a PUT
    answered 503 did not store it). On the code before, every PUT whose rewrite of the
    record was refused answered 503 with its configuration stored (most runs); later, a
    racing tag rewrite carried a refused PUT's entry over when its head landed between the
    rewrite's two reads (2-3 runs in 10 on 4 nodes; obj_rewrite.c, session 23); last, a
    PUT whose rewrite stood on k stores was undone by its writer after a tag rewrite had
    read it and carried its entry (1 run in 26 under ASan; a rewrite that stands is now
    filled in, never undone: fill_rewrite, session 24)."""
    lifecycle_race(server, 20, strict=True)


def delete_objects(server, bucket, keys, quiet):
    """POST ?delete with <Quiet>quiet</Quiet> as given (None: none): (status, body)."""
    objs = "".join("<Object><Key>%s</Key></Object>" % k for k in keys)
    q = "" if quiet is None else "<Quiet>%s</Quiet>" % quiet
    body = ("<Delete>%s%s</Delete>" % (q, objs)).encode()
    st, out, _ = signed_request(server.port, "POST", "/%s?delete" % bucket, body=body,
                                headers={"Content-MD5": md5_b64(body)})
    return st, out


def test_delete_objects_quiet_is_a_boolean(server):
    """DeleteObjects (AWS API reference): Quiet is a Boolean; in quiet mode the response
    names only the keys whose delete failed. An XML Schema boolean is true, false, 1 or 0
    (whitespace collapsed); S3 takes "True" as well (minio-py sent it, and AWS answered as
    for true: minio/minio-py#1185). Anything else does not validate against the schema:
    400 MalformedXML, nothing deleted. "yes" was read as false, and every key reported."""
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="quiet")
    for quiet, loud in (("true", False), ("TRUE", False), ("True", False), (" true\n", False),
                        ("1", False), ("false", True), ("False", True), ("0", True),
                        (None, True)):
        c.put_object(Bucket="quiet", Key="k", Body=b"x")
        st, out = delete_objects(server, "quiet", ["k"], quiet)
        assert st == 200, (quiet, st, out)
        assert (b"<Deleted>" in out) == loud, (quiet, out)
        assert "Contents" not in c.list_objects_v2(Bucket="quiet"), quiet
    c.put_object(Bucket="quiet", Key="k", Body=b"x")
    for quiet in ("yes", "", "on", "t", "truee", "2"):
        st, out = delete_objects(server, "quiet", ["k"], quiet)
        assert st == 400 and code_of(out) == "MalformedXML", (quiet, st, out)
    body = b"<Delete><Quiet>true</Quiet><Quiet>true</Quiet><Object><Key>k</Key></Object></Delete>"
    st, out, _ = signed_request(server.port, "POST", "/quiet?delete", body=body,
                                headers={"Content-MD5": md5_b64(body)})
    assert st == 400 and code_of(out) == "MalformedXML", (st, out)
    assert [o["Key"] for o in c.list_objects_v2(Bucket="quiet")["Contents"]] == ["k"]


def put_tagging(server, path, tags_xml):
    body = ("<Tagging><TagSet>%s</TagSet></Tagging>" % tags_xml).encode()
    st, out, _ = signed_request(server.port, "PUT", path + "?tagging", body=body,
                                headers={"Content-MD5": md5_b64(body)})
    return st, out


def test_a_tag_needs_a_value(server):
    """S3's Tag (API reference, data type Tag): Key and Value are both required, so a Tag
    without a Value does not validate: 400 MalformedXML, the tags as they were, for
    PutObjectTagging and PutBucketTagging alike. An empty <Value/> is a value (""). The
    x-amz-tagging header is URL query form, where "k" alone is k with an empty value. A Tag
    without a Value was taken as one with an empty value."""
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="tagval")
    c.put_object(Bucket="tagval", Key="o", Body=b"x")
    c.put_object_tagging(Bucket="tagval", Key="o",
                         Tagging={"TagSet": [{"Key": "was", "Value": "here"}]})
    c.put_bucket_tagging(Bucket="tagval", Tagging={"TagSet": [{"Key": "was", "Value": "here"}]})
    for path in ("/tagval/o", "/tagval"):
        for bad in ("<Tag><Key>k</Key></Tag>",
                    "<Tag><Key>a</Key><Value>1</Value></Tag><Tag><Key>k</Key></Tag>"):
            st, out = put_tagging(server, path, bad)
            assert st == 400 and code_of(out) == "MalformedXML", (path, bad, st, out)
    assert c.get_object_tagging(Bucket="tagval", Key="o")["TagSet"] == [
        {"Key": "was", "Value": "here"}]
    assert c.get_bucket_tagging(Bucket="tagval")["TagSet"] == [{"Key": "was", "Value": "here"}]
    for path in ("/tagval/o", "/tagval"):
        st, out = put_tagging(server, path, "<Tag><Key>e</Key><Value/></Tag>"
                              "<Tag><Key>f</Key><Value></Value></Tag>")
        assert st in (200, 204), (path, st, out)
    want = [{"Key": "e", "Value": ""}, {"Key": "f", "Value": ""}]
    assert c.get_object_tagging(Bucket="tagval", Key="o")["TagSet"] == want
    assert c.get_bucket_tagging(Bucket="tagval")["TagSet"] == want
    st, out, _ = signed_request(server.port, "PUT", "/tagval/h", body=b"x",
                                headers={"x-amz-tagging": "k&v=1&e="})
    assert st == 200, out
    assert c.get_object_tagging(Bucket="tagval", Key="h")["TagSet"] == [
        {"Key": "k", "Value": ""}, {"Key": "v", "Value": "1"}, {"Key": "e", "Value": ""}]


def test_virtual_host_bucket_is_read_without_case(datadir):
    """A host name is case-insensitive (RFC 4343), and S3 reads the bucket of a Host so (its
    VirtualHosting guide: a Host outside its endpoints names "the lowercase value of the Host
    header"); bucket names have no uppercase letter. Host: MyBucket.s3.localhost (or all
    uppercase) named no bucket: 404 NoSuchBucket."""
    s = Server(datadir, extra=["--domain", "s3.localhost"]).start()
    try:
        c = s3_client(s.endpoint)
        c.create_bucket(Bucket="mybucket")
        st, out, _ = signed_request(s.port, "PUT", "/k", body=b"vh",
                                    host="MyBucket.s3.localhost:%d" % s.port)
        assert st == 200, out
        assert c.get_object(Bucket="mybucket", Key="k")["Body"].read() == b"vh"
        for host in ("MYBUCKET.S3.LOCALHOST", "myBucket.S3.Localhost", "mybucket.s3.localhost"):
            st, out, _ = signed_request(s.port, "GET", "/k", host="%s:%d" % (host, s.port))
            assert st == 200 and out == b"vh", (host, st, out)
            st, out, _ = signed_request(s.port, "GET", "/?list-type=2", host=host)
            assert st == 200 and b"<Name>mybucket</Name>" in out, (host, st, out)
        # A bucket that does not exist is still NoSuchBucket, named as S3 would name it.
        st, out, _ = signed_request(s.port, "GET", "/k", host="Other.s3.localhost")
        assert st == 404 and code_of(out) == "NoSuchBucket", out
    finally:
        s.stop()
