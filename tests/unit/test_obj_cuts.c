/*
 * Commits cut short by a kill (a Complete's closing records, a plain PUT
 * after half its heads) and writes that land late: what readers, the
 * heal, retries and the callers make of them.
 */
#include "obj_fixture.h"

/*
 * A kill between a Complete's close of its upload and its object's heads left the upload
 * closed and no object: the client, never answered, got NoSuchUpload for the same Complete
 * and for an Abort, and the reaper took the parts (a hostile probe, session 27). The close
 * now keeps the manifest (a closing record): the same Complete sent again resumes it, once
 * its closer is surely gone (503 before), and a different one is refused; nothing else sees
 * the upload open meanwhile (parts, ListParts, the listing).
 */
static void test_complete_cut_short_is_resumed(void **state)
{
    env_t *e = *state;
    for (int stage = 1; stage <= 2; stage++) {
        const char *key = stage == 1 ? "cut-after-close" : "cut-after-manifest";
        cut_upload_t u;
        int err, why = 0;
        obj_info_t info, pi;
        cut_upload_new(e, key, 300 + (uint32_t)stage, &u);
        /* A part streaming while the Complete runs: its commit comes after the cut. */
        obj_writer_t *late = obj_mpu_part_begin(e->set, "bkt", key, u.upload, 3, &err);
        assert_non_null(late);
        assert_int_equal(obj_put_write(late, u.data, 100), 0);
        assert_int_equal(cut_complete(e, key, &u, 2, stage, &why), ERR_IO);
        assert_int_equal(obj_stat(e->set, "bkt", key, &info), ERR_NOT_FOUND);
        assert_int_equal(obj_put_commit(late, NULL, NULL, 0, &pi), ERR_NOT_FOUND);
        assert_null(obj_mpu_part_begin(e->set, "bkt", key, u.upload, 4, &err));
        assert_int_equal(err, ERR_NOT_FOUND);
        listed_parts_t l = {0};
        assert_int_equal(obj_mpu_list_parts(e->set, "bkt", key, u.upload, list_parts_cb, &l),
                         ERR_NOT_FOUND);
        assert_int_equal(uploads_listed(e, &u), 0);
        /* Its closer may still be running: the same Complete and an Abort wait. */
        assert_int_equal(cut_complete(e, key, &u, 2, 0, &why), ERR_THROTTLED);
        assert_int_equal(obj_mpu_abort(e->set, "bkt", key, u.upload), ERR_THROTTLED);
        /* Another Complete is not this one. */
        assert_int_equal(cut_complete(e, key, &u, 1, 0, &why), ERR_NOT_FOUND);
        assert_int_equal(why, OBJ_MPU_NO_UPLOAD);
        obj__wall_skew_ns = CUT_STALE;
        assert_int_equal(cut_complete(e, key, &u, 1, 0, &why), ERR_NOT_FOUND);
        assert_int_equal(cut_complete(e, key, &u, 2, 0, &why), 0);
        obj__wall_skew_ns = 0;
        assert_cut_object(e, key, &u);
        assert_int_equal(part_keys(e, u.upload), 2);
        assert_int_equal(obj_stat(e->set, MPU_UPLOADS, u.upload, &info), ERR_NOT_FOUND);
        /* And again: the answer a completed upload gives. */
        assert_int_equal(cut_complete(e, key, &u, 2, 0, &why), 0);
        free(u.data);
    }
}

/*
 * The other ends of a Complete cut short: an Abort (the client gives up; its parts and the
 * manifest go, the object never appears), a Complete cut after its heads (it stands; sent
 * again it is answered at once; the reaper tidies the upload after the grace), and one
 * nobody resumes (the reaper opens the upload again after the grace: ListParts shows it,
 * and it completes).
 */
static void test_complete_cut_short_is_aborted_or_settled(void **state)
{
    env_t *e = *state;
    cut_upload_t u;
    int why = 0;
    obj_info_t info;
    /* Aborted: at once for the client; its parts go with the reaper (a closer that outlived
     * every bound would find them there). */
    obj_reaper_t *rp = obj_reaper_new(100);
    cut_upload_new(e, "cut-aborted", 310, &u);
    assert_int_equal(cut_complete(e, "cut-aborted", &u, 2, 2, &why), ERR_IO);
    assert_int_equal(obj_stat(e->set, MPU_MANIFEST, u.upload, &info), 0);
    obj__wall_skew_ns = CUT_STALE;
    assert_int_equal(obj_mpu_abort(e->set, "bkt", "cut-aborted", u.upload), 0);
    assert_int_equal(obj_mpu_abort(e->set, "bkt", "cut-aborted", u.upload), ERR_NOT_FOUND);
    assert_int_equal(cut_complete(e, "cut-aborted", &u, 2, 0, &why), ERR_NOT_FOUND);
    assert_int_equal(uploads_listed(e, &u), 0);
    obj__wall_skew_ns = 2 * CUT_STALE; /* the aborting record's own age too */
    assert_int_equal(reap_internal_pass(e, rp, 500).uploads_settled, 0);
    assert_int_equal(part_keys(e, u.upload), 2);
    assert_int_equal(reap_internal_pass(e, rp, 600).uploads_settled, 1);
    obj__wall_skew_ns = 0;
    assert_int_equal(obj_stat(e->set, "bkt", "cut-aborted", &info), ERR_NOT_FOUND);
    assert_int_equal(obj_stat(e->set, MPU_MANIFEST, u.upload, &info), ERR_NOT_FOUND);
    assert_int_equal(obj_stat(e->set, MPU_UPLOADS, u.upload, &info), ERR_NOT_FOUND);
    assert_int_equal(part_keys(e, u.upload), 0);
    free(u.data);

    /* Cut after its heads: it stands. */
    cut_upload_t done, idle;
    cut_upload_new(e, "cut-after-heads", 311, &done);
    assert_int_equal(cut_complete(e, "cut-after-heads", &done, 1, 3, &why), ERR_IO);
    assert_int_equal(obj_stat(e->set, "bkt", "cut-after-heads", &info), 0);
    assert_int_equal(cut_complete(e, "cut-after-heads", &done, 1, 0, &why), 0); /* at once */
    /* An Abort of it, its record not tidied yet: NoSuchUpload, not 503 for the reaper's grace
     * (a probe: 28 Aborts). */
    obj__wall_skew_ns = CUT_STALE;
    assert_int_equal(obj_mpu_abort(e->set, "bkt", "cut-after-heads", done.upload), ERR_NOT_FOUND);
    obj__wall_skew_ns = 0;
    /* Nobody resumes this one. */
    cut_upload_new(e, "cut-idle", 312, &idle);
    assert_int_equal(cut_complete(e, "cut-idle", &idle, 2, 1, &why), ERR_IO);
    assert_int_equal(part_keys(e, done.upload), 2);
    obj__wall_skew_ns = CUT_STALE;
    assert_int_equal(reap_internal_pass(e, rp, 1000).uploads_settled, 0);
    assert_int_equal(reap_internal_pass(e, rp, 1099).uploads_settled, 0);
    obj_reap_report_t rr = reap_internal_pass(e, rp, 1100);
    obj__wall_skew_ns = 0;
    assert_int_equal(rr.uploads_settled, 2);
    assert_int_equal(rr.parts_reaped, 0);
    /* Tidied: the record, and part 2, which its Complete did not take. */
    assert_int_equal(obj_stat(e->set, MPU_UPLOADS, done.upload, &info), ERR_NOT_FOUND);
    assert_int_equal(part_keys(e, done.upload), 1);
    int err;
    uint8_t *got = malloc(done.psz);
    obj_reader_t *r = obj_open(e->set, "bkt", "cut-after-heads", &info, &err);
    assert_non_null(r);
    assert_int_equal(info.size, done.psz);
    assert_int_equal(obj_read(r, 0, got, done.psz), 0);
    assert_memory_equal(got, done.data, done.psz);
    obj_close(r);
    free(got);
    /* Opened again: listed, its parts shown, and it completes. */
    listed_parts_t l = {0};
    assert_int_equal(obj_mpu_list_parts(e->set, "bkt", "cut-idle", idle.upload, list_parts_cb, &l),
                     0);
    assert_int_equal(l.n, 2);
    assert_int_equal(uploads_listed(e, &idle), 1);
    assert_int_equal(obj_stat(e->set, MPU_MANIFEST, idle.upload, &info), ERR_NOT_FOUND);
    assert_int_equal(obj_stat(e->set, "bkt", "cut-idle", &info), ERR_NOT_FOUND);
    assert_int_equal(cut_complete(e, "cut-idle", &idle, 2, 0, &why), 0);
    assert_cut_object(e, "cut-idle", &idle);
    obj_reaper_free(rp);
    free(done.data);
    free(idle.data);
}

