"""ACL grants to users and groups against a real warmlaked: each permission granted to the
second user (AK2) on a bucket and on an object, with everything it allows and everything it
does not; grants from x-amz-grant-* headers on CreateBucket, PutObject, CopyObject and
CreateMultipartUpload; AccessControlPolicy bodies round trip in order; refusals (unknown
user, e-mail grantee, LogDelivery, no or another Owner, too many grants, canned ACL with
grant headers); revoking all; the AllUsers and AuthenticatedUsers groups, anonymous
requests included. The owner's access never depends on the ACL."""
import hashlib
import os
import urllib.error
import urllib.request

import botocore
import pytest

from conftest import AK, AK2, SK2, run_under_newest_botocore, s3_client, signed_request

ALL = "http://acs.amazonaws.com/groups/global/AllUsers"
AUTH = "http://acs.amazonaws.com/groups/global/AuthenticatedUsers"
LOG = "http://acs.amazonaws.com/groups/s3/LogDelivery"
ID2 = 'id="%s"' % AK2
GRANTEE_GROUP = (b'<Grantee xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
                 b'xsi:type="Group">')


def anon_client(endpoint):
    import boto3
    from botocore import UNSIGNED
    from botocore.config import Config
    return boto3.session.Session().client(
        "s3", endpoint_url=endpoint, region_name="us-east-1",
        config=Config(signature_version=UNSIGNED, s3={"addressing_style": "path"},
                      retries={"max_attempts": 2}))


def code(fn, *args, **kw):
    """'ok', or the error code of the S3 error the call got ('403' for a HEAD)."""
    try:
        fn(*args, **kw)
        return "ok"
    except botocore.exceptions.ClientError as e:
        return e.response["Error"]["Code"]


def anon(server, method, path, body=None):
    req = urllib.request.Request(server.endpoint + path, data=body, method=method)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def grants_of(acl):
    return [(g["Grantee"].get("ID") or g["Grantee"].get("URI"), g["Permission"])
            for g in acl["Grants"]]


def owner_of(c, bucket):
    return c.get_bucket_acl(Bucket=bucket)["Owner"]


def bucket_ops(c, alt, b):
    """What alt can do at bucket level (and with objects as a bucket permission says)."""
    c.put_object(Bucket=b, Key="victim", Body=b"v")
    return {
        "list": code(alt.list_objects, Bucket=b),
        "list2": code(alt.list_objects_v2, Bucket=b),
        "head": code(alt.head_bucket, Bucket=b),
        "get_acl": code(alt.get_bucket_acl, Bucket=b),
        "put": code(alt.put_object, Bucket=b, Key="new", Body=b"n"),
        "delete": code(alt.delete_object, Bucket=b, Key="victim"),
        "get_obj": code(alt.get_object, Bucket=b, Key="victim"),
        "copy": code(alt.copy_object, Bucket=b, Key="cp", CopySource={"Bucket": b, "Key": "victim"}),
        "mpu": code(whole_upload, alt, b),
        "tagging": code(alt.get_bucket_tagging, Bucket=b),
        "versions": code(alt.list_object_versions, Bucket=b),
        "delete_bucket": code(alt.delete_bucket, Bucket=b),
        # Last: it may change the ACL (WRITE_ACP). The owner is named, as S3 requires.
        "put_acl": code(alt.put_bucket_acl, Bucket=b, AccessControlPolicy={
            "Owner": owner_of(c, b), "Grants": [
                {"Grantee": {"Type": "CanonicalUser", "ID": AK2}, "Permission": "READ_ACP"}]}),
    }


MPU_PARTS = [bytes(range(256)) * (5 << 12), b"tail"]  # 5 MiB and a last part


def whole_upload(alt, b, initiator=AK2):
    """A multipart upload of key "m" by alt: create, two parts, Complete. A WRITE grantee's
    large upload is multipart (aws s3 cp does it past 8 MiB), so WRITE covers it, as S3's
    s3:PutObject does; its initiator may list its parts (S3's default for
    s3:ListMultipartUploadParts: the bucket owner and the initiator)."""
    up = alt.create_multipart_upload(Bucket=b, Key="m")["UploadId"]
    tags = [alt.upload_part(Bucket=b, Key="m", UploadId=up, PartNumber=i + 1, Body=p)["ETag"]
            for i, p in enumerate(MPU_PARTS)]
    lp = alt.list_parts(Bucket=b, Key="m", UploadId=up)
    assert [p["ETag"] for p in lp["Parts"]] == tags and lp["Initiator"]["ID"] == initiator
    gone = alt.create_multipart_upload(Bucket=b, Key="m")["UploadId"]
    alt.abort_multipart_upload(Bucket=b, Key="m", UploadId=gone)
    alt.complete_multipart_upload(Bucket=b, Key="m", UploadId=up, MultipartUpload={
        "Parts": [{"PartNumber": i + 1, "ETag": t} for i, t in enumerate(tags)]})


DENIED_BUCKET = {"list": "AccessDenied", "list2": "AccessDenied", "head": "403",
                 "get_acl": "AccessDenied", "put": "AccessDenied", "delete": "AccessDenied",
                 "get_obj": "AccessDenied", "copy": "AccessDenied", "mpu": "AccessDenied",
                 "tagging": "AccessDenied", "versions": "AccessDenied",
                 "delete_bucket": "AccessDenied", "put_acl": "AccessDenied"}


@pytest.mark.parametrize("perm,allowed", [
    ("READ", {"list", "list2", "head", "versions"}),
    ("WRITE", {"put", "delete", "mpu"}),
    ("READ_ACP", {"get_acl"}),
    ("WRITE_ACP", {"put_acl"}),
    ("FULL_CONTROL", {"list", "list2", "head", "put", "delete", "get_acl", "put_acl", "mpu",
                      "versions"}),
    ("NONE", set()),
])
def test_bucket_permission(server, perm, allowed):
    c, alt = s3_client(server.endpoint), s3_client(server.endpoint, AK2, SK2)
    b = "bp-" + perm.lower().replace("_", "-")
    c.create_bucket(Bucket=b)
    if perm != "NONE":
        c.put_bucket_acl(Bucket=b, **{"Grant" + {"READ": "Read", "WRITE": "Write",
                                                  "READ_ACP": "ReadACP", "WRITE_ACP": "WriteACP",
                                                  "FULL_CONTROL": "FullControl"}[perm]: ID2})
        assert grants_of(c.get_bucket_acl(Bucket=b)) == [(AK2, perm)]
    got = bucket_ops(c, alt, b)
    want = {k: ("ok" if k in allowed else v) for k, v in DENIED_BUCKET.items()}
    if {"list", "delete"} <= allowed:
        # alt deleted it, and may list the bucket (a copy's source is read as a GET)
        want["get_obj"] = want["copy"] = "NoSuchKey"
    assert got == want
    # The owner's access is as it was, whatever alt did; what alt wrote is alt's (S3's
    # ObjectWriter: the bucket's owner reads it only as granted).
    assert c.list_objects(Bucket=b)["ResponseMetadata"]["HTTPStatusCode"] == 200
    if "put" in allowed:
        assert alt.get_object(Bucket=b, Key="new")["Body"].read() == b"n"
        assert code(c.get_object, Bucket=b, Key="new") == "AccessDenied"
        got = alt.get_object(Bucket=b, Key="m")["Body"].read()
        assert hashlib.sha256(got).digest() == hashlib.sha256(b"".join(MPU_PARTS)).digest()
        assert c.list_multipart_uploads(Bucket=b).get("Uploads", []) == []
        assert code(c.head_object, Bucket=b, Key="victim") == "404"
    else:
        assert c.get_object(Bucket=b, Key="victim")["Body"].read() == b"v"
    if "put_acl" in allowed:
        assert grants_of(c.get_bucket_acl(Bucket=b)) == [(AK2, "READ_ACP")]
    # Nothing reaches a bucket without the grant, nor anonymous requests.
    c.create_bucket(Bucket=b + "-x")
    assert bucket_ops(c, alt, b + "-x") == DENIED_BUCKET
    assert anon(server, "GET", "/" + b)[0] == 403
    assert anon(server, "PUT", "/%s/anon" % b, b"a")[0] == 403