/*
 * A Complete sent again must never make a second version of its upload: both would name
 * the same parts, and deleting either would take them from the other (a review found it:
 * cut after its heads, a newer PUT current, the same Complete sent again resumed and
 * committed again). And a closer that stalls past the fence writes no head: it answers
 * 503, and the same Complete sent again resumes it.
 */
static int count_cut_versions(void *arg, const char *key, const obj_info_t *info, int latest)
{
    (void)latest;
    if (info && strcmp(key, "cut-versioned") == 0) ++*(int *)arg;
    return 0;
}

static void test_complete_cut_short_never_makes_a_second_version(void **state)
{
    env_t *e = *state;
    cut_upload_t u, f;
    int why = 0;
    obj_info_t info, later, first;
    char body[64];
    cut_versioning = OBJ_VERSIONED;
    cut_upload_new(e, "cut-versioned", 320, &u);
    assert_int_equal(cut_complete(e, "cut-versioned", &u, 2, 3, &why), ERR_IO);
    assert_int_equal(obj_stat(e->set, "bkt", "cut-versioned", &first), 0);
    vput(e, "cut-versioned", "later", OBJ_VERSIONED, &later);
    obj__wall_skew_ns = CUT_STALE;
    assert_int_equal(cut_complete(e, "cut-versioned", &u, 2, 0, &why), 0);
    assert_string_equal(cut_done.vid, first.vid); /* answered with its version */
    obj__wall_skew_ns = 0;
    vread(e, "cut-versioned", NULL, body, sizeof(body));
    assert_string_equal(body, "later");
    assert_int_equal(obj_stat(e->set, "bkt", "cut-versioned", &info), 0);
    assert_string_equal(info.vid, later.vid);
    int versions = 0;
    assert_int_equal(obj_list_versions(e->set, "bkt", "cut-versioned", NULL, NULL,
                                       count_cut_versions, &versions),
                     0);
    assert_int_equal(versions, 2); /* the Complete's, once, and the later PUT */
    free(u.data);

    /* Completed whole (its record gone), then a PUT over it: the same Complete sent again is
     * answered with its version, kept as noncurrent (it was NoSuchUpload: a probe). */
    cut_upload_t w;
    obj_info_t done, over;
    cut_upload_new(e, "cut-versioned-whole", 322, &w);
    assert_int_equal(cut_complete(e, "cut-versioned-whole", &w, 2, 0, &why), 0);
    done = cut_done;
    vput(e, "cut-versioned-whole", "over it", OBJ_VERSIONED, &over);
    assert_int_equal(cut_complete(e, "cut-versioned-whole", &w, 2, 0, &why), 0);
    assert_string_equal(cut_done.vid, done.vid);
    assert_string_equal(cut_done.etag, done.etag);
    assert_int_equal(obj_stat(e->set, "bkt", "cut-versioned-whole", &info), 0);
    assert_string_equal(info.vid, over.vid);
    free(w.data);

    /* Stalled past the fence after its manifest: no head, 503; resumed when sent again. */
    cut_versioning = OBJ_UNVERSIONED;
    cut_upload_new(e, "cut-fenced", 321, &f);
    stall_stage = 2;
    assert_int_equal(cut_complete(e, "cut-fenced", &f, 2, 0, &why), ERR_THROTTLED);
    stall_stage = 0;
    assert_int_equal(obj_stat(e->set, "bkt", "cut-fenced", &info), ERR_NOT_FOUND);
    assert_int_equal(cut_complete(e, "cut-fenced", &f, 2, 0, &why), ERR_THROTTLED);
    obj__wall_skew_ns = CUT_STALE + 16 * 1000000000ll;
    assert_int_equal(cut_complete(e, "cut-fenced", &f, 2, 0, &why), 0);
    obj__wall_skew_ns = 0;
    assert_cut_object(e, "cut-fenced", &f);
    free(f.data);
}

/*
 * A kill in the middle of a Complete's heads: one store took its head, fewer than a version
 * stands on. The same Complete sent again was answered 200 because some store's head named
 * the upload ("completed, then replaced"), while no read found the object: NoSuchKey after a
 * 200 (CI, session 30). A head of the upload that is the newest anywhere and does not stand
 * is a commit cut short: it is resumed, and its heads written on every store. Whichever store
 * kept the lone head; over nothing, and over a version before it (kept in a versioned bucket).
 */