def object_ops(c, alt, b, k):
    return {
        "get": code(alt.get_object, Bucket=b, Key=k),
        "head": code(alt.head_object, Bucket=b, Key=k),
        "get_acl": code(alt.get_object_acl, Bucket=b, Key=k),
        "tagging": code(alt.get_object_tagging, Bucket=b, Key=k),
        "overwrite": code(alt.put_object, Bucket=b, Key=k, Body=b"over"),
        "delete": code(alt.delete_object, Bucket=b, Key=k),
        "list": code(alt.list_objects, Bucket=b),
        # A copy into alt's own bucket: as a GET of the source (S3: READ on it suffices).
        "copy": code(alt.copy_object, Bucket=own_bucket(alt), Key="copied-" + k,
                     CopySource={"Bucket": b, "Key": k}),
        "part_copy": code(part_copy, alt, b, k),
        "put_acl": code(alt.put_object_acl, Bucket=b, Key=k, ACL="public-read"),  # (last)
    }


def own_bucket(alt):
    try:
        alt.create_bucket(Bucket="alt-own")
    except botocore.exceptions.ClientError as e:
        assert e.response["Error"]["Code"] == "BucketAlreadyOwnedByYou"
    return "alt-own"


def part_copy(alt, b, k):
    up = alt.create_multipart_upload(Bucket=own_bucket(alt), Key="pc-" + k)["UploadId"]
    try:
        return alt.upload_part_copy(Bucket="alt-own", Key="pc-" + k, UploadId=up, PartNumber=1,
                                    CopySource={"Bucket": b, "Key": k})
    finally:
        alt.abort_multipart_upload(Bucket="alt-own", Key="pc-" + k, UploadId=up)


DENIED_OBJECT = {"get": "AccessDenied", "head": "403", "get_acl": "AccessDenied",
                 "tagging": "AccessDenied", "overwrite": "AccessDenied",
                 "delete": "AccessDenied", "list": "AccessDenied", "put_acl": "AccessDenied",
                 "copy": "AccessDenied", "part_copy": "AccessDenied"}


@pytest.mark.parametrize("perm,allowed", [
    ("READ", {"get", "head", "copy", "part_copy"}),
    ("WRITE", set()),  # nothing on an object, as S3
    ("READ_ACP", {"get_acl"}),
    ("WRITE_ACP", {"put_acl"}),
    ("FULL_CONTROL", {"get", "head", "get_acl", "put_acl", "copy", "part_copy"}),
])
def test_object_permission(server, perm, allowed):
    c, alt = s3_client(server.endpoint), s3_client(server.endpoint, AK2, SK2)
    b = "op-" + perm.lower().replace("_", "-")
    c.create_bucket(Bucket=b)
    c.put_object(Bucket=b, Key="o", Body=b"data")
    c.put_object(Bucket=b, Key="other", Body=b"other")
    c.put_object_acl(Bucket=b, Key="o", **{"Grant" + {
        "READ": "Read", "WRITE": "Write", "READ_ACP": "ReadACP", "WRITE_ACP": "WriteACP",
        "FULL_CONTROL": "FullControl"}[perm]: ID2})
    assert grants_of(c.get_object_acl(Bucket=b, Key="o")) == [(AK2, perm)]
    got = object_ops(c, alt, b, "o")
    want = {k: ("ok" if k in allowed else v) for k, v in DENIED_OBJECT.items()}
    assert got == want
    assert c.get_object(Bucket=b, Key="o")["Body"].read() == b"data"
    # The grant is the object's alone.
    assert object_ops(c, alt, b, "other") == DENIED_OBJECT
    if "get" in allowed:
        assert alt.get_object(Bucket=b, Key="o")["Body"].read() == b"data"
        assert alt.get_object(Bucket="alt-own", Key="copied-o")["Body"].read() == b"data"
    # A key that is not there: said only to whoever may list the bucket.
    assert code(alt.copy_object, Bucket=own_bucket(alt), Key="x",
                CopySource={"Bucket": b, "Key": "missing"}) == "AccessDenied"
    if "put_acl" in allowed:  # alt made it public-read
        assert anon(server, "GET", "/%s/o" % b) == (200, b"data")
    else:
        assert anon(server, "GET", "/%s/o" % b)[0] == 403


def test_header_grants_on_create_put_copy_and_multipart(server):
    c, alt = s3_client(server.endpoint), s3_client(server.endpoint, AK2, SK2)
    c.create_bucket(Bucket="hg-b", GrantRead=ID2, GrantReadACP='uri="%s"' % AUTH)
    assert grants_of(c.get_bucket_acl(Bucket="hg-b")) == [(AK2, "READ"), (AUTH, "READ_ACP")]
    assert code(alt.list_objects, Bucket="hg-b") == "ok"
    assert code(alt.get_bucket_acl, Bucket="hg-b") == "ok"
    assert anon(server, "GET", "/hg-b?acl")[0] == 403
    # PutObject: several grantees in one header, in the order sent.
    c.put_object(Bucket="hg-b", Key="p", Body=b"p",
                 GrantRead='id="%s", uri="%s"' % (AK2, ALL), GrantFullControl='id="%s"' % AK)
    assert grants_of(c.get_object_acl(Bucket="hg-b", Key="p")) == [
        (AK2, "READ"), (ALL, "READ"), (AK, "FULL_CONTROL")]
    assert alt.get_object(Bucket="hg-b", Key="p")["Body"].read() == b"p"
    assert anon(server, "GET", "/hg-b/p") == (200, b"p")
    # CopyObject: the copy gets the headers' grants, never the source's.
    c.copy_object(Bucket="hg-b", Key="cp", CopySource={"Bucket": "hg-b", "Key": "p"},
                  GrantReadACP=ID2)
    assert grants_of(c.get_object_acl(Bucket="hg-b", Key="cp")) == [(AK2, "READ_ACP")]
    assert code(alt.get_object, Bucket="hg-b", Key="cp") == "AccessDenied"
    assert code(alt.get_object_acl, Bucket="hg-b", Key="cp") == "ok"
    # CreateMultipartUpload: the completed object gets them.
    up = c.create_multipart_upload(Bucket="hg-b", Key="mp", GrantRead=ID2)["UploadId"]
    e = c.upload_part(Bucket="hg-b", Key="mp", UploadId=up, PartNumber=1, Body=b"m" * 100)["ETag"]
    c.complete_multipart_upload(Bucket="hg-b", Key="mp", UploadId=up, MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": e}]})
    assert alt.get_object(Bucket="hg-b", Key="mp")["Body"].read() == b"m" * 100
    assert grants_of(c.get_object_acl(Bucket="hg-b", Key="mp")) == [(AK2, "READ")]
    # A canned ACL and grant headers together: 400 InvalidRequest, nothing written.
    assert code(c.put_object, Bucket="hg-b", Key="both", Body=b"x", ACL="public-read",
                GrantRead=ID2) == "InvalidRequest"
    assert code(c.head_object, Bucket="hg-b", Key="both") == "404"
    assert code(c.create_bucket, Bucket="hg-both-b", ACL="private",
                GrantRead=ID2) == "InvalidRequest"
    assert code(c.head_bucket, Bucket="hg-both-b") == "404"
    assert code(c.put_bucket_acl, Bucket="hg-b", ACL="private", GrantRead=ID2) == "InvalidRequest"
    assert grants_of(c.get_bucket_acl(Bucket="hg-b")) == [(AK2, "READ"), (AUTH, "READ_ACP")]
    # Malformed grant headers.
    for bad in ('id=', 'user="%s"' % AK2, 'uri="http://example.com/group"', 'id="%s",' % AK2):
        st, body, _ = signed_request(server.port, "PUT", "/hg-b/bad", b"x",
                                     {"x-amz-grant-read": bad})
        assert st == 400 and b"InvalidArgument" in body, (bad, body)
    # A grant header S3 does not have is refused, not ignored.
    st, body, _ = signed_request(server.port, "PUT", "/hg-b/bad", b"x",
                                 {"x-amz-grant-everything": ID2})
    assert st == 501
    assert code(c.head_object, Bucket="hg-b", Key="bad") == "404"


def test_xml_grants_round_trip_in_order(server):
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="rt-b")
    c.put_object(Bucket="rt-b", Key="o", Body=b"o")
    owner = owner_of(c, "rt-b")
    grants = [
        {"Grantee": {"Type": "Group", "URI": AUTH}, "Permission": "WRITE_ACP"},
        {"Grantee": {"Type": "CanonicalUser", "ID": AK2}, "Permission": "FULL_CONTROL"},
        {"Grantee": {"Type": "Group", "URI": ALL}, "Permission": "READ"},
        {"Grantee": {"Type": "CanonicalUser", "ID": AK}, "Permission": "READ_ACP"},
        {"Grantee": {"Type": "CanonicalUser", "ID": AK2}, "Permission": "WRITE"},
    ]
    want = [(AUTH, "WRITE_ACP"), (AK2, "FULL_CONTROL"), (ALL, "READ"), (AK, "READ_ACP"),
            (AK2, "WRITE")]
    c.put_bucket_acl(Bucket="rt-b", AccessControlPolicy={"Owner": owner, "Grants": grants})
    got = c.get_bucket_acl(Bucket="rt-b")
    assert got["Owner"]["ID"] == AK and grants_of(got) == want
    assert [g["Grantee"]["Type"] for g in got["Grants"]] == [
        "Group", "CanonicalUser", "Group", "CanonicalUser", "CanonicalUser"]
    c.put_object_acl(Bucket="rt-b", Key="o", AccessControlPolicy={"Owner": owner, "Grants": grants})
    assert grants_of(c.get_object_acl(Bucket="rt-b", Key="o")) == want
    # What GetAcl returned goes back in as it is.
    back = c.get_object_acl(Bucket="rt-b", Key="o")
    c.put_object_acl(Bucket="rt-b", Key="o", AccessControlPolicy={
        "Owner": back["Owner"], "Grants": back["Grants"]})
    assert grants_of(c.get_object_acl(Bucket="rt-b", Key="o")) == want
    # A canned ACL's answer, put back as a body, is its grants (and still lets anyone read).
    c.put_object_acl(Bucket="rt-b", Key="o", ACL="public-read")
    canned = c.get_object_acl(Bucket="rt-b", Key="o")
    c.put_object_acl(Bucket="rt-b", Key="o", AccessControlPolicy={
        "Owner": canned["Owner"], "Grants": canned["Grants"]})
    assert grants_of(c.get_object_acl(Bucket="rt-b", Key="o")) == grants_of(canned)
    assert anon(server, "GET", "/rt-b/o") == (200, b"o")


def test_refusals(server):
    c, alt = s3_client(server.endpoint), s3_client(server.endpoint, AK2, SK2)
    c.create_bucket(Bucket="rf-b", GrantRead=ID2)
    c.put_object(Bucket="rf-b", Key="o", Body=b"o")
    owner = owner_of(c, "rf-b")

    def policy(grantee, perm="READ", own=owner):
        return {"Owner": own, "Grants": [{"Grantee": grantee, "Permission": perm}]}

    def err(fn, **kw):
        try:
            fn(**kw)
        except botocore.exceptions.ClientError as e:
            return (e.response["ResponseMetadata"]["HTTPStatusCode"],
                    e.response["Error"]["Code"], e.response["Error"].get("Message"))
        return "ok"

    for fn, kw in ((c.put_bucket_acl, {"Bucket": "rf-b"}),
                   (c.put_object_acl, {"Bucket": "rf-b", "Key": "o"})):
        # A user the node does not know: 400 InvalidArgument "Invalid id" (headers and body).
        assert err(fn, GrantRead='id="AKIANOSUCHUSER"', **kw) == (400, "InvalidArgument",
                                                                  "Invalid id")
        assert err(fn, AccessControlPolicy=policy(
            {"Type": "CanonicalUser", "ID": "AKIANOSUCHUSER"}), **kw)[:2] == (
                400, "InvalidArgument")
        assert err(fn, AccessControlPolicy=policy(
            {"Type": "CanonicalUser", "ID": AK2.lower()}), **kw)[:2] == (400, "InvalidArgument")
        # No e-mail addresses here.
        assert err(fn, GrantRead='emailAddress="someone@example.com"', **kw)[:2] == (
            400, "UnresolvableGrantByEmailAddress")
        assert err(fn, AccessControlPolicy=policy(
            {"Type": "AmazonCustomerByEmail", "EmailAddress": "someone@example.com"}),
            **kw)[:2] == (400, "UnresolvableGrantByEmailAddress")
        # LogDelivery: no logs to deliver.
        assert err(fn, GrantWrite='uri="%s"' % LOG, **kw)[:2] == (501, "NotImplemented")
        # The Owner must be the owner.
        assert err(fn, AccessControlPolicy=policy(
            {"Type": "Group", "URI": ALL}, own={"ID": AK2}), **kw)[:2] == (403, "AccessDenied")
    # None of it changed anything.
    assert grants_of(c.get_bucket_acl(Bucket="rf-b")) == [(AK2, "READ")]
    assert grants_of(c.get_object_acl(Bucket="rf-b", Key="o")) == [(AK, "FULL_CONTROL")]
    # Bodies: no Owner, malformed, more than 100 grants, a DTD.
    no_owner = (b'<AccessControlPolicy><AccessControlList><Grant>' + GRANTEE_GROUP + b'<URI>' +
                ALL.encode() + b'</URI></Grantee><Permission>READ</Permission></Grant>'
                b'</AccessControlList></AccessControlPolicy>')
    many = (b'<AccessControlPolicy><Owner><ID>' + AK.encode() + b'</ID></Owner>'
            b'<AccessControlList>' + (b'<Grant>' + GRANTEE_GROUP + b'<URI>' + ALL.encode() +
                                      b'</URI></Grantee><Permission>READ</Permission></Grant>') * 101 +
            b'</AccessControlList></AccessControlPolicy>')
    dtd = (b'<!DOCTYPE a [<!ENTITY e "' + AK.encode() + b'">]><AccessControlPolicy><Owner><ID>&e;'
           b'</ID></Owner></AccessControlPolicy>')
    bad_perm = (b'<AccessControlPolicy><Owner><ID>' + AK.encode() + b'</ID></Owner>'
                b'<AccessControlList><Grant>' + GRANTEE_GROUP + b'<URI>' + ALL.encode() + b'</URI></Grantee>'
                b'<Permission>EVERYTHING</Permission></Grant></AccessControlList>'
                b'</AccessControlPolicy>')
    # S3 requires Grantee's xsi:type (API reference, Grantee: Type, Required), naming the kind.
    untyped = (b'<AccessControlPolicy><Owner><ID>' + AK.encode() + b'</ID></Owner>'
               b'<AccessControlList><Grant><Grantee><URI>' + ALL.encode() + b'</URI></Grantee>'
               b'<Permission>READ</Permission></Grant></AccessControlList></AccessControlPolicy>')
    mistyped = untyped.replace(b'<Grantee>', GRANTEE_GROUP.replace(b'"Group"', b'"CanonicalUser"'))
    for body in (no_owner, many, dtd, bad_perm, b"<AccessControlPolicy>", untyped, mistyped):
        for path in ("/rf-b?acl", "/rf-b/o?acl"):
            st, resp, _ = signed_request(server.port, "PUT", path, body)
            assert st == 400 and b"MalformedACLError" in resp, (path, body[:60], resp)
    assert anon(server, "GET", "/rf-b/o")[0] == 403
    # 100 grants is S3's limit, and served.
    grant = (b'<Grant>' + GRANTEE_GROUP + b'<URI>' + ALL.encode() +
             b'</URI></Grantee><Permission>READ</Permission></Grant>')
    hundred = many.replace(grant * 101, grant * 100)
    st, resp, _ = signed_request(server.port, "PUT", "/rf-b/o?acl", hundred)
    assert st == 200, resp
    assert len(c.get_object_acl(Bucket="rf-b", Key="o")["Grants"]) == 100
    assert anon(server, "GET", "/rf-b/o") == (200, b"o")
    # Headers and a body together: refused as content the request does not take (S3's
    # UnexpectedContent), the ACL as it was.
    st, resp, _ = signed_request(server.port, "PUT", "/rf-b/o?acl", hundred,
                                 {"x-amz-grant-read": ID2})
    assert st == 400 and b"<Code>UnexpectedContent</Code>" in resp
    st, resp, _ = signed_request(server.port, "PUT", "/rf-b?acl", hundred,
                                 {"x-amz-acl": "private"})
    assert st == 400 and b"<Code>UnexpectedContent</Code>" in resp
    assert len(c.get_object_acl(Bucket="rf-b", Key="o")["Grants"]) == 100
    # Neither headers nor a body: the header S3 wants is missing.
    for path in ("/rf-b/o?acl", "/rf-b?acl"):
        st, resp, _ = signed_request(server.port, "PUT", path, b"")
        assert st == 400 and b"<Code>MissingSecurityHeader</Code>" in resp, (path, resp)
    assert len(c.get_object_acl(Bucket="rf-b", Key="o")["Grants"]) == 100
    # Too many grant headers.
    st, resp, _ = signed_request(server.port, "PUT", "/rf-b/o?acl", b"",
                                 {"x-amz-grant-read": ", ".join(['uri="%s"' % ALL] * 101)})
    assert st == 400 and b"InvalidArgument" in resp
    # A grantee alone cannot give the bucket away (another Owner), even with WRITE_ACP.
    c.put_bucket_acl(Bucket="rf-b", GrantWriteACP=ID2)
    assert code(alt.put_bucket_acl, Bucket="rf-b", AccessControlPolicy=policy(
        {"Type": "CanonicalUser", "ID": AK2}, "FULL_CONTROL", {"ID": AK2})) == "AccessDenied"
    assert grants_of(c.get_bucket_acl(Bucket="rf-b")) == [(AK2, "WRITE_ACP")]