static void test_complete_cut_in_its_heads_is_resumed(void **state)
{
    env_t *e = *state;
    cut_env = e;
    for (int lone = 0; lone < N; lone++) {
        char key[32], body[64];
        snprintf(key, sizeof(key), "cut-in-heads-%d", lone);
        int before = lone % 3 != 0, why = 0;
        obj_info_t old = {0};
        cut_versioning = lone % 3 == 2 ? OBJ_VERSIONED : OBJ_UNVERSIONED;
        if (before) vput(e, key, "before", cut_versioning, &old);
        cut_upload_t u;
        cut_upload_new(e, key, 340 + (uint32_t)lone, &u);
        cut_lone = lone;
        obj__complete_cut_hook = cut_in_heads;
        int rc = obj_mpu_complete(e->set, "bkt", key, u.upload, u.parts, 2, 1, NULL, cut_versioning,
                                  &cut_done, &why);
        obj__complete_cut_hook = NULL;
        for (int i = 0; i < N; i++)
            e->f[i].cut_heads = e->f[i].fail_write = 0;
        assert_int_not_equal(rc, 0);
        assert_int_equal(heads_naming(e, key, u.upload), 1);
        /* The version a reader asking that store meets. */
        drive_id_t lid = {"bkt", key, "", (uint32_t)lone};
        drive_stat_t lds;
        uint8_t lmeta[HEAD_MAX];
        obj_info_t met;
        assert_int_equal(
            e->f[lone].in.ops->stat(e->f[lone].in.ctx, &lid, &lds, lmeta, sizeof(lmeta)), 0);
        assert_int_equal(obj_meta_decode(lmeta, lds.meta_len, &met), 0);
        /* Sent again once its closer is surely gone: resumed, and it stands, as the very
         * version met (a cluster probe saw a version listed and read, then gone under a new
         * id once the retry made a new one). */
        obj__wall_skew_ns = CUT_STALE;
        assert_int_equal(cut_complete(e, key, &u, 2, 0, &why), 0);
        obj__wall_skew_ns = 0;
        assert_string_equal(cut_done.vid, met.vid);
        assert_int_equal(cut_done.mtime_ns, met.mtime_ns);
        assert_int_equal(heads_naming(e, key, u.upload), N);
        assert_cut_object(e, key, &u);
        if (before && cut_versioning == OBJ_VERSIONED) {
            vread(e, key, old.vid, body, sizeof(body));
            assert_string_equal(body, "before");
            int versions = 0;
            void *arg[2] = {key, &versions};
            assert_int_equal(
                obj_list_versions(e->set, "bkt", key, NULL, NULL, count_versions_of, arg), 0);
            assert_int_equal(versions, 2);
        }
        /* And again: the answer a completed upload gives. */
        assert_int_equal(cut_complete(e, key, &u, 2, 0, &why), 0);
        free(u.data);
    }
    cut_versioning = OBJ_UNVERSIONED;
}

/* Three reaper passes once every cut Complete's closer is surely gone: the uploads settled. */
static int settle_cut_uploads(env_t *e)
{
    obj_reaper_t *rp = obj_reaper_new(100);
    obj__wall_skew_ns = CUT_STALE;
    int settled = 0;
    for (int p = 0; p < 3; p++)
        settled += reap_internal_pass(e, rp, 1000 + 100 * (uint64_t)p).uploads_settled;
    obj__wall_skew_ns = 0;
    obj_reaper_free(rp);
    return settled;
}

/*
 * A review of the first mend (obj__cut_short), each failing on it. A Complete that stood (cut
 * after its heads, its record still closing), then a PUT over it, then a delete by id of that
 * PUT whose promotion of the Complete's version is cut after one store: the newest head names
 * the upload and does not stand, and the mend took it for a commit cut short: the same
 * Complete sent again made a second version of the upload (both naming the same parts). A copy
 * of a version that stood has that version's mtime, and the version is at its own position.
 */
static void test_complete_retry_over_a_promotion_cut_short(void **state)
{
    env_t *e = *state;
    const char *key = "cut-promoted";
    cut_upload_t u;
    int why = 0;
    obj_info_t first, later;
    cut_versioning = OBJ_VERSIONED;
    cut_upload_new(e, key, 400, &u);
    assert_int_equal(cut_complete(e, key, &u, 2, 3, &why), ERR_IO); /* stood; record closing */
    assert_int_equal(obj_stat(e->set, "bkt", key, &first), 0);
    vput(e, key, "later", OBJ_VERSIONED, &later);
    cut_heads_on(e, 1u << 0);
    assert_int_not_equal(obj_delete_version(e->set, "bkt", key, later.vid, NULL, NULL), 0);
    cut_heads_clear(e);
    assert_int_equal(versions_naming(e, key, u.upload), 1);
    obj__wall_skew_ns = CUT_STALE;
    assert_int_equal(cut_complete(e, key, &u, 2, 0, &why), 0);
    obj__wall_skew_ns = 0;
    assert_string_equal(cut_done.vid, first.vid);
    assert_int_equal(versions_naming(e, key, u.upload), 1);
    cut_versioning = OBJ_UNVERSIONED;
    free(u.data);
}

/*
 * Cut in its heads (one store), then a newer head above it that does not stand either: a PUT
 * through another node killed after its first head, (a) a crash's leftover by now, (b) still in
 * flight. The mend saw another writer's head as the newest and answered 200 ("completed, then
 * replaced") with nothing standing. Now (a) resumes, and (b) waits (503).
 */
static void complete_under_a_newer_head(env_t *e, const char *key, int fresh, obj_versioning_t v)
{
    cut_upload_t u;
    int why = 0;
    obj_info_t info;
    cut_versioning = v;
    cut_upload_new(e, key, 410 + (uint32_t)fresh, &u);
    cut_lone_head(e, key, 0, &u);
    /* The PUT comes once the lone head is stale (else it waits for it, and writes nothing). */
    obj__wall_skew_ns = fresh ? CUT_STALE : 11 * 1000000000ll;
    assert_int_not_equal(put_cut(e, key, 1u << 1), 0);
    obj__wall_skew_ns = fresh ? CUT_STALE : CUT_STALE + 11 * 1000000000ll;
    int rc = cut_complete(e, key, &u, 2, 0, &why);
    obj__wall_skew_ns = 0;
    if (fresh) {
        assert_int_equal(rc, ERR_THROTTLED);
        assert_int_equal(versions_naming(e, key, u.upload), 0);
    } else {
        assert_int_equal(rc, 0);
        assert_int_equal(heads_naming(e, key, u.upload), N);
        assert_int_equal(obj_stat_standing(e->set, "bkt", key, &info), 0);
        assert_string_equal(info.upload_id, u.upload);
        assert_cut_object(e, key, &u);
    }
    cut_versioning = OBJ_UNVERSIONED;
    free(u.data);
}

static void test_complete_retry_under_a_newer_head(void **state)
{
    complete_under_a_newer_head(*state, "cut-under-leftover", 0, OBJ_UNVERSIONED);
    complete_under_a_newer_head(*state, "cut-under-in-flight", 1, OBJ_VERSIONED);
}

/*
 * Cut in its heads, then nobody resumes: the reaper took the lone head for a completion and
 * tidied the upload (its record gone): the retry was NoSuchUpload, the object never appeared,
 * the manifest and parts stayed for good under a lone head naming them. Now the lone head is
 * dropped and the upload opened again (it completes); an Abort drops the lone head before it
 * answers, and the object never shows.
 */