def test_revoke_all(server):
    c, alt = s3_client(server.endpoint), s3_client(server.endpoint, AK2, SK2)
    c.create_bucket(Bucket="rv-b", GrantFullControl=ID2, GrantRead='uri="%s"' % ALL)
    c.put_object(Bucket="rv-b", Key="o", Body=b"o", GrantFullControl=ID2)
    assert code(alt.list_objects, Bucket="rv-b") == "ok"
    assert anon(server, "GET", "/rv-b")[0] == 200
    owner = owner_of(c, "rv-b")
    c.put_bucket_acl(Bucket="rv-b", AccessControlPolicy={"Owner": owner, "Grants": []})
    c.put_object_acl(Bucket="rv-b", Key="o", AccessControlPolicy={"Owner": owner, "Grants": []})
    assert c.get_bucket_acl(Bucket="rv-b").get("Grants", []) == []
    assert c.get_object_acl(Bucket="rv-b", Key="o").get("Grants", []) == []
    assert bucket_ops(c, alt, "rv-b") == DENIED_BUCKET
    assert object_ops(c, alt, "rv-b", "o") == DENIED_OBJECT
    assert anon(server, "GET", "/rv-b")[0] == 403
    # The owner keeps everything without any grant.
    assert c.get_object(Bucket="rv-b", Key="o")["Body"].read() == b"o"
    c.put_object(Bucket="rv-b", Key="n", Body=b"n")
    c.put_bucket_acl(Bucket="rv-b", ACL="private")
    assert grants_of(c.get_bucket_acl(Bucket="rv-b")) == [(AK, "FULL_CONTROL")]


def test_canned_acls_still_work(server):
    c, alt = s3_client(server.endpoint), s3_client(server.endpoint, AK2, SK2)
    c.create_bucket(Bucket="cn-b", ACL="public-read")
    c.put_object(Bucket="cn-b", Key="o", Body=b"o", ACL="authenticated-read")
    assert anon(server, "GET", "/cn-b")[0] == 200
    assert anon(server, "GET", "/cn-b/o")[0] == 403
    assert alt.get_object(Bucket="cn-b", Key="o")["Body"].read() == b"o"
    assert code(alt.get_object_acl, Bucket="cn-b", Key="o") == "AccessDenied"
    assert code(alt.get_bucket_acl, Bucket="cn-b") == "AccessDenied"
    assert code(alt.put_object, Bucket="cn-b", Key="n", Body=b"n") == "AccessDenied"
    c.put_bucket_acl(Bucket="cn-b", ACL="public-read-write")
    assert anon(server, "PUT", "/cn-b/anon", b"a")[0] == 200
    whole_upload(anon_client(server.endpoint), "cn-b", "anonymous")  # as large as any PUT
    got = c.get_object(Bucket="cn-b", Key="m")["Body"].read()
    assert hashlib.sha256(got).digest() == hashlib.sha256(b"".join(MPU_PARTS)).digest()
    assert grants_of(c.get_bucket_acl(Bucket="cn-b")) == [
        (ALL, "READ"), (ALL, "WRITE"), (AK, "FULL_CONTROL")]
    c.put_bucket_acl(Bucket="cn-b", ACL="private")
    assert anon(server, "GET", "/cn-b")[0] == 403
    assert code(alt.list_objects, Bucket="cn-b") == "AccessDenied"


def test_groups_and_anonymous(server):
    c, alt = s3_client(server.endpoint), s3_client(server.endpoint, AK2, SK2)
    a = anon_client(server.endpoint)
    c.create_bucket(Bucket="grp")
    c.put_object(Bucket="grp", Key="o", Body=b"o")
    # AuthenticatedUsers: any signed-in user, never an anonymous request.
    c.put_bucket_acl(Bucket="grp", GrantRead='uri="%s"' % AUTH)
    c.put_object_acl(Bucket="grp", Key="o", GrantRead='uri="%s"' % AUTH)
    assert code(alt.list_objects, Bucket="grp") == "ok"
    assert alt.get_object(Bucket="grp", Key="o")["Body"].read() == b"o"
    assert code(a.list_objects, Bucket="grp") == "AccessDenied"
    assert code(a.get_object, Bucket="grp", Key="o") == "AccessDenied"
    # AllUsers: anyone, each permission as granted.
    c.put_bucket_acl(Bucket="grp", GrantRead='uri="%s"' % ALL,
                     GrantReadACP='uri="%s"' % ALL)
    assert code(a.list_objects_v2, Bucket="grp") == "ok"
    assert code(a.head_bucket, Bucket="grp") == "ok"
    assert code(a.get_bucket_acl, Bucket="grp") == "ok"
    assert code(a.put_object, Bucket="grp", Key="w", Body=b"w") == "AccessDenied"
    assert code(a.get_object, Bucket="grp", Key="o") == "AccessDenied"  # object's own ACL
    assert code(a.get_object, Bucket="grp", Key="missing") == "NoSuchKey"  # may list
    c.put_bucket_acl(Bucket="grp", GrantWrite='uri="%s"' % ALL)
    assert code(a.put_object, Bucket="grp", Key="w", Body=b"w") == "ok"
    assert c.get_object(Bucket="grp", Key="w")["Body"].read() == b"w"
    assert code(a.delete_object, Bucket="grp", Key="w") == "ok"
    assert code(c.head_object, Bucket="grp", Key="w") == "404"
    assert code(a.list_objects, Bucket="grp") == "AccessDenied"
    assert code(a.get_object, Bucket="grp", Key="missing") == "AccessDenied"
    assert code(a.put_bucket_acl, Bucket="grp", ACL="public-read") == "AccessDenied"
    c.put_object_acl(Bucket="grp", Key="o", GrantRead='uri="%s"' % ALL,
                     GrantWriteACP='uri="%s"' % ALL)
    assert a.get_object(Bucket="grp", Key="o")["Body"].read() == b"o"
    assert code(a.get_object_acl, Bucket="grp", Key="o") == "AccessDenied"
    assert code(a.put_object_acl, Bucket="grp", Key="o", ACL="private") == "ok"
    assert code(a.get_object, Bucket="grp", Key="o") == "AccessDenied"
    # Tags and the bucket itself stay the owner's, whatever WRITE says; a multipart upload
    # is WRITE's (whole_upload), its listing READ's, its abort its initiator's; a copy needs
    # the source's READ besides.
    c.put_bucket_acl(Bucket="grp", GrantFullControl='uri="%s"' % ALL)
    up = a.create_multipart_upload(Bucket="grp", Key="m")["UploadId"]
    ups = a.list_multipart_uploads(Bucket="grp")["Uploads"]
    assert [(u["UploadId"], u["Initiator"]["ID"], u["Owner"]["ID"]) for u in ups] == [
        (up, "anonymous", AK)]
    assert code(alt.abort_multipart_upload, Bucket="grp", Key="m", UploadId=up) == "AccessDenied"
    a.abort_multipart_upload(Bucket="grp", Key="m", UploadId=up)
    assert code(alt.copy_object, Bucket="grp", Key="cp",
                CopySource={"Bucket": "grp", "Key": "o"}) == "AccessDenied"
    assert code(alt.put_bucket_tagging, Bucket="grp",
                Tagging={"TagSet": [{"Key": "k", "Value": "v"}]}) == "AccessDenied"
    assert code(alt.delete_bucket, Bucket="grp") == "AccessDenied"
    # A bucket that is not there is said to anyone reading it.
    assert code(a.list_objects, Bucket="no-such-grp") == "NoSuchBucket"


def test_versions_keep_their_own_acl(server):
    c, alt = s3_client(server.endpoint), s3_client(server.endpoint, AK2, SK2)
    c.create_bucket(Bucket="vg-b")
    c.put_bucket_versioning(Bucket="vg-b", VersioningConfiguration={"Status": "Enabled"})
    v1 = c.put_object(Bucket="vg-b", Key="o", Body=b"one", GrantRead=ID2)["VersionId"]
    v2 = c.put_object(Bucket="vg-b", Key="o", Body=b"two")["VersionId"]
    assert code(alt.get_object, Bucket="vg-b", Key="o") == "AccessDenied"
    assert alt.get_object(Bucket="vg-b", Key="o", VersionId=v1)["Body"].read() == b"one"
    assert code(alt.get_object, Bucket="vg-b", Key="o", VersionId=v2) == "AccessDenied"
    # WRITE deletes the current version only (a delete marker); versions stay the owner's.
    c.put_bucket_acl(Bucket="vg-b", GrantWrite=ID2)
    assert code(alt.delete_object, Bucket="vg-b", Key="o", VersionId=v1) == "AccessDenied"
    assert code(alt.delete_object, Bucket="vg-b", Key="o") == "ok"
    assert c.get_object(Bucket="vg-b", Key="o", VersionId=v2)["Body"].read() == b"two"


def slow_put(server, ak, sk, path, body):
    """A signed PUT whose body is held back after 5 bytes: returns finish(), which sends the
    rest and gives the status. The ACL it changes may change meanwhile."""
    import hashlib
    import http.client
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    class Signer(S3SigV4Auth):
        def payload(self, request):
            return hashlib.sha256(body).hexdigest()
    host = "127.0.0.1:%d" % server.port
    req = AWSRequest(method="PUT", url="http://%s%s" % (host, path), data=b"", headers={})
    Signer(Credentials(ak, sk), "s3", "us-east-1").add_auth(req)
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    conn.putrequest("PUT", path, skip_host=True, skip_accept_encoding=True)
    conn.putheader("Host", host)
    for k, v in req.headers.items():
        conn.putheader(k, v)
    conn.putheader("Content-Length", str(len(body)))
    conn.endheaders()
    conn.send(body[:5])

    def finish():
        conn.send(body[5:])
        r = conn.getresponse()
        r.read()
        conn.close()
        return r.status
    return finish


def test_acl_changes_are_authorized_at_the_commit(server):
    """A grantee's PutBucketAcl / PutObjectAcl is decided on the ACL as it is when the change
    commits, not when the request arrived: a WRITE_ACP revoked, or a new version written,
    while the body was on its way does not let it through (a probe gave itself FULL_CONTROL
    back that way, and published a newer private version)."""
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="toctou")
    me = 'id="%s"' % AK
    c.put_bucket_acl(Bucket="toctou", GrantFullControl=me, GrantWriteACP=ID2)
    doc = ('<AccessControlPolicy><Owner><ID>%s</ID></Owner><AccessControlList>'
           '<Grant><Grantee xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
           'xsi:type="CanonicalUser"><ID>%s</ID></Grantee><Permission>FULL_CONTROL'
           '</Permission></Grant></AccessControlList></AccessControlPolicy>' % (AK, AK2)).encode()
    finish = slow_put(server, AK2, SK2, "/toctou?acl", doc)
    c.put_bucket_acl(Bucket="toctou", ACL="private")
    assert finish() == 403
    assert AK2 not in [g for g, _ in grants_of(c.get_bucket_acl(Bucket="toctou"))]
    # An object: granted on one version, overwritten (private) while the body comes.
    c.put_object(Bucket="toctou", Key="o", Body=b"old", GrantWriteACP=ID2, GrantFullControl=me)
    finish = slow_put(server, AK2, SK2, "/toctou/o?acl", doc)
    c.put_object(Bucket="toctou", Key="o", Body=b"NEW-PRIVATE")
    assert finish() == 403
    alt = s3_client(server.endpoint, AK2, SK2)
    assert code(alt.get_object, Bucket="toctou", Key="o") == "AccessDenied"
    # Not changed meanwhile: the grant holds.
    c.put_object(Bucket="toctou", Key="p", Body=b"p", GrantWriteACP=ID2, GrantFullControl=me)
    finish = slow_put(server, AK2, SK2, "/toctou/p?acl", doc)
    assert finish() == 200
    assert alt.get_object(Bucket="toctou", Key="p")["Body"].read() == b"p"


def test_bucket_owner_enforced_disables_acls(server):
    """x-amz-object-ownership: BucketOwnerEnforced disables the bucket's ACLs, as in S3
    (object-ownership-error-responses): a PUT may name bucket-owner-full-control or no ACL,
    anything else (canned, grants, an XML policy granting more) is 400
    AccessControlListNotSupported; such a bucket created with a public ACL is 400
    InvalidBucketAclWithObjectOwnership. Before, the setting was taken and ignored: a
    public-read object in it was readable by anyone."""
    c = s3_client(server.endpoint)
    c.create_bucket(Bucket="enforced", ObjectOwnership="BucketOwnerEnforced")
    assert code(c.put_object, Bucket="enforced", Key="pub", Body=b"secret",
                ACL="public-read") == "AccessControlListNotSupported"
    assert code(c.head_object, Bucket="enforced", Key="pub") == "404"  # nothing stored
    assert code(c.put_object, Bucket="enforced", Key="k", Body=b"secret",
                GrantRead='uri="http://acs.amazonaws.com/groups/global/AllUsers"') == \
        "AccessControlListNotSupported"
    c.put_object(Bucket="enforced", Key="k", Body=b"secret")
    c.put_object(Bucket="enforced", Key="k2", Body=b"two", ACL="bucket-owner-full-control")
    assert anon(server, "GET", "/enforced/k")[0] == 403
    assert code(c.put_object_acl, Bucket="enforced", Key="k", ACL="public-read") == \
        "AccessControlListNotSupported"
    assert code(c.put_bucket_acl, Bucket="enforced", ACL="public-read") == \
        "AccessControlListNotSupported"
    assert code(c.copy_object, Bucket="enforced", Key="k3", ACL="public-read-write",
                CopySource={"Bucket": "enforced", "Key": "k"}) == "AccessControlListNotSupported"
    acl = c.get_object_acl(Bucket="enforced", Key="k")
    me = acl["Owner"]["ID"]
    assert grants_of(acl) == [(me, "FULL_CONTROL")]
    # An XML policy of the owner's full control alone is what the bucket has: taken.
    policy = {"Owner": {"ID": me}, "Grants": [
        {"Grantee": {"Type": "CanonicalUser", "ID": me}, "Permission": "FULL_CONTROL"}]}
    c.put_object_acl(Bucket="enforced", Key="k", AccessControlPolicy=policy)
    policy["Grants"].append({"Grantee": {"Type": "Group", "URI":
                                         "http://acs.amazonaws.com/groups/global/AllUsers"},
                             "Permission": "READ"})
    assert code(c.put_object_acl, Bucket="enforced", Key="k", AccessControlPolicy=policy) == \
        "AccessControlListNotSupported"
    assert code(c.put_bucket_acl, Bucket="enforced", AccessControlPolicy=policy) == \
        "AccessControlListNotSupported"
    assert anon(server, "GET", "/enforced/k")[0] == 403
    assert grants_of(c.get_bucket_acl(Bucket="enforced")) == [(me, "FULL_CONTROL")]
    assert c.get_object(Bucket="enforced", Key="k")["Body"].read() == b"secret"
    # Created with a public ACL: refused, and no bucket made.
    assert code(c.create_bucket, Bucket="enforced-pub", ObjectOwnership="BucketOwnerEnforced",
                ACL="public-read") == "InvalidBucketAclWithObjectOwnership"
    assert code(c.head_bucket, Bucket="enforced-pub") == "404"
    # Buckets created without the setting keep their ACLs.
    c.create_bucket(Bucket="acls-on")
    c.put_object(Bucket="acls-on", Key="pub", Body=b"open", ACL="public-read")
    assert anon(server, "GET", "/acls-on/pub") == (200, b"open")


def test_newest_botocore():
    run_under_newest_botocore("test_s3_acl_grants.py")


def sha(b):
    return hashlib.sha256(b).hexdigest()