static void test_cut_in_its_heads_settled_or_aborted(void **state)
{
    env_t *e = *state;
    cut_upload_t u, a;
    int why = 0;
    obj_info_t info;
    obj_reaper_t *rp = obj_reaper_new(100);
    cut_upload_new(e, "cut-settled", 420, &u);
    cut_lone_head(e, "cut-settled", 2, &u);
    obj__wall_skew_ns = CUT_STALE;
    assert_int_equal(reap_internal_pass(e, rp, 1000).uploads_settled, 0);
    assert_int_equal(reap_internal_pass(e, rp, 1100).uploads_settled, 1);
    obj__wall_skew_ns = 0;
    assert_int_equal(heads_naming(e, "cut-settled", u.upload), 0);
    assert_int_equal(obj_stat(e->set, "bkt", "cut-settled", &info), ERR_NOT_FOUND);
    assert_int_equal(obj_stat(e->set, MPU_MANIFEST, u.upload, &info), ERR_NOT_FOUND);
    assert_int_equal(uploads_listed(e, &u), 1);
    assert_int_equal(cut_complete(e, "cut-settled", &u, 2, 0, &why), 0);
    assert_cut_object(e, "cut-settled", &u);

    cut_upload_new(e, "cut-aborted-heads", 430, &a);
    cut_lone_head(e, "cut-aborted-heads", 3, &a);
    obj__wall_skew_ns = CUT_STALE;
    assert_int_equal(obj_mpu_abort(e->set, "bkt", "cut-aborted-heads", a.upload), 0);
    obj__wall_skew_ns = 0;
    assert_int_equal(heads_naming(e, "cut-aborted-heads", a.upload), 0);
    assert_int_equal(obj_stat(e->set, "bkt", "cut-aborted-heads", &info), ERR_NOT_FOUND);
    obj__wall_skew_ns = 2 * CUT_STALE;
    (void)reap_internal_pass(e, rp, 2000);
    assert_int_equal(reap_internal_pass(e, rp, 2100).uploads_settled, 1);
    obj__wall_skew_ns = 0;
    assert_int_equal(part_keys(e, a.upload), 0);
    assert_int_equal(obj_stat(e->set, "bkt", "cut-aborted-heads", &info), ERR_NOT_FOUND);
    obj_reaper_free(rp);
    free(u.data);
    free(a.data);
}

/*
 * Completed and tidied (its record gone), then a rewrite of its tags cut after three heads of
 * six: the same Complete sent again. The mend read the version that stands, and none does by
 * its exact heads (two stamps, three each, for COMMIT_STALE_NS): NoSuchUpload, a final answer
 * for an object that is there. Once the record is gone, the current head is enough.
 */
static void test_complete_retry_during_a_rewrite(void **state)
{
    env_t *e = *state;
    const char *key = "cut-rewritten";
    cut_upload_t u;
    int why = 0;
    cut_upload_new(e, key, 440, &u);
    assert_int_equal(cut_complete(e, key, &u, 2, 0, &why), 0);
    cut_heads_on(e, 0x7);
    int rc = obj_update_umeta(e->set, "bkt", key, umeta_tagged, NULL);
    cut_heads_clear(e);
    assert_int_not_equal(rc, 0);
    assert_int_equal(cut_complete(e, key, &u, 2, 0, &why), 0);
    free(u.data);
}

/* Cut in its heads, three stores of six failing their reads: the failing stores' credit made
 * the lone head "stand" (200). That cannot be told: 503. */
static void test_complete_retry_with_stores_failing(void **state)
{
    env_t *e = *state;
    const char *key = "cut-failing";
    cut_upload_t u;
    int why = 0;
    cut_upload_new(e, key, 450, &u);
    cut_lone_head(e, key, 0, &u);
    for (int i = 1; i <= 3; i++)
        e->f[i].fail_read = 1;
    obj__wall_skew_ns = CUT_STALE;
    int rc = cut_complete(e, key, &u, 2, 0, &why);
    obj__wall_skew_ns = 0;
    cut_heads_clear(e);
    assert_true(rc < 0);
    assert_int_not_equal(why, OBJ_MPU_NO_UPLOAD);
    /* With the stores back: resumed. */
    obj__wall_skew_ns = CUT_STALE;
    assert_int_equal(cut_complete(e, key, &u, 2, 0, &why), 0);
    obj__wall_skew_ns = 0;
    assert_cut_object(e, key, &u);
    free(u.data);
}

/*
 * A Complete over an erasure-coded version killed after 3 of its 6 heads: neither version
 * stands (3 and 3), and the commit's read of what stands said "failing stores hide it"
 * though every store answered: the retry, an Abort and the reaper all waited (503) for
 * good, while GET served the upload's object. Every store answering, nothing stands: the
 * retry resumes.
 */
static void test_complete_cut_after_as_many_heads_as_it_covered(void **state)
{
    env_t *e = *state;
    const char *key = "cut-three-of-six";
    cut_upload_t u;
    int why = 0;
    obj_info_t v1, info;
    put_big(e, key, OBJ_UNVERSIONED, &v1);
    cut_upload_new(e, key, 501, &u);
    cut_complete_on(e, key, 0x7, &u);
    obj__wall_skew_ns = CUT_STALE;
    assert_int_equal(cut_complete(e, key, &u, 2, 0, &why), 0);
    obj__wall_skew_ns = 0;
    assert_int_equal(heads_naming(e, key, u.upload), N);
    assert_int_equal(obj_stat_standing(e->set, "bkt", key, &info), 0);
    assert_string_equal(info.upload_id, u.upload);
    assert_cut_object(e, key, &u);
    assert_int_equal(obj_mpu_abort(e->set, "bkt", key, u.upload), ERR_NOT_FOUND); /* completed */
    free(u.data);
}

/*
 * Versioned: a Complete cut with its lone head on store 0, then a PUT acknowledged while store 0
 * was down (five heads). Store 0 back, the retry was answered 200 ("completed, then replaced")
 * though no version of the upload was kept anywhere, and the reaper then dropped its record
 * (the manifest and parts kept for good). A version that replaced it would have kept it at its
 * own position: none there, it never stood, and the retry resumes.
 */
static void test_complete_retry_over_a_head_a_later_put_missed(void **state)
{
    env_t *e = *state;
    const char *key = "cut-missed-by-a-put";
    cut_upload_t u;
    int why = 0;
    obj_info_t v1, v2, info;
    cut_versioning = OBJ_VERSIONED;
    put_big(e, key, OBJ_VERSIONED, &v1);
    cut_upload_new(e, key, 502, &u);
    cut_lone_head(e, key, 0, &u);
    e->f[0].sick = 2;
    put_big(e, key, OBJ_VERSIONED, &v2);
    e->f[0].sick = 0;
    obj__wall_skew_ns = CUT_STALE;
    assert_int_equal(cut_complete(e, key, &u, 2, 0, &why), 0);
    obj__wall_skew_ns = 0;
    assert_int_equal(versions_naming(e, key, u.upload), 1);
    assert_int_equal(obj_stat(e->set, "bkt", key, &info), 0);
    assert_string_equal(info.upload_id, u.upload);
    assert_cut_object(e, key, &u);
    assert_int_equal(obj_stat_version(e->set, "bkt", key, v2.vid, &info), 0);
    cut_versioning = OBJ_UNVERSIONED;
    free(u.data);
}

/*
 * A small version (its bytes on m+1 copies), then a Complete cut with its lone head on one of
 * the copies. The reaper undid the cut commit by removing the lone head only, with nothing
 * standing (two copies of three): the acknowledged object stayed short, and a create-only PUT
 * (If-None-Match: *) went through over it. The version the cut covered is put back, bytes and
 * all, as the commit's own undo would have.
 */