def test_a_writer_owns_what_it_writes_into_anothers_bucket(server):
    """S3's ObjectWriter ownership, the setting of a bucket created without one: a signed-in
    writer into another's bucket owns the object, may read it and its ACL, and sets its ACL;
    bucket-owner-read / bucket-owner-full-control grant the bucket's owner READ / FULL_CONTROL.
    Objects written by another user used to be the bucket owner's: the writer could not read
    back (403) what it had just written, nor its ACL, and the ACL shown named the bucket owner
    alone (a conformance sweep: s3-tests' bucketownerread / bucketownerfullcontrol). Under
    BucketOwnerPreferred the bucket's owner owns what it is given full control of; under
    BucketOwnerEnforced all. The bucket's owner keeps its access to every object."""
    c = s3_client(server.endpoint)
    alt = s3_client(server.endpoint, AK2, SK2)
    c.create_bucket(Bucket="writers", GrantWrite=ID2, GrantFullControl='id="%s"' % AK)
    # No setting given: S3's answer for a bucket without ownership controls (whose writers
    # own what they write); given, it is said.
    assert code(c.get_bucket_ownership_controls,
                Bucket="writers") == "OwnershipControlsNotFoundError"
    c.create_bucket(Bucket="writers2", ObjectOwnership="ObjectWriter")
    assert c.get_bucket_ownership_controls(Bucket="writers2")["OwnershipControls"]["Rules"] == [
        {"ObjectOwnership": "ObjectWriter"}]
    bodies = {}
    for key, acl in (("bor", "bucket-owner-read"), ("bofc", "bucket-owner-full-control"),
                     ("plain", None)):
        bodies[key] = os.urandom(5000)
        kw = {"ACL": acl} if acl else {}
        alt.put_object(Bucket="writers", Key=key, Body=bodies[key], **kw)
    c.put_object(Bucket="writers", Key="mine", Body=b"the owner's")
    # The writer reads back what it wrote, and its ACL; the bucket's owner reads it as the
    # object's ACL grants (S3's ObjectWriter), the bucket-owner-* ACLs there for that.
    for key, body in bodies.items():
        assert sha(alt.get_object(Bucket="writers", Key=key)["Body"].read()) == sha(body)
        alt.head_object(Bucket="writers", Key=key)
        if key != "plain":
            assert sha(c.get_object(Bucket="writers", Key=key)["Body"].read()) == sha(body)
    assert code(c.get_object, Bucket="writers", Key="plain") == "AccessDenied"
    assert code(c.head_object, Bucket="writers", Key="plain") == "403"
    assert code(c.get_object_acl, Bucket="writers", Key="plain") == "AccessDenied"
    assert code(c.get_object_acl, Bucket="writers", Key="bor") == "AccessDenied"  # READ only
    assert code(c.put_object_acl, Bucket="writers", Key="plain",
                ACL="bucket-owner-full-control") == "AccessDenied"
    assert code(c.copy_object, Bucket="writers", Key="stolen",
                CopySource={"Bucket": "writers", "Key": "plain"}) == "AccessDenied"
    assert code(c.get_object_tagging, Bucket="writers", Key="bofc") == "AccessDenied"
    acl = alt.get_object_acl(Bucket="writers", Key="bor")
    assert acl["Owner"]["ID"] == AK2
    assert grants_of(acl) == [(AK2, "FULL_CONTROL"), (AK, "READ")]
    acl = c.get_object_acl(Bucket="writers", Key="bofc")
    assert acl["Owner"]["ID"] == AK2
    assert grants_of(acl) == [(AK2, "FULL_CONTROL"), (AK, "FULL_CONTROL")]
    assert grants_of(alt.get_object_acl(Bucket="writers", Key="plain")) == [(AK2, "FULL_CONTROL")]
    # Not another's object: alt has no READ on the bucket owner's.
    assert code(alt.get_object, Bucket="writers", Key="mine") == "AccessDenied"
    # The owner in listings is each object's.
    owners = {o["Key"]: o["Owner"]["ID"] for o in c.list_objects(Bucket="writers")["Contents"]}
    assert owners == {"bor": AK2, "bofc": AK2, "plain": AK2, "mine": AK}
    owners = {o["Key"]: o["Owner"]["ID"]
              for o in c.list_object_versions(Bucket="writers")["Versions"]}
    assert owners["plain"] == AK2 and owners["mine"] == AK
    # The writer sets its object's ACL; a body must name it as the Owner, not the bucket's.
    alt.put_object_acl(Bucket="writers", Key="plain", ACL="public-read")
    assert grants_of(alt.get_object_acl(Bucket="writers", Key="plain")) == [
        (ALL, "READ"), (AK2, "FULL_CONTROL")]
    policy = {"Owner": {"ID": AK2}, "Grants": [
        {"Grantee": {"Type": "CanonicalUser", "ID": AK2}, "Permission": "FULL_CONTROL"},
        {"Grantee": {"Type": "CanonicalUser", "ID": AK}, "Permission": "READ"}]}
    alt.put_object_acl(Bucket="writers", Key="plain", AccessControlPolicy=policy)
    assert c.get_object(Bucket="writers", Key="plain")["Body"].read() == bodies["plain"]
    assert code(c.put_object_acl, Bucket="writers", Key="plain",
                AccessControlPolicy=policy) == "AccessDenied"  # READ is not WRITE_ACP
    policy["Owner"]["ID"] = AK
    assert code(alt.put_object_acl, Bucket="writers", Key="plain",
                AccessControlPolicy=policy) == "AccessDenied"
    assert alt.get_object_acl(Bucket="writers", Key="plain")["Owner"]["ID"] == AK2
    # A multipart upload's object is its writer's too.
    up = alt.create_multipart_upload(Bucket="writers", Key="mpu")["UploadId"]
    part = os.urandom(6 << 20)
    e1 = alt.upload_part(Bucket="writers", Key="mpu", UploadId=up, PartNumber=1,
                         Body=part)["ETag"]
    # The bucket's owner lists it as the writer's.
    mine = [u for u in c.list_multipart_uploads(Bucket="writers")["Uploads"]
            if u["UploadId"] == up]
    assert mine[0]["Initiator"]["ID"] == AK2 and mine[0]["Owner"]["ID"] == AK2
    lp = c.list_parts(Bucket="writers", Key="mpu", UploadId=up)
    assert lp["Initiator"]["ID"] == AK2 and lp["Owner"]["ID"] == AK2
    alt.complete_multipart_upload(Bucket="writers", Key="mpu", UploadId=up, MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": e1}]})
    assert sha(alt.get_object(Bucket="writers", Key="mpu")["Body"].read()) == sha(part)
    assert alt.get_object_acl(Bucket="writers", Key="mpu")["Owner"]["ID"] == AK2
    # The bucket's owner writes the key again: its own now; a copy is its copier's.
    c.put_object(Bucket="writers", Key="bor", Body=b"replaced")
    assert c.get_object_acl(Bucket="writers", Key="bor")["Owner"]["ID"] == AK
    assert code(alt.get_object, Bucket="writers", Key="bor") == "AccessDenied"
    c.copy_object(Bucket="writers", Key="copy", CopySource={"Bucket": "writers", "Key": "bofc"})
    assert c.get_object_acl(Bucket="writers", Key="copy")["Owner"]["ID"] == AK

    # BucketOwnerPreferred: what the writer gives full control of is the bucket owner's.
    c.create_bucket(Bucket="preferred", ObjectOwnership="BucketOwnerPreferred",
                    GrantWrite=ID2, GrantFullControl='id="%s"' % AK)
    assert c.get_bucket_ownership_controls(Bucket="preferred")["OwnershipControls"][
        "Rules"] == [{"ObjectOwnership": "BucketOwnerPreferred"}]
    alt.put_object(Bucket="preferred", Key="given", Body=b"g", ACL="bucket-owner-full-control")
    alt.put_object(Bucket="preferred", Key="kept", Body=b"k")
    assert c.get_object_acl(Bucket="preferred", Key="given")["Owner"]["ID"] == AK
    assert code(alt.get_object, Bucket="preferred", Key="given") == "AccessDenied"
    assert alt.get_object(Bucket="preferred", Key="kept")["Body"].read() == b"k"
    assert alt.get_object_acl(Bucket="preferred", Key="kept")["Owner"]["ID"] == AK2
    assert code(c.get_object, Bucket="preferred", Key="kept") == "AccessDenied"
    # The bucket's owner still deletes (and overwrites) what it may not read.
    c.delete_object(Bucket="preferred", Key="kept")
    assert [o["Key"] for o in c.list_objects_v2(Bucket="preferred")["Contents"]] == ["given"]
    # BucketOwnerEnforced: everything is the bucket owner's.
    c.create_bucket(Bucket="enforced", ObjectOwnership="BucketOwnerEnforced")
    c.put_bucket_acl(Bucket="enforced", AccessControlPolicy={
        "Owner": {"ID": AK}, "Grants": [
            {"Grantee": {"Type": "CanonicalUser", "ID": AK}, "Permission": "FULL_CONTROL"}]})
    # (ACLs disabled: WRITE cannot be granted; the writer's request is refused.)
    assert code(alt.put_object, Bucket="enforced", Key="k", Body=b"x") == "AccessDenied"
    assert c.get_bucket_ownership_controls(Bucket="enforced")["OwnershipControls"][
        "Rules"] == [{"ObjectOwnership": "BucketOwnerEnforced"}]
    # Ownership controls are set at creation only; another user learns nothing of them.
    assert code(alt.get_bucket_ownership_controls, Bucket="writers") == "AccessDenied"
    assert code(c.put_bucket_ownership_controls, Bucket="writers", OwnershipControls={
        "Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]}) == "NotImplemented"
    assert code(c.create_bucket, Bucket="bad-ownership",
                ObjectOwnership="Nobody") == "InvalidArgument"


def test_grantees_write_as_s3_maps_write_and_uploads_are_their_initiators(server):
    """S3 maps bucket WRITE to s3:PutObject and s3:DeleteObject, and READ to listing objects,
    versions and uploads. A WRITE grantee's CopyObject (its source read as a GET of it),
    UploadPartCopy, POST form upload and DeleteObjects (current versions only) were refused,
    and another grantee who knew an upload's id could abort it. Now: an upload's Abort and
    ListParts are its initiator's and the bucket owner's (S3's defaults, which no ACL grants);
    parts and Complete its initiator's alone. The initiator is the upload's, not the object's:
    it is not in the completed object's metadata."""
    from test_s3_post import form_post
    c, alt, a = s3_client(server.endpoint), s3_client(server.endpoint, AK2, SK2), \
        anon_client(server.endpoint)
    c.create_bucket(Bucket="wg-b")
    c.put_bucket_acl(Bucket="wg-b", AccessControlPolicy={"Owner": {"ID": AK}, "Grants": [
        {"Grantee": {"Type": "CanonicalUser", "ID": AK}, "Permission": "FULL_CONTROL"},
        {"Grantee": {"Type": "CanonicalUser", "ID": AK2}, "Permission": "WRITE"},
        {"Grantee": {"Type": "CanonicalUser", "ID": AK2}, "Permission": "READ"},
        {"Grantee": {"Type": "Group", "URI": ALL}, "Permission": "WRITE"}]})
    part = os.urandom(5 << 20)
    # alt's upload: nobody else (anonymous, though it may write; the bucket's owner) adds a
    # part to it or completes it (a reviewer: a READ grantee lists upload ids, and a WRITE
    # grantee then completed the owner's upload with its own bytes, the owner's object), nor
    # aborts it or lists its parts but the bucket's owner.
    up = alt.create_multipart_upload(Bucket="wg-b", Key="big")["UploadId"]
    e1 = alt.upload_part(Bucket="wg-b", Key="big", UploadId=up, PartNumber=1, Body=part)["ETag"]
    for who in (a, c):
        assert code(who.upload_part, Bucket="wg-b", Key="big", UploadId=up, PartNumber=2,
                    Body=b"EVIL") == "AccessDenied"
        assert code(who.upload_part_copy, Bucket="wg-b", Key="big", UploadId=up, PartNumber=2,
                    CopySource={"Bucket": "wg-b", "Key": "big"}) in ("AccessDenied",
                                                                       "NoSuchKey")
        assert code(who.complete_multipart_upload, Bucket="wg-b", Key="big", UploadId=up,
                    MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e1}]}) == "AccessDenied"
    e2 = alt.upload_part(Bucket="wg-b", Key="big", UploadId=up, PartNumber=2, Body=b"tail")["ETag"]
    assert code(a.abort_multipart_upload, Bucket="wg-b", Key="big", UploadId=up) == "AccessDenied"
    assert code(a.list_parts, Bucket="wg-b", Key="big", UploadId=up) == "AccessDenied"
    assert [p["ETag"] for p in c.list_parts(Bucket="wg-b", Key="big", UploadId=up)["Parts"]] == [
        e1, e2]
    lp = alt.list_parts(Bucket="wg-b", Key="big", UploadId=up)
    assert [p["PartNumber"] for p in lp["Parts"]] == [1, 2] and lp["Initiator"]["ID"] == AK2
    # An anonymous upload: anonymous may abort it, alt may not; the owner may abort anyone's.
    aup = a.create_multipart_upload(Bucket="wg-b", Key="anon")["UploadId"]
    oup = alt.create_multipart_upload(Bucket="wg-b", Key="other")["UploadId"]
    ups = {u["UploadId"]: (u["Initiator"]["ID"], u["Owner"]["ID"])
           for u in alt.list_multipart_uploads(Bucket="wg-b")["Uploads"]}  # READ lists them
    assert ups == {up: (AK2, AK2), aup: ("anonymous", AK), oup: (AK2, AK2)}
    assert code(alt.abort_multipart_upload, Bucket="wg-b", Key="anon",
                UploadId=aup) == "AccessDenied"
    a.abort_multipart_upload(Bucket="wg-b", Key="anon", UploadId=aup)
    c.abort_multipart_upload(Bucket="wg-b", Key="other", UploadId=oup)
    assert code(alt.list_parts, Bucket="wg-b", Key="other", UploadId=oup) == "NoSuchUpload"
    done = {"Parts": [{"PartNumber": 1, "ETag": e1}, {"PartNumber": 2, "ETag": e2}]}
    alt.complete_multipart_upload(Bucket="wg-b", Key="big", UploadId=up, MultipartUpload=done)
    # Sent again, it is answered as done to its initiator only (a cluster probe: anyone who
    # knew the id and the parts was answered 200 with the object's ETag).
    alt.complete_multipart_upload(Bucket="wg-b", Key="big", UploadId=up, MultipartUpload=done)
    for who in (a, c):
        assert code(who.complete_multipart_upload, Bucket="wg-b", Key="big", UploadId=up,
                    MultipartUpload=done) == "AccessDenied"
    # The object keeps its upload's initiator for that (its owner is not always it: a review,
    # BucketOwnerPreferred with bucket-owner-full-control refused the initiator's retry).
    c.create_bucket(Bucket="wg-pref", ObjectOwnership="BucketOwnerPreferred", GrantWrite=ID2,
                    GrantFullControl='id="%s"' % AK)
    c.put_bucket_acl(Bucket="wg-pref", AccessControlPolicy={"Owner": {"ID": AK}, "Grants": [
        {"Grantee": {"Type": "CanonicalUser", "ID": AK}, "Permission": "FULL_CONTROL"},
        {"Grantee": {"Type": "CanonicalUser", "ID": AK2}, "Permission": "WRITE"},
        {"Grantee": {"Type": "Group", "URI": ALL}, "Permission": "WRITE"}]})
    for who, owner in ((alt, AK), (c, AK)):
        pu = who.create_multipart_upload(Bucket="wg-pref", Key="given",
                                         ACL="bucket-owner-full-control")["UploadId"]
        pe = who.upload_part(Bucket="wg-pref", Key="given", UploadId=pu, PartNumber=1,
                             Body=b"given")["ETag"]
        pdone = {"Parts": [{"PartNumber": 1, "ETag": pe}]}
        for _ in range(2):  # done, then sent again
            who.complete_multipart_upload(Bucket="wg-pref", Key="given", UploadId=pu,
                                          MultipartUpload=pdone)
        assert c.get_object_acl(Bucket="wg-pref", Key="given")["Owner"]["ID"] == owner
        assert c.head_object(Bucket="wg-pref", Key="given")["Metadata"] == {}
        others = [x for x in (alt, c, a) if x is not who]
        for x in others:
            assert code(x.complete_multipart_upload, Bucket="wg-pref", Key="given", UploadId=pu,
                        MultipartUpload=pdone) == "AccessDenied", x

    got = alt.get_object(Bucket="wg-b", Key="big")
    assert sha(got["Body"].read()) == sha(part + b"tail") and got["Metadata"] == {}
    assert alt.get_object_acl(Bucket="wg-b", Key="big")["Owner"]["ID"] == AK2
    # CopyObject: from what alt may read (its own object, a public-read one), not from the
    # owner's private one; the copy is alt's.
    c.put_object(Bucket="wg-b", Key="private", Body=b"p")
    pub = os.urandom(3000)
    c.put_object(Bucket="wg-b", Key="public", Body=pub, ACL="public-read")
    assert code(alt.copy_object, Bucket="wg-b", Key="cp0",
                CopySource={"Bucket": "wg-b", "Key": "private"}) == "AccessDenied"
    alt.copy_object(Bucket="wg-b", Key="cp1", CopySource={"Bucket": "wg-b", "Key": "public"})
    alt.copy_object(Bucket="wg-b", Key="cp2", CopySource={"Bucket": "wg-b", "Key": "big"},
                    MetadataDirective="REPLACE", Metadata={"m": "v"})
    assert sha(alt.get_object(Bucket="wg-b", Key="cp1")["Body"].read()) == sha(pub)
    assert sha(alt.get_object(Bucket="wg-b", Key="cp2")["Body"].read()) == sha(part + b"tail")
    assert alt.get_object_acl(Bucket="wg-b", Key="cp1")["Owner"]["ID"] == AK2
    assert alt.get_object_acl(Bucket="wg-b", Key="cp2")["Owner"]["ID"] == AK2
    assert code(alt.head_object, Bucket="wg-b", Key="cp0") == "404"
    # UploadPartCopy, the same way.
    pc = alt.create_multipart_upload(Bucket="wg-b", Key="pc")["UploadId"]
    assert code(alt.upload_part_copy, Bucket="wg-b", Key="pc", UploadId=pc, PartNumber=1,
                CopySource={"Bucket": "wg-b", "Key": "private"}) == "AccessDenied"
    ec = alt.upload_part_copy(Bucket="wg-b", Key="pc", UploadId=pc, PartNumber=1,
                              CopySource={"Bucket": "wg-b", "Key": "public"})
    alt.complete_multipart_upload(Bucket="wg-b", Key="pc", UploadId=pc, MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": ec["CopyPartResult"]["ETag"]}]})
    assert sha(alt.get_object(Bucket="wg-b", Key="pc")["Body"].read()) == sha(pub)
    # Another storage class is refused, as on the owner's PUT (it was stored as STANDARD).
    assert code(alt.put_object, Bucket="wg-b", Key="cold", Body=b"c",
                StorageClass="GLACIER") == "InvalidStorageClass"
    # A POST form signed by alt.
    post = presigner_for(server, AK2, SK2).generate_presigned_post("wg-b", "form/${filename}")
    data = os.urandom(10000)
    st, body, _ = form_post(server, "wg-b", post["fields"], "f.bin", data)
    assert st == 204, body
    assert sha(alt.get_object(Bucket="wg-b", Key="form/f.bin")["Body"].read()) == sha(data)
    assert alt.get_object_acl(Bucket="wg-b", Key="form/f.bin")["Owner"]["ID"] == AK2
    # DeleteObjects: current versions; a version by id is the owner's.
    res = alt.delete_objects(Bucket="wg-b", Delete={"Objects": [
        {"Key": "cp1"}, {"Key": "private"}, {"Key": "public", "VersionId": "null"}]})
    assert sorted(d["Key"] for d in res["Deleted"]) == ["cp1", "private"]
    assert [(e["Key"], e["Code"]) for e in res["Errors"]] == [("public", "AccessDenied")]
    assert code(c.head_object, Bucket="wg-b", Key="cp1") == "404"
    assert code(c.head_object, Bucket="wg-b", Key="private") == "404"
    assert sha(c.get_object(Bucket="wg-b", Key="public")["Body"].read()) == sha(pub)
    # Versions are READ's to list.
    keys = {v["Key"] for v in alt.list_object_versions(Bucket="wg-b")["Versions"]}
    assert keys == {"big", "cp2", "form/f.bin", "pc", "public"}
    # Without the grants, none of it.
    c.put_bucket_acl(Bucket="wg-b", ACL="private")
    for fn, kw in ((alt.list_multipart_uploads, {}), (alt.list_object_versions, {}),
                   (alt.delete_objects, {"Delete": {"Objects": [{"Key": "public"}]}}),
                   (alt.copy_object, {"Key": "cp3",
                                      "CopySource": {"Bucket": "wg-b", "Key": "public"}})):
        assert code(fn, Bucket="wg-b", **kw) == "AccessDenied", fn
    st, body, _ = form_post(server, "wg-b", post["fields"], "g.bin", data)
    assert st == 403, body


def presigner_for(server, ak, sk):
    import boto3
    from botocore.config import Config
    return boto3.session.Session().client(
        "s3", endpoint_url=server.endpoint, region_name="us-east-1", aws_access_key_id=ak,
        aws_secret_access_key=sk, config=Config(s3={"addressing_style": "path"}))


def test_a_writer_tags_its_own_object_and_reads_its_attributes(server):
    """An object's tags and attributes are its owner's: the writer that owns its object in
    another's bucket tags it and reads its attributes (it was refused, the bucket owner's
    alone); nobody else's object, whatever the ACLs grant, and not a version the bucket owner
    wrote over it since."""
    c, alt = s3_client(server.endpoint), s3_client(server.endpoint, AK2, SK2)
    c.create_bucket(Bucket="tagw", GrantWrite=ID2, GrantRead=ID2,
                    GrantFullControl='id="%s"' % AK)
    alt.put_object(Bucket="tagw", Key="mine", Body=b"12345")
    c.put_object(Bucket="tagw", Key="theirs", Body=b"t", GrantFullControl=ID2)
    tags = {"TagSet": [{"Key": "team", "Value": "alt"}]}
    alt.put_object_tagging(Bucket="tagw", Key="mine", Tagging=tags)
    assert alt.get_object_tagging(Bucket="tagw", Key="mine")["TagSet"] == tags["TagSet"]
    # Not the bucket owner's: no ACL grants tags (S3).
    assert code(c.get_object_tagging, Bucket="tagw", Key="mine") == "AccessDenied"
    assert code(c.put_object_tagging, Bucket="tagw", Key="mine", Tagging=tags) == "AccessDenied"
    assert code(c.get_object_attributes, Bucket="tagw", Key="mine",
                ObjectAttributes=["ObjectSize"]) == "AccessDenied"
    at = alt.get_object_attributes(Bucket="tagw", Key="mine", ObjectAttributes=["ObjectSize"])
    assert at["ObjectSize"] == 5
    alt.delete_object_tagging(Bucket="tagw", Key="mine")
    assert alt.get_object_tagging(Bucket="tagw", Key="mine")["TagSet"] == []
    # Another's object: not even FULL_CONTROL by ACL grants tags (S3: no ACL maps to them).
    assert code(alt.put_object_tagging, Bucket="tagw", Key="theirs",
                Tagging=tags) == "AccessDenied"
    assert code(alt.get_object_tagging, Bucket="tagw", Key="theirs") == "AccessDenied"
    # Attributes are READ's (S3), and so the FULL_CONTROL grant gives them; not the tag count.
    assert alt.get_object_attributes(Bucket="tagw", Key="theirs",
                                     ObjectAttributes=["ObjectSize"])["ObjectSize"] == 1
    c.put_object_tagging(Bucket="tagw", Key="theirs", Tagging=tags)
    assert "TagCount" not in alt.get_object(Bucket="tagw", Key="theirs")
    assert c.head_object(Bucket="tagw", Key="theirs")["ResponseMetadata"]["HTTPHeaders"][
        "x-amz-tagging-count"] == "1"
    assert code(alt.get_object_tagging, Bucket="tagw", Key="nothing") == "NoSuchKey"
    # Nor through a copy: a READ grantee's copy of a tagged object would carry the tags it
    # may not read (a hostile pass); without them (REPLACE) it copies.
    c.put_object(Bucket="tagw", Key="tagged", Body=b"t", Tagging="secret=1", GrantRead=ID2)
    alt.create_bucket(Bucket="tagw-alt")
    assert code(alt.copy_object, Bucket="tagw-alt", Key="cp",
                CopySource={"Bucket": "tagw", "Key": "tagged"}) == "AccessDenied"
    alt.copy_object(Bucket="tagw-alt", Key="cp", CopySource={"Bucket": "tagw", "Key": "tagged"},
                    TaggingDirective="REPLACE")
    assert alt.get_object_tagging(Bucket="tagw-alt", Key="cp")["TagSet"] == []
    c.copy_object(Bucket="tagw", Key="own-cp", CopySource={"Bucket": "tagw", "Key": "tagged"})
    assert c.get_object_tagging(Bucket="tagw", Key="own-cp")["TagSet"] == [
        {"Key": "secret", "Value": "1"}]
    # Whether a bucket is there is said first, whatever the sub-resource asked.
    for q in ("lifecycle", "cors", "versioning", "policy"):
        st, body = anon(server, "GET", "/no-such-tagw?" + q)
        assert st == 404 and b"NoSuchBucket" in body, (q, st, body)
    # The bucket's tags stay the owner's; so does the key once the owner writes it again.
    assert code(alt.get_bucket_tagging, Bucket="tagw") == "AccessDenied"
    c.put_object(Bucket="tagw", Key="mine", Body=b"over")
    assert code(alt.put_object_tagging, Bucket="tagw", Key="mine",
                Tagging=tags) == "AccessDenied"
    assert c.get_object_tagging(Bucket="tagw", Key="mine")["TagSet"] == []