static void test_dropped_cut_heads_put_back_a_small_version(void **state)
{
    env_t *e = *state;
    const char *key = "cut-over-small";
    cut_upload_t u;
    obj_info_t v1, info;
    vput(e, key, "before", OBJ_UNVERSIONED, &v1);
    assert_true(v1.inl != 0);
    int lone = __builtin_ctz(v1.inl);
    cut_upload_new(e, key, 503, &u);
    cut_lone_head(e, key, lone, &u);
    assert_int_equal(obj_stat_standing(e->set, "bkt", key, &info), ERR_NOT_FOUND);
    int settled = settle_cut_uploads(e);
    assert_int_equal(settled, 1);
    assert_int_equal(heads_naming(e, key, u.upload), 0);
    assert_int_equal(obj_stat_standing(e->set, "bkt", key, &info), 0);
    assert_string_equal(info.upload_id, v1.upload_id);
    char body[64];
    vread(e, key, NULL, body, sizeof(body));
    assert_string_equal(body, "before");
    /* A create-only PUT. */
    obj__wall_skew_ns = CUT_STALE; /* V1 old, as it would be */
    int crc = put_create_only(e->set, key);
    obj__wall_skew_ns = 0;
    assert_int_equal(crc, ERR_PRECOND);
    free(u.data);
}

/*
 * Versioned: the cut commit kept V1 as noncurrent before its lone head; the reaper's undo puts
 * V1 back as current, and its noncurrent copy stays. One version is listed, and a later PUT,
 * deletes by id and the upload's Complete all go as they should.
 */
static void test_dropped_cut_heads_leave_one_version_listed(void **state)
{
    env_t *e = *state;
    const char *key = "cut-undone-versioned";
    cut_upload_t u;
    obj_info_t v1, v2, info;
    cut_versioning = OBJ_VERSIONED;
    put_big(e, key, OBJ_VERSIONED, &v1);
    cut_upload_new(e, key, 504, &u);
    cut_lone_head(e, key, 2, &u);
    int settled = settle_cut_uploads(e);
    assert_int_equal(settled, 1);
    assert_int_equal(versions_of(e, key), 1);
    put_big(e, key, OBJ_VERSIONED, &v2);
    assert_int_equal(versions_of(e, key), 2);
    assert_int_equal(obj_delete_version(e->set, "bkt", key, v1.vid, NULL, NULL), 0);
    assert_int_equal(versions_of(e, key), 1);
    assert_int_equal(obj_stat_version(e->set, "bkt", key, v1.vid, &info), ERR_NOT_FOUND);
    assert_int_equal(obj_delete_version(e->set, "bkt", key, v2.vid, NULL, NULL), 0);
    assert_int_equal(obj_stat(e->set, "bkt", key, &info), ERR_NOT_FOUND);
    assert_int_equal(versions_of(e, key), 0);
    /* The upload, reopened, completes. */
    int why = 0;
    assert_int_equal(cut_complete(e, key, &u, 2, 0, &why), 0);
    assert_cut_object(e, key, &u);
    cut_versioning = OBJ_UNVERSIONED;
    free(u.data);
}

/* The same, V1 deleted by id while it is current after the undo: V0 is current again. */
static void test_dropped_cut_heads_then_delete_by_id(void **state)
{
    env_t *e = *state;
    const char *key = "cut-undone-then-deleted";
    cut_upload_t u;
    obj_info_t v0, v1, info;
    cut_versioning = OBJ_VERSIONED;
    put_big(e, key, OBJ_VERSIONED, &v0);
    put_big(e, key, OBJ_VERSIONED, &v1);
    cut_upload_new(e, key, 505, &u);
    cut_lone_head(e, key, 4, &u);
    int settled = settle_cut_uploads(e);
    assert_int_equal(settled, 1);
    assert_int_equal(obj_delete_version(e->set, "bkt", key, v1.vid, NULL, NULL), 0);
    assert_int_equal(obj_stat(e->set, "bkt", key, &info), 0);
    assert_string_equal(info.vid, v0.vid);
    assert_int_equal(obj_stat_version(e->set, "bkt", key, v1.vid, &info), ERR_NOT_FOUND);
    int versions = 0;
    void *arg[2] = {(void *)key, &versions};
    assert_int_equal(obj_list_versions(e->set, "bkt", key, NULL, NULL, count_versions_of, arg), 0);
    assert_int_equal(versions, 1);
    cut_versioning = OBJ_UNVERSIONED;
    free(u.data);
}

/*
 * A plain PUT over an erasure-coded version killed after half its heads (3 of 6, the version
 * it covered keeping 3): neither has k, and nothing ever settled the key. A create-only PUT
 * then went over the acknowledged version (nothing "stood"), a heal gave up on the key, and
 * readers met either version by the stores they asked. The cut heads are the writer's undo
 * left undone: they count for the version they covered, and a heal finishes the undo.
 */
static void test_put_cut_after_half_its_heads(void **state)
{
    env_t *e = *state;
    const char *key = "put-cut-in-half";
    obj_info_t w, x, info;
    put_big(e, key, OBJ_UNVERSIONED, &w);
    put_cut_in_half(e, key, &w, &x);
    /* In flight (its writer may still finish it or undo it): what it covered is waited for. */
    assert_int_equal(put_create_only(e->set, key), ERR_THROTTLED);
    /* A crash's leftover by now. */
    obj__wall_skew_ns = PAST_COMMIT_STALE;
    assert_int_equal(obj_stat_standing(e->set, "bkt", key, &info), 0);
    assert_string_equal(info.upload_id, w.upload_id);
    assert_int_equal(put_create_only(e->set, key), ERR_PRECOND);
    obj_heal_report_t rep = {0};
    assert_int_equal(obj_heal(e->set, "bkt", key, &rep), 0);
    obj__wall_skew_ns = 0;
    assert_int_equal(heads_naming(e, key, x.upload_id), 0);
    assert_int_equal(heads_naming(e, key, w.upload_id), N);
    for (int i = 0; i < N; i++) { /* every reader meets the version acknowledged */
        assert_int_equal(head_on(e, key, i, &info), 0);
        assert_string_equal(info.upload_id, w.upload_id);
    }
    assert_int_equal(obj_stat(e->set, "bkt", key, &info), 0);
    assert_string_equal(info.upload_id, w.upload_id);
}

/* The same cut, then a PUT: it replaces the acknowledged version (its blocks dropped), not
 * nothing. */
static void test_put_over_a_put_cut_in_half(void **state)
{
    env_t *e = *state;
    const char *key = "put-over-cut-in-half";
    obj_info_t w, x, y, info;
    put_big(e, key, OBJ_UNVERSIONED, &w);
    put_cut_in_half(e, key, &w, &x);
    obj__wall_skew_ns = PAST_COMMIT_STALE;
    obj_cond_t c = OBJ_COND_NONE;
    snprintf(c.if_upload, sizeof(c.if_upload), "%s", w.upload_id); /* the version acknowledged */
    int err;
    obj_writer_t *wr = obj_put_begin(e->set, "bkt", key, &err);
    assert_non_null(wr);
    assert_int_equal(obj_put_write(wr, "then", 4), 0);
    obj_put_set_cond(wr, &c);
    assert_int_equal(obj_put_commit(wr, NULL, NULL, 0, &y), 0);
    obj__wall_skew_ns = 0;
    assert_int_equal(obj_stat_standing(e->set, "bkt", key, &info), 0);
    assert_string_equal(info.upload_id, y.upload_id);
    assert_int_equal(heads_naming(e, key, x.upload_id), 0);
    assert_int_equal(heads_naming(e, key, w.upload_id), 0);
}

/* Versioned: the cut commit kept the version it covered as noncurrent first; after the heal and
 * a later PUT, the key has exactly the two versions acknowledged. */
static void test_versioned_put_cut_after_half_its_heads(void **state)
{
    env_t *e = *state;
    const char *key = "vput-cut-in-half";
    obj_info_t w, x, y, info;
    cut_versioning = OBJ_VERSIONED;
    put_big(e, key, OBJ_VERSIONED, &w);
    put_cut_in_half(e, key, &w, &x);
    obj__wall_skew_ns = PAST_COMMIT_STALE;
    obj_heal_report_t rep = {0};
    assert_int_equal(obj_heal(e->set, "bkt", key, &rep), 0);
    assert_int_equal(obj_stat_standing(e->set, "bkt", key, &info), 0);
    assert_string_equal(info.vid, w.vid);
    assert_int_equal(versions_of(e, key), 1);
    put_big(e, key, OBJ_VERSIONED, &y);
    obj__wall_skew_ns = 0;
    assert_int_equal(versions_of(e, key), 2);
    assert_int_equal(versions_naming(e, key, x.upload_id), 0);
    assert_int_equal(obj_stat_version(e->set, "bkt", key, w.vid, &info), 0);
    assert_string_equal(info.upload_id, w.upload_id);
    cut_versioning = OBJ_UNVERSIONED;
}

/*
 * The same with one store empty: the version was acknowledged on five stores (store 0 down
 * meanwhile, not yet healed), and the PUT over it cut after stores 1-3 (its head to store 0
 * failed). An acknowledged version can lose wq - k heads and still stand: with the write
 * quorum k+1, one store empty leaves the verdict as sure.
 */
static void test_put_cut_in_half_beside_an_empty_store(void **state)
{
    env_t *e = *state;
    const char *key = "put-cut-beside-empty";
    obj_info_t w, x, info;
    assert_int_equal(obj_set_write_quorum(e->set, K + 1), 0); /* as a node has it */
    e->f[0].sick = 2;
    put_big(e, key, OBJ_UNVERSIONED, &w);
    e->f[0].sick = 0;
    assert_int_equal(heads_naming(e, key, w.upload_id), 5);
    assert_int_not_equal(put_cut(e, key, 0xe), 0);
    assert_int_equal(head_on(e, key, 1, &x), 0);
    assert_int_equal(heads_naming(e, key, x.upload_id), 3);
    assert_int_equal(head_on(e, key, 0, &info), ERR_NOT_FOUND);
    obj__wall_skew_ns = PAST_COMMIT_STALE;
    assert_int_equal(obj_stat_standing(e->set, "bkt", key, &info), 0);
    assert_string_equal(info.upload_id, w.upload_id);
    obj_heal_report_t rep = {0};
    assert_int_equal(obj_heal(e->set, "bkt", key, &rep), 0);
    obj__wall_skew_ns = 0;
    assert_int_equal(heads_naming(e, key, x.upload_id), 0);
    assert_int_equal(heads_naming(e, key, w.upload_id), N); /* store 0 healed too */
}

/*
 * The heal queue on a key split short whose undo keeps failing (the cut heads' stores fail
 * their writes):
 * the heal's own read of what stands noted the key again, and a heal noted again meanwhile
 * ran again at once, without its backoff: a loop on one core for as long as the store
 * failed. Now it is tried again later, as any heal that fails.
 */
static void test_heal_of_a_split_key_failing_backs_off(void **state)
{
    env_t *e = *state;
    const char *key = "put-cut-heal-loop";
    obj_info_t w, x, info;
    put_big(e, key, OBJ_UNVERSIONED, &w);
    put_cut_in_half(e, key, &w, &x);
    assert_int_equal(obj_set_heal_start(e->set), 0);
    for (int i = 0; i < 3; i++)
        e->f[i].fail_write = 1;
    obj__wall_skew_ns = PAST_COMMIT_STALE;
    assert_int_equal(obj_stat_standing(e->set, "bkt", key, &info), 0); /* noted */
    obj_heal_stats_t st = {0};
    for (int t = 0; t < 6000 && st.retries == 0; t++) {
        usleep(10000);
        obj_heal_stats(e->set, &st);
    }
    for (int i = 0; i < 3; i++)
        e->f[i].fail_write = 0;
    obj__wall_skew_ns = 0;
    print_message("queued %llu, retries %llu\n", (unsigned long long)st.queued,
                  (unsigned long long)st.retries);
    assert_int_equal(st.retries, 1);
    assert_true(st.queued <= 2);
}
static char stall_upload[33];
static int stall_state, stall_done, stall_heal_rc;

static void stall_mid_heads(const drive_id_t *id, const void *meta, size_t ml)
{
    obj_info_t h;
    if (strcmp(id->key, stall_key) != 0 || id->shard < 3 || obj_meta_decode(meta, ml, &h) != 0 ||
        strcmp(h.upload_id, stall_before) == 0)
        return;
    if (__atomic_fetch_add(&stall_state, 1, __ATOMIC_SEQ_CST) == 0) {
        memcpy(stall_upload, h.upload_id, sizeof(stall_upload));
        for (int t = 0; t < 60000 && heads_naming(stall_env, stall_key, stall_upload) < 3; t++)
            usleep(1000);
        obj__wall_skew_ns = PAST_COMMIT_STALE;
        obj_heal_report_t rep = {0};
        stall_heal_rc = obj_heal(stall_env->set, "bkt", stall_key, &rep);
        __atomic_store_n(&stall_done, 1, __ATOMIC_SEQ_CST);
    } else {
        wait_flag(&stall_done);
    }
}

/*
 * A writer that stalls in the middle of its heads for longer than others wait for one (a
 * heal of the key, reading half of them, takes them for a crash's leftover and finishes their
 * undo), then lands the rest: acknowledged, its version stood on half the stores and was lost
 * to the version it covered. A commit whose heads land that late is in doubt (503).
 */
static void test_put_stalled_past_a_heal_of_its_heads(void **state)
{
    env_t *e = *state;
    char key[48];
    key_on_012(e, "put-stalled", key, sizeof(key)); /* the stores a read asks first */
    obj_info_t w, x, info;
    put_big(e, key, OBJ_UNVERSIONED, &w);
    stall_env = e;
    stall_key = key;
    stall_before = w.upload_id;
    stall_state = stall_done = 0;
    stall_heal_rc = 1;
    int err;
    static uint8_t big[100000];
    obj_writer_t *wr = obj_put_begin(e->set, "bkt", key, &err);
    assert_non_null(wr);
    assert_int_equal(obj_put_write(wr, big, sizeof(big)), 0);
    rf_put_head_hook = stall_mid_heads;
    int rc = obj_put_commit(wr, NULL, NULL, 0, &x);
    rf_put_head_hook = NULL;
    int sp = obj_stat_standing(e->set, "bkt", key, &info);
    obj__wall_skew_ns = 0;
    print_message("heal=%d put=%d standing=%d (%s)\n", stall_heal_rc, rc, sp,
                  sp                                          ? "-"
                  : strcmp(info.upload_id, stall_upload) == 0 ? "the PUT"
                                                              : "before");
    assert_int_equal(stall_heal_rc, 0);
    if (rc == 0) { /* acknowledged: it stands */
        assert_int_equal(sp, 0);
        assert_string_equal(info.upload_id, x.upload_id);
    }
    assert_int_equal(rc, ERR_UNRECOVERABLE); /* in doubt */
}

/* ---- Writes that land late: what their callers answer and keep ---- */

/* rf_put_head_hook: the late_at-th head of late_bkt/late_key put at its current position (any
 * writer) finds the clock 6 s on: the write's heads land past OBJ__COMMIT_STALE_NS / 2. */
static const char *late_bkt, *late_key;
static int late_at, late_seen;

static void land_late(const drive_id_t *id, const void *meta, size_t ml)
{
    (void)meta;
    (void)ml;
    if (!late_key || strcmp(id->bucket, late_bkt) != 0 || strcmp(id->key, late_key) != 0) return;
    if (__atomic_add_fetch(&late_seen, 1, __ATOMIC_SEQ_CST) == late_at)
        obj__wall_skew_ns = 6 * 1000000000ll;
}

static void late_arm(const char *bkt, const char *key, int at)
{
    late_bkt = bkt;
    late_key = key;
    late_at = at;
    late_seen = 0;
    rf_put_head_hook = land_late;
}

static void late_disarm(void)
{
    rf_put_head_hook = NULL;
    late_key = NULL;
    obj__wall_skew_ns = 0;
}

/*
 * An Abort of an open upload whose close (the record's delete marker) lands late: the commit
 * answers in doubt, obj__upload_close heals the record (the marker stands) and tries the close
 * again, conditioned on the open record's stamp: it fails on the Abort's own marker, and the
 * Abort answers NoSuchUpload (404) for the upload it aborted itself, its parts left to the
 * reaper. In doubt is 503 (the retry then finds the upload gone: 404, as S3 answers an Abort
 * sent again), or the close took effect: 204.
 */
static void test_late_abort_close_is_not_no_such_upload(void **state)
{
    env_t *e = *state;
    const char *key = "late-abort";
    cut_upload_t u;
    cut_upload_new(e, key, 901, &u);
    assert_int_equal(part_keys(e, u.upload), 2);
    late_arm(MPU_UPLOADS, u.upload, 2);
    int rc = obj_mpu_abort(e->set, "bkt", key, u.upload);
    int seen = late_seen;
    late_disarm();
    print_message("abort=%d (%s), heads seen %d, parts left %d\n", rc, err_name(rc), seen,
                  part_keys(e, u.upload));
    assert_true(seen >= 2);
    assert_int_not_equal(rc, ERR_NOT_FOUND); /* its own close: never NoSuchUpload */
    free(u.data);
}

/*
 * A Complete whose object commit lands late: in doubt (503), and the manifest, the parts and
 * the closing record stay; the same Complete sent again answers 200 with the object.
 */
static void test_late_complete_commit_then_retry(void **state)
{
    env_t *e = *state;
    const char *key = "late-complete";
    cut_upload_t u;
    int why = 0;
    obj_info_t info, done;
    cut_upload_new(e, key, 902, &u);
    late_arm("bkt", key, 3);
    int rc = obj_mpu_complete(e->set, "bkt", key, u.upload, u.parts, 2, 1, NULL, OBJ_UNVERSIONED,
                              &done, &why);
    late_disarm();
    print_message("complete=%d (%s) why=%d parts=%d\n", rc, err_name(rc), why,
                  part_keys(e, u.upload));
    assert_int_equal(rc, ERR_UNRECOVERABLE);
    assert_int_equal(part_keys(e, u.upload), 2);
    assert_int_equal(obj_stat(e->set, MPU_MANIFEST, u.upload, &info), 0);
    rc = obj_mpu_complete(e->set, "bkt", key, u.upload, u.parts, 2, 1, NULL, OBJ_UNVERSIONED, &done,
                          &why);
    print_message("retry=%d (%s) why=%d\n", rc, err_name(rc), why);
    assert_int_equal(rc, 0);
    assert_cut_object(e, key, &u);
    free(u.data);
}

/*
 * A Complete whose close (the closing record) lands late: obj__upload_close heals the record and
 * tries again, conditioned on the open record: that fails on its own closing record. The
 * Complete must not answer NoSuchUpload; sent again once the closer is surely gone, it resumes.
 */
static void test_late_complete_close_then_retry(void **state)
{
    env_t *e = *state;
    const char *key = "late-complete-close";
    cut_upload_t u;
    int why = 0;
    obj_info_t done;
    cut_upload_new(e, key, 903, &u);
    late_arm(MPU_UPLOADS, u.upload, 2);
    int rc = obj_mpu_complete(e->set, "bkt", key, u.upload, u.parts, 2, 1, NULL, OBJ_UNVERSIONED,
                              &done, &why);
    late_disarm();
    print_message("complete=%d (%s) why=%d parts=%d\n", rc, err_name(rc), why,
                  part_keys(e, u.upload));
    assert_int_not_equal(why, OBJ_MPU_NO_UPLOAD);
    assert_int_equal(part_keys(e, u.upload), 2);
    if (rc != 0) {
        obj__wall_skew_ns = CUT_STALE;
        rc = obj_mpu_complete(e->set, "bkt", key, u.upload, u.parts, 2, 1, NULL, OBJ_UNVERSIONED,
                              &done, &why);
        obj__wall_skew_ns = 0;
        print_message("retry=%d (%s) why=%d\n", rc, err_name(rc), why);
        assert_int_equal(rc, 0);
    }
    assert_cut_object(e, key, &u);
    free(u.data);
}

/* A delete marker that lands late: in doubt; the version it covers stays, noncurrent. */
static void test_late_delete_marker_keeps_the_version(void **state)
{
    env_t *e = *state;
    const char *key = "late-marker";
    obj_info_t v1, info, m;
    put_big(e, key, OBJ_VERSIONED, &v1);
    late_arm("bkt", key, 3);
    int rc = obj_delete_current(e->set, "bkt", key, NULL, OBJ_VERSIONED, &m);
    late_disarm();
    print_message("marker=%d (%s), versions %d\n", rc, err_name(rc), versions_of(e, key));
    assert_int_equal(rc, ERR_UNRECOVERABLE);
    assert_int_equal(obj_stat_version(e->set, "bkt", key, v1.vid, &info), 0);
    int err;
    obj_reader_t *r = obj_open_version(e->set, "bkt", key, v1.vid, &info, &err);
    assert_non_null(r);
    static uint8_t got[100000];
    assert_int_equal(obj_read(r, 0, got, sizeof(got)), 0);
    obj_close(r);
}

/* An unversioned delete whose tombstones land late: in doubt, the version's blocks kept; a
 * retry finds nothing (204). */
static void test_late_unversioned_delete_then_retry(void **state)
{
    env_t *e = *state;
    const char *key = "late-delete";
    obj_info_t v1, info;
    put_big(e, key, OBJ_UNVERSIONED, &v1);
    late_arm("bkt", key, 3);
    int rc = obj_delete(e->set, "bkt", key);
    late_disarm();
    int blocks = 0;
    for (int i = 0; i < N; i++)
        blocks += has_block(e, key, v1.upload_id, 0, i);
    print_message("delete=%d (%s), blocks of v1 left %d\n", rc, err_name(rc), blocks);
    assert_int_equal(rc, ERR_UNRECOVERABLE);
    assert_int_equal(blocks, N);
    assert_int_equal(obj_stat(e->set, "bkt", key, &info), ERR_NOT_FOUND);
    assert_int_equal(obj_delete(e->set, "bkt", key), ERR_NOT_FOUND);
}

/* A delete by id of the current version whose promotion lands late: in doubt, and the deleted
 * version's blocks stay while a head may name it; the retry is answered. */
static void test_late_promotion_then_retry(void **state)
{
    env_t *e = *state;
    const char *key = "late-promo";
    obj_info_t v1, v2, info;
    put_big(e, key, OBJ_VERSIONED, &v1);
    put_big(e, key, OBJ_VERSIONED, &v2);
    late_arm("bkt", key, 3);
    int rc = obj_delete_version(e->set, "bkt", key, v2.vid, NULL, NULL);
    late_disarm();
    int blocks = 0;
    for (int i = 0; i < N; i++)
        blocks += has_block(e, key, v2.upload_id, 0, i);
    int src = obj_stat(e->set, "bkt", key, &info);
    print_message("delete v2=%d (%s), v2 blocks %d, current %d %s, v2 versions %d\n", rc,
                  err_name(rc), blocks, src, src ? "-" : info.vid,
                  versions_naming(e, key, v2.upload_id));
    assert_int_equal(rc, ERR_UNRECOVERABLE);
    assert_int_equal(blocks, N);
    rc = obj_delete_version(e->set, "bkt", key, v2.vid, NULL, NULL);
    src = obj_stat(e->set, "bkt", key, &info);
    print_message("retry=%d (%s), current %d %s, versions %d\n", rc, err_name(rc), src,
                  src ? "-" : info.vid, versions_of(e, key));
    assert_true(rc == 0 || rc == ERR_NOT_FOUND);
    assert_int_equal(src, 0);
    assert_string_equal(info.upload_id, v1.upload_id);
    assert_int_equal(versions_naming(e, key, v2.upload_id), 0);
}

/*
 * A Suspended write whose heads land late (in doubt) over a key whose null version N is
 * noncurrent below a versioned one: it retires no null version (it may be undone yet), so N
 * stays below. Listed, the key has one null version; deleted by id ("null"), the null version
 * must be gone: N came back as the key's null version, bytes the client had replaced and then
 * deleted.
 */
static int nulls_cb(void *arg, const char *key, const obj_info_t *info, int latest)
{
    (void)key;
    (void)latest;
    if (!info->vid[0]) (*(int *)arg)++;
    return 0;
}

static int nulls_listed(env_t *e, const char *key)
{
    int n = 0;
    assert_int_equal(obj_list_versions(e->set, "bkt", key, NULL, NULL, nulls_cb, &n), 0);
    return n;
}

static void test_late_suspended_put_then_delete_of_the_null_version(void **state)
{
    env_t *e = *state;
    const char *key = "late-suspended";
    obj_info_t n0, v1, c, info;
    vput(e, key, "null zero", OBJ_UNVERSIONED, &n0);
    vput(e, key, "version one", OBJ_VERSIONED, &v1);
    late_arm("bkt", key, 3);
    int err;
    obj_writer_t *w = obj_put_begin(e->set, "bkt", key, &err);
    assert_non_null(w);
    assert_int_equal(obj_put_write(w, "late null", 9), 0);
    obj_put_set_versioning(w, OBJ_SUSPENDED);
    int rc = obj_put_commit(w, NULL, NULL, 0, &c);
    late_disarm();
    char got[64];
    vread(e, key, "null", got, sizeof(got));
    print_message("put=%d (%s), nulls listed %d, null reads '%s'\n", rc, err_name(rc),
                  nulls_listed(e, key), got);
    assert_int_equal(rc, ERR_UNRECOVERABLE); /* in doubt */
    assert_int_equal(nulls_listed(e, key), 1);
    assert_string_equal(got, "late null"); /* it stands */
    assert_int_equal(obj_delete_version(e->set, "bkt", key, "null", NULL, NULL), 0);
    vread(e, key, "null", got, sizeof(got));
    print_message("after the delete: nulls listed %d, null reads '%s'\n", nulls_listed(e, key),
                  got);
    assert_int_equal(nulls_listed(e, key), 0);
    assert_string_equal(got, "");
    assert_int_equal(obj_stat_version(e->set, "bkt", key, "null", &info), ERR_NOT_FOUND);
    assert_int_equal(obj_stat(e->set, "bkt", key, &info), 0);
    assert_string_equal(info.vid, v1.vid); /* the versioned one is current */
    vread(e, key, v1.vid, got, sizeof(got));
    assert_string_equal(got, "version one");
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_complete_cut_short_is_resumed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_complete_cut_short_is_aborted_or_settled, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_complete_cut_short_never_makes_a_second_version, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_complete_cut_in_its_heads_is_resumed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_complete_retry_over_a_promotion_cut_short, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_complete_retry_under_a_newer_head, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cut_in_its_heads_settled_or_aborted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_complete_retry_during_a_rewrite, setup, teardown),
        cmocka_unit_test_setup_teardown(test_complete_retry_with_stores_failing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_complete_cut_after_as_many_heads_as_it_covered, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_complete_retry_over_a_head_a_later_put_missed, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_dropped_cut_heads_put_back_a_small_version, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_dropped_cut_heads_leave_one_version_listed, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_dropped_cut_heads_then_delete_by_id, setup, teardown),
        cmocka_unit_test_setup_teardown(test_put_cut_after_half_its_heads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_put_over_a_put_cut_in_half, setup, teardown),
        cmocka_unit_test_setup_teardown(test_versioned_put_cut_after_half_its_heads, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_put_stalled_past_a_heal_of_its_heads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_put_cut_in_half_beside_an_empty_store, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_heal_of_a_split_key_failing_backs_off, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_late_abort_close_is_not_no_such_upload, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_late_complete_commit_then_retry, setup, teardown),
        cmocka_unit_test_setup_teardown(test_late_complete_close_then_retry, setup, teardown),
        cmocka_unit_test_setup_teardown(test_late_delete_marker_keeps_the_version, setup, teardown),
        cmocka_unit_test_setup_teardown(test_late_unversioned_delete_then_retry, setup, teardown),
        cmocka_unit_test_setup_teardown(test_late_promotion_then_retry, setup, teardown),
        cmocka_unit_test_setup_teardown(test_late_suspended_put_then_delete_of_the_null_version,
                                        setup, teardown),
    };
    obj_fixture_args(argc, argv);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
