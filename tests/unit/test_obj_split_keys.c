/*
 * Keys split short: the rule that says which version stands when a commit
 * was cut on some stores (small versions, late promotions, second cuts,
 * delete markers cut short), and the heal and undo that follow.
 */
#include "obj_fixture.h"

static int count_keys(drive_t *d, const char *bucket)
{
    int n = 0;
    assert_int_equal(drive_list(d, bucket, NULL, NULL, count_cb, &n), 0);
    return n;
}

/* ---- A second read of the split-key rule: small versions, late promotions and commits ---- */

/* A small PUT of `body` whose heads land on the stores of `on` only, then a kill. */
static int vput_cut(env_t *e, const char *key, const char *body, obj_versioning_t v, uint32_t on)
{
    int err;
    obj_writer_t *w = obj_put_begin(e->set, "bkt", key, &err);
    assert_non_null(w);
    assert_int_equal(obj_put_write(w, body, strlen(body)), 0);
    obj_put_set_versioning(w, v);
    cut_heads_on(e, on);
    obj_info_t info;
    int rc = obj_put_commit(w, NULL, NULL, 0, &info);
    cut_heads_clear(e);
    return rc;
}

/*
 * A small (sparse) version written over a delete's tombstones (within their minute: the
 * stores that are not its copies keep them), then a small PUT over it cut after two of its
 * three copies. Every store answers with a head, nothing stands: the credit walk passes the
 * sparse version by (it never "stands" there) and hands its heads and the cut's to the
 * tombstone, which "stands" on 3 + 3. The key reads as deleted for every commit, and the heal
 * puts the tombstone over the cut heads, then over the acknowledged version's last copy.
 */
static void test_sparse_put_over_tombstones_then_cut(void **state)
{
    env_t *e = *state;
    char key[48];
    key_on_012(e, "sparse-over-tomb", key, sizeof(key));
    obj_info_t v1, v2, info;
    vput(e, key, "first", OBJ_UNVERSIONED, &v1);
    assert_int_equal(obj_delete(e->set, "bkt", key), 0);
    vput(e, key, "second", OBJ_UNVERSIONED, &v2); /* acknowledged */
    assert_true(v2.sparse);
    assert_int_equal(heads_naming(e, key, v2.upload_id), 3);
    assert_int_equal(heads_naming(e, key, v1.upload_id), 3); /* the tombstones */
    assert_int_not_equal(vput_cut(e, key, "third", OBJ_UNVERSIONED, 0x3), 0);
    assert_int_equal(heads_naming(e, key, v2.upload_id), 1);
    obj__wall_skew_ns = PAST_COMMIT_STALE;
    int sp = obj_stat_standing(e->set, "bkt", key, &info);
    print_message("standing=%d (%s)\n", sp, sp ? "-" : info.upload_id);
    /* Heals, as the queue would run them (it comes back to a key): then a read. */
    for (int i = 0; i < 3; i++) {
        obj_heal_report_t rep = {0};
        int hrc = obj_heal(e->set, "bkt", key, &rep);
        print_message("heal %d: %d, heads of v2 %d\n", i, hrc, heads_naming(e, key, v2.upload_id));
    }
    obj__wall_skew_ns = 0;
    /* The version acknowledged (or the cut one, carried through): never nothing. */
    int rc = obj_stat(e->set, "bkt", key, &info);
    assert_int_equal(rc, 0);
    /* A create-only PUT is refused: the key holds a version. */
    obj__wall_skew_ns = PAST_COMMIT_STALE;
    rc = put_create_only(e->set, key);
    obj__wall_skew_ns = 0;
    assert_int_not_equal(rc, 0);
}

/* rf_put_head_hook: the first head of the promotion (a copy of v1, at the current position)
 * waits while a delete of v1 by id runs through another node, then the clock moves past half
 * of COMMIT_STALE_NS; the promotion's other heads wait for that. */
static obj_set_t *pl_other;
static const char *pl_key, *pl_upload, *pl_vid;
static int pl_state, pl_done, pl_del_rc;
static __thread int pl_inside;

static void promote_late_hook(const drive_id_t *id, const void *meta, size_t ml)
{
    obj_info_t h;
    if (pl_inside || strcmp(id->key, pl_key) != 0 || obj_meta_decode(meta, ml, &h) != 0 ||
        strcmp(h.upload_id, pl_upload) != 0 || h.deleted)
        return;
    if (__atomic_fetch_add(&pl_state, 1, __ATOMIC_SEQ_CST) == 0) {
        pl_inside = 1;
        pl_del_rc = obj_delete_version(pl_other, "bkt", pl_key, pl_vid, NULL, NULL);
        pl_inside = 0;
        obj__wall_skew_ns = 6 * 1000000000ll; /* the promotion's heads land 6 s after its stamp */
        __atomic_store_n(&pl_done, 1, __ATOMIC_SEQ_CST);
    } else {
        wait_flag(&pl_done);
    }
}

/*
 * A delete by id of a small (inline) current version while two stores fail, one of them a
 * copy of it (a node killed, not yet seen as down): the promotion of the version below lands
 * on four stores of six, short of its quorum, and is taken back. But landing, it had replaced
 * the version's copies on two stores, and their bytes were read only for the put-back, from
 * the failing copy: "no copy to put back, its heads go". The version kept one copy, on the
 * failing store: the delete answered 503, its retry through another node 204 (the version
 * looked gone), and once the store was back GET served the deleted version while listings
 * left it out (a cluster probe: 27 times in a run). The bytes are read before the promotion
 * now, and put back with it.
 */
static void test_delete_of_a_small_version_with_a_copy_failing(void **state)
{
    env_t *e = *state;
    char key[48];
    key_on_012(e, "small-del", key, sizeof(key));
    obj_info_t v1, v2, info;
    vput(e, key, "the older one", OBJ_VERSIONED, &v1);
    vput(e, key, "the newer one", OBJ_VERSIONED, &v2);
    assert_true(v2.inl);
    const int failing[] = {2, 4, 5}; /* one of v2's copies (0-2), and two more stores */
    for (int i = 0; i < 3; i++)
        e->f[failing[i]].fail_read = e->f[failing[i]].fail_write = 1;
    int rc = obj_delete_version(e->set, "bkt", key, v2.vid, NULL, NULL);
    for (int i = 0; i < 3; i++)
        e->f[failing[i]].fail_read = e->f[failing[i]].fail_write = 0;
    int copies = heads_naming(e, key, v2.upload_id);
    print_message("delete: %d; v2's copies %d\n", rc, copies);
    /* Refused (too few stores for the promotion): v2 stands as it was, on its three copies,
     * and reads. */
    assert_int_not_equal(rc, 0);
    assert_int_equal(copies, 3);
    assert_int_equal(obj_stat_standing(e->set, "bkt", key, &info), 0);
    assert_string_equal(info.upload_id, v2.upload_id);
    char got[64];
    vread(e, key, v2.vid, got, sizeof(got));
    assert_string_equal(got, "the newer one");
    /* And the delete, sent again with every store back, takes it. */
    assert_int_equal(obj_delete_version(e->set, "bkt", key, v2.vid, NULL, NULL), 0);
    assert_int_equal(obj_stat(e->set, "bkt", key, &info), 0);
    assert_string_equal(info.upload_id, v1.upload_id);
}

/*
 * A delete by id of the current version v2 promotes v1; a delete of v1 by id through another
 * node runs between the promotion's walk and its heads, and sees v2 still current (v1's blocks
 * dropped, 204). The promotion then lands late (past COMMIT_STALE_NS / 2): answered "in doubt"
 * before its check that its successor stays (successor_stays), it leaves the deleted v1 current,
 * its blocks gone: a listed version nobody can read, after an acknowledged delete.
 */
static void test_late_promotion_of_a_version_deleted_meanwhile(void **state)
{
    env_t *e = *state;
    const char *key = "late-promotion";
    obj_info_t v1, v2, info;
    put_big(e, key, OBJ_VERSIONED, &v1);
    put_big(e, key, OBJ_VERSIONED, &v2);
    pl_other = other_gateway(e);
    pl_key = key;
    pl_upload = v1.upload_id;
    pl_vid = v1.vid;
    pl_state = pl_done = 0;
    pl_del_rc = 1;
    rf_put_head_hook = promote_late_hook;
    int rc = obj_delete_version(e->set, "bkt", key, v2.vid, NULL, NULL);
    rf_put_head_hook = NULL;
    obj__wall_skew_ns = 0;
    print_message("delete v2=%d, delete v1 (other node)=%d, hook=%d\n", rc, pl_del_rc, pl_state);
    assert_true(pl_state > 0);
    assert_int_equal(pl_del_rc, 0); /* acknowledged */
    int src = obj_stat(e->set, "bkt", key, &info);
    print_message("current: %d %s\n", src, src ? "-" : info.upload_id);
    /* v1 was deleted (204): it is current nowhere. */
    assert_false(src == 0 && strcmp(info.upload_id, v1.upload_id) == 0);
    assert_int_equal(versions_naming(e, key, v1.upload_id), 0);
    obj_set_free(pl_other);
}

/* obj__promote_hook: between the promotion's walk and its heads, the successor (v1) is
 * deleted by id through another node, which reads v2 still current. */
static obj_set_t *rc_other;
static const char *rc_vid;
static int rc_del_rc;
static void delete_successor_meanwhile(void *arg, const char *key)
{
    (void)arg;
    rc_del_rc = obj_delete_version(rc_other, "bkt", key, rc_vid, NULL, NULL);
}

/* obj__promoted_hook: once the promotion stands, every store fails its reads for a while. */
static void reads_fail_after_promotion(void *arg, const char *key)
{
    env_t *e = arg;
    (void)key;
    for (int i = 0; i < N; i++)
        e->f[i].fail_read = 1;
}

/*
 * A delete by id of the current version v2 promotes v1, while a delete of v1 by id through
 * another node runs between the promotion's walk and its heads: that delete reads v2 still
 * current, retires v1 and drops its blocks (204). The promotion's own check that v1 stays
 * (successor_stays) then cannot read (stores failing): it answered 204 and left v1 current,
 * its blocks gone, for good: every reader failed, the heal failed on its blocks. The check
 * that cannot tell notes the key, and the heal promotes past a version retired at its own
 * position.
 */
static void test_promotion_of_a_version_deleted_meanwhile_unchecked(void **state)
{
    env_t *e = *state;
    const char *key = "promote-unchecked";
    obj_info_t v1, v2, info;
    put_big(e, key, OBJ_VERSIONED, &v1);
    put_big(e, key, OBJ_VERSIONED, &v2);
    rc_other = other_gateway(e);
    rc_vid = v1.vid;
    rc_del_rc = 1;
    obj__promote_hook = delete_successor_meanwhile;
    obj__promoted_hook = reads_fail_after_promotion;
    obj__promoted_hook_arg = e;
    int rc = obj_delete_version(e->set, "bkt", key, v2.vid, NULL, NULL);
    obj__promote_hook = NULL;
    obj__promoted_hook = NULL;
    for (int i = 0; i < N; i++)
        e->f[i].fail_read = 0;
    int src = obj_stat(e->set, "bkt", key, &info);
    print_message("delete v2=%d, delete v1 (other node)=%d; current: %d %s\n", rc, rc_del_rc, src,
                  src ? "-" : info.upload_id);
    assert_int_equal(rc_del_rc, 0); /* acknowledged */
    obj_heal_report_t rep = {0};
    int hrc = obj_heal(e->set, "bkt", key, &rep);
    src = obj_stat(e->set, "bkt", key, &info);
    print_message("heal %d; current: %d %s\n", hrc, src, src ? "-" : info.upload_id);
    /* v1 was deleted (204): it is current nowhere, and nothing names it. */
    assert_false(src == 0 && strcmp(info.upload_id, v1.upload_id) == 0);
    assert_int_equal(versions_naming(e, key, v1.upload_id), 0);
    obj_set_free(rc_other);
}

/*
 * rf_put_head_hook for a PUT (versioned, write quorum 5) whose heads stall twice: on store 3,
 * until stores 0-2 hold its head, then a heal past COMMIT_STALE_NS takes those three for a cut
 * commit's and finishes their undo; on store 4, until store 3 holds it, then a PUT through
 * another node covers the key. Store 5 waits for both.
 */
static obj_set_t *ss_other;
static char ss_upload[33];
static int ss_state, ss_heal_done, ss_put_done, ss_heal_rc, ss_put_rc;
static obj_info_t ss_n;

static void superseded_stalls(const drive_id_t *id, const void *meta, size_t ml)
{
    obj_info_t h;
    if (strcmp(id->key, stall_key) != 0 || id->shard < 3 || obj_meta_decode(meta, ml, &h) != 0 ||
        strcmp(h.upload_id, stall_before) == 0)
        return;
    if (ss_upload[0] && strcmp(h.upload_id, ss_upload) != 0) return; /* the other node's PUT */
    if (id->shard == 3) {
        memcpy(ss_upload, h.upload_id, sizeof(ss_upload));
        for (int t = 0; t < 2000 && heads_naming(stall_env, stall_key, ss_upload) < 3; t++)
            usleep(1000);
        obj__wall_skew_ns = PAST_COMMIT_STALE;
        obj_heal_report_t rep = {0};
        ss_heal_rc = obj_heal(stall_env->set, "bkt", stall_key, &rep);
        __atomic_store_n(&ss_heal_done, 1, __ATOMIC_SEQ_CST);
    } else if (id->shard == 4) {
        wait_flag(&ss_heal_done);
        for (int t = 0; t < 2000 && heads_naming(stall_env, stall_key, ss_upload) < 1; t++)
            usleep(1000);
        static uint8_t other_big[100000];
        int err;
        obj_writer_t *w = obj_put_begin(ss_other, "bkt", stall_key, &err);
        assert_non_null(w);
        assert_int_equal(obj_put_write(w, other_big, sizeof(other_big)), 0);
        obj_put_set_versioning(w, OBJ_VERSIONED);
        ss_put_rc = obj_put_commit(w, NULL, NULL, 0, &ss_n);
        __atomic_store_n(&ss_put_done, 1, __ATOMIC_SEQ_CST);
    } else {
        wait_flag(&ss_put_done);
    }
}

/*
 * A versioned PUT whose heads land late (past COMMIT_STALE_NS / 2): a heal undid the three it
 * had landed, a PUT through another node then covered the version that stood again (kept it as
 * noncurrent) and the stalled PUT's own fourth head. The stalled PUT counted 4 heads (k: it
 * "stands"), was refused on the rest, found the newer version standing and took itself for
 * covered by it (`superseded`): acknowledged, with no version of it anywhere. The check for a
 * late commit is skipped on that path.
 */
static void test_late_put_taken_for_superseded(void **state)
{
    env_t *e = *state;
    char key[48];
    key_on_012(e, "late-superseded", key, sizeof(key));
    assert_int_equal(obj_set_write_quorum(e->set, K + 1), 0); /* a cluster's default */
    obj_info_t w, x;
    put_big(e, key, OBJ_VERSIONED, &w);
    ss_other = other_gateway(e);
    assert_int_equal(obj_set_write_quorum(ss_other, K + 1), 0);
    stall_env = e;
    stall_key = key;
    stall_before = w.upload_id;
    ss_upload[0] = 0;
    ss_state = ss_heal_done = ss_put_done = 0;
    ss_heal_rc = ss_put_rc = 1;
    int err;
    static uint8_t big[100000];
    fill(big, sizeof(big), 77);
    obj_writer_t *wr = obj_put_begin(e->set, "bkt", key, &err);
    assert_non_null(wr);
    assert_int_equal(obj_put_write(wr, big, sizeof(big)), 0);
    obj_put_set_versioning(wr, OBJ_VERSIONED);
    rf_put_head_hook = superseded_stalls;
    int rc = obj_put_commit(wr, NULL, NULL, 0, &x);
    rf_put_head_hook = NULL;
    obj__wall_skew_ns = 0;
    print_message("heal=%d other put=%d stalled put=%d; versions naming it %d, versions %d\n",
                  ss_heal_rc, ss_put_rc, rc, versions_naming(e, key, ss_upload),
                  versions_of(e, key));
    assert_int_equal(ss_put_rc, 0);
    const char *names[3][2] = {
        {"before", w.upload_id}, {"other node", ss_n.upload_id}, {"stalled", ss_upload}};
    for (int i = 0; i < 3; i++)
        print_message("  %s: %d version(s)\n", names[i][0], versions_naming(e, key, names[i][1]));
    if (rc == 0) { /* acknowledged: it is one of the key's versions */
        obj_info_t info;
        assert_int_equal(obj_stat_version(e->set, "bkt", key, x.vid, &info), 0);
        assert_int_equal(versions_naming(e, key, x.upload_id), 1);
    }
    obj_set_free(ss_other);
}

/* ---- Second cuts, small versions under a cut, delete markers cut short ---- */

/*
 * Two writers killed in turn on one key (a node in a crash loop, the client retrying): a PUT
 * over W cut after stores 0-2, then, once that is a leftover, a second PUT cut after stores 3
 * and 4. The second commit read W as current (the credit) and its heads took W's place, not
 * the first cut's; its undo would have put W back. The credit walk hands them to the first
 * cut instead (2 + 3 >= k): a version never acknowledged "stands", W (acknowledged, its last
 * head on store 5) is lost, and the heal writes the first cut over every store.
 */
/* rf_put_head_hook: the kill comes with the PUT's own first head (not before: what the commit
 * writes first, an undo of what it found, lands), then its heads land on arm_mask only. */
static env_t *arm_env;
static uint32_t arm_mask;
static const char *arm_not[2];
static int arm_done;

static void arm_cut_at_own_heads(const drive_id_t *id, const void *meta, size_t ml)
{
    obj_info_t h;
    (void)id;
    if (arm_done || obj_meta_decode(meta, ml, &h) != 0 || !strcmp(h.upload_id, arm_not[0]) ||
        !strcmp(h.upload_id, arm_not[1]))
        return;
    arm_done = 1;
    cut_heads_on(arm_env, arm_mask);
}

static void test_second_cut_over_a_key_split_short(void **state)
{
    env_t *e = *state;
    const char *key = "put-cut-twice";
    obj_info_t w, x, y, info;
    put_big(e, key, OBJ_UNVERSIONED, &w);
    put_cut_in_half(e, key, &w, &x);
    obj__wall_skew_ns = PAST_COMMIT_STALE;
    arm_env = e;
    arm_mask = 0x18;
    arm_not[0] = w.upload_id;
    arm_not[1] = x.upload_id;
    arm_done = 0;
    rf_put_head_hook = arm_cut_at_own_heads;
    int err;
    static uint8_t big[100000];
    obj_writer_t *wr = obj_put_begin(e->set, "bkt", key, &err);
    assert_non_null(wr);
    assert_int_equal(obj_put_write(wr, big, sizeof(big)), 0);
    int prc = obj_put_commit(wr, NULL, NULL, 0, &info);
    rf_put_head_hook = NULL;
    cut_heads_clear(e);
    assert_int_not_equal(prc, 0);
    assert_int_equal(head_on(e, key, 3, &y), 0);
    assert_string_not_equal(y.upload_id, x.upload_id);
    assert_int_equal(heads_naming(e, key, y.upload_id), 2);
    obj__wall_skew_ns = 2 * PAST_COMMIT_STALE;
    int sp = obj_stat_standing(e->set, "bkt", key, &info);
    print_message("standing=%d: %s\n", sp,
                  sp                                     ? "-"
                  : !strcmp(info.upload_id, w.upload_id) ? "W (acknowledged)"
                  : !strcmp(info.upload_id, x.upload_id) ? "X (first cut)"
                                                         : "other");
    obj_heal_report_t rep = {0};
    int hrc = obj_heal(e->set, "bkt", key, &rep);
    obj__wall_skew_ns = 0;
    print_message("heal=%d\n", hrc);
    print_message("after heal: W on %d, X on %d, Y on %d\n", heads_naming(e, key, w.upload_id),
                  heads_naming(e, key, x.upload_id), heads_naming(e, key, y.upload_id));
    /* Never the first cut: it was never acknowledged. */
    assert_true(sp != 0 || strcmp(info.upload_id, x.upload_id) != 0);
    assert_int_equal(heads_naming(e, key, x.upload_id), 0);
}

/*
 * Two cut PUTs in a row through different gateways (a cluster probe): B cut after 2 heads (A,
 * acknowledged, stands on 4), then C (covering A, B a leftover by then) cut after its heads on
 * `cmask`. Nothing had k, and the credit handed C's heads to B (2 + 2): B "stood", the heal wrote
 * it over every store and A was lost. C's commit now finishes B's undo before its heads (the
 * kill comes with C's own heads: a store failing B's undo and a kill at once are left).
 */
static void two_cuts_in_a_row(env_t *e, const char *key, uint32_t cmask, obj_versioning_t v)
{
    obj_info_t a, info;
    cut_versioning = v;
    put_big(e, key, v, &a);
    assert_int_not_equal(put_cut(e, key, 0x3), 0); /* B on stores 0,1 */
    obj_info_t b;
    assert_int_equal(head_on(e, key, 0, &b), 0);
    print_message("A=%s B=%s headsA=%d headsB=%d\n", a.upload_id, b.upload_id,
                  heads_naming(e, key, a.upload_id), heads_naming(e, key, b.upload_id));
    obj__wall_skew_ns = PAST_COMMIT_STALE; /* B a crash's leftover: C goes on */
    int src = obj_stat_standing(e->set, "bkt", key, &info);
    print_message("before C: standing=%d %s\n", src, src ? "-" : info.upload_id);
    src = obj_stat(e->set, "bkt", key, &info);
    print_message("before C: stat=%d %s\n", src, src ? "-" : info.upload_id);
    arm_env = e; /* C */
    arm_mask = cmask;
    arm_not[0] = a.upload_id;
    arm_not[1] = b.upload_id;
    arm_done = 0;
    rf_put_head_hook = arm_cut_at_own_heads;
    int rc = put_cut(e, key, 0x3f); /* (armed again at its own first head) */
    rf_put_head_hook = NULL;
    cut_heads_clear(e);
    assert_int_not_equal(rc, 0);
    obj__wall_skew_ns = 2 * PAST_COMMIT_STALE;
    print_message("after C: headsA=%d headsB=%d\n", heads_naming(e, key, a.upload_id),
                  heads_naming(e, key, b.upload_id));
    src = obj_stat_standing(e->set, "bkt", key, &info);
    print_message("standing=%d %s (A=%s B=%s)\n", src, src ? "-" : info.upload_id, a.upload_id,
                  b.upload_id);
    int st = obj_stat(e->set, "bkt", key, &info);
    print_message("stat=%d %s\n", st, st ? "-" : info.upload_id);
    obj_heal_report_t rep = {0};
    int hr = obj_heal(e->set, "bkt", key, &rep);
    st = obj_stat(e->set, "bkt", key, &info);
    print_message("heal=%d then stat=%d %s headsA=%d headsB=%d\n", hr, st,
                  st ? "-" : info.upload_id, heads_naming(e, key, a.upload_id),
                  heads_naming(e, key, b.upload_id));
    obj__wall_skew_ns = 0;
    cut_versioning = OBJ_UNVERSIONED;
    assert_int_equal(src, 0);
    assert_string_equal(info.upload_id, a.upload_id); /* the acknowledged version */
    assert_int_equal(hr, 0);
    assert_int_equal(heads_naming(e, key, a.upload_id), N); /* every cut undone */
}
static void test_two_cuts_in_a_row_on_two_stores(void **state)
{
    two_cuts_in_a_row(*state, "two-cuts-a", 0xC, OBJ_UNVERSIONED);
}

static void test_two_cuts_in_a_row_on_three_stores(void **state)
{
    two_cuts_in_a_row(*state, "two-cuts-b", 0xE, OBJ_UNVERSIONED);
}

static void test_two_cuts_in_a_row_versioned(void **state)
{
    two_cuts_in_a_row(*state, "two-cuts-c", 0xC, OBJ_VERSIONED);
}

/*
 * A Complete U cut after its heads on stores 0-2 over A (its record still
 * closing), both past every bound. A plain PUT through another node finds U a leftover above
 * A and finishes its undo (obj__drop_cut_heads, by upload id). Between that undo's read and
 * its writes, the client's retry of the Complete (this node) resumes U: its commit writes U
 * on every store at a fresh stamp and answers 200. The undo's writes, under SHARD_IF_UPLOAD of
 * U with no stamp, take the fresh heads for the cut's and put A back over three of them: U,
 * acknowledged, stands on three stores, and once stale the credit hands them to A. The heal
 * keeps off multipart leftovers for this very reason (a retry reuses the upload id).
 */
static env_t *race_env;
static const char *race_key;
static const char *race_a; /* the version the undo puts back */
static cut_upload_t *race_u;
static int race_rc = -1;
static void complete_retry_mid_undo(const drive_id_t *id, const void *meta, size_t ml)
{
    obj_info_t o;
    if (strcmp(id->bucket, "bkt") != 0 || strcmp(id->key, race_key) != 0 ||
        obj_meta_decode(meta, ml, &o) != 0 || strcmp(o.upload_id, race_a) != 0)
        return;
    rf_put_head_hook = NULL; /* once: the undo's first write of A */
    int why = 0;
    race_rc = cut_complete(race_env, race_key, race_u, 2, 0, &why);
}

static void test_put_tidy_undoes_a_complete_resumed_meanwhile(void **state)
{
    env_t *e = *state;
    const char *key = "tidy-vs-resume";
    obj_info_t a, info;
    cut_versioning = OBJ_UNVERSIONED;
    put_big(e, key, OBJ_UNVERSIONED, &a);
    cut_upload_t u;
    cut_upload_new(e, key, 3131, &u);
    cut_complete_on(e, key, 0x7, &u);
    obj__wall_skew_ns = CUT_STALE; /* the cut a leftover, its closer surely gone */
    obj_set_t *other = other_gateway(e);
    race_env = e;
    race_key = key;
    race_a = a.upload_id;
    race_u = &u;
    race_rc = -1;
    rf_put_head_hook = complete_retry_mid_undo;
    int prc = put_create_only(other, key); /* refused (A, then U, stand) */
    rf_put_head_hook = NULL;
    obj_set_free(other);
    print_message("put=%d complete=%d headsU=%d headsA=%d\n", prc, race_rc,
                  heads_naming(e, key, u.upload), heads_naming(e, key, a.upload_id));
    assert_int_equal(race_rc, 0); /* the Complete answered 200 */
    assert_int_not_equal(prc, 0);
    /* Later (past any commit's age): the object is U, as the Complete answered. */
    obj__wall_skew_ns = CUT_STALE + PAST_COMMIT_STALE;
    obj_heal_report_t rep = {0};
    int hr = obj_heal(e->set, "bkt", key, &rep);
    int src = obj_stat_standing(e->set, "bkt", key, &info);
    print_message("heal=%d standing=%d %s (U=%s A=%s) headsU=%d\n", hr, src,
                  src ? "-" : info.upload_id, u.upload, a.upload_id,
                  heads_naming(e, key, u.upload));
    /* A create-only PUT: refused, whatever stands; here its tidy undid U's last heads. */
    assert_int_equal(put_create_only(e->set, key), ERR_PRECOND);
    int st = obj_stat(e->set, "bkt", key, &info);
    obj__wall_skew_ns = 0;
    print_message("then stat=%d %s headsU=%d\n", st, st ? "-" : info.upload_id,
                  heads_naming(e, key, u.upload));
    assert_int_equal(src, 0);
    assert_int_equal(st, 0);
    assert_string_equal(info.upload_id, u.upload);
    assert_int_equal(heads_naming(e, key, u.upload), N);
    assert_cut_object(e, key, &u);
    free(u.data);
}

/*
 * A small version over an erasure-coded one has a head on every store and its bytes on its m+1
 * copies (0-2 here). A 100 KB PUT over it killed after its heads on exactly those stores: the
 * small version's bytes are gone from every store, its three byte-less heads remain. The
 * credit made it stand, and the heal's undo, finding no bytes to put back, removed the cut
 * heads: the key is listed, and no read of it can succeed, for good (before, readers found the
 * cut version, the only bytes the key has).
 */
static void test_cut_over_every_copy_of_a_small_version(void **state)
{
    env_t *e = *state;
    char key[48];
    key_on_012(e, "cut-over-copies", key, sizeof(key));
    obj_info_t w0, v1, x, info;
    put_big(e, key, OBJ_UNVERSIONED, &w0);
    vput(e, key, "small", OBJ_UNVERSIONED, &v1);
    assert_int_equal(v1.sparse, 0);
    assert_int_equal(v1.inl, 0x7);
    put_cut_in_half(e, key, &v1, &x);
    obj__wall_skew_ns = PAST_COMMIT_STALE;
    int sp = obj_stat_standing(e->set, "bkt", key, &info);
    print_message("standing=%d%s\n", sp,
                  sp == 0 && !strcmp(info.upload_id, v1.upload_id)
                      ? " (the small version, its bytes gone)"
                      : "");
    obj_heal_report_t rep = {0};
    int hrc = obj_heal(e->set, "bkt", key, &rep);
    obj__wall_skew_ns = 0;
    print_message("heal=%d; small on %d, cut on %d\n", hrc, heads_naming(e, key, v1.upload_id),
                  heads_naming(e, key, x.upload_id));
    /* Whatever a reader meets can be read. */
    int err = 0;
    obj_reader_t *r = obj_open(e->set, "bkt", key, &info, &err);
    print_message("open=%d\n", r ? 0 : err);
    assert_non_null(r);
    obj_close(r);
    assert_true(heads_naming(e, key, x.upload_id) > 0); /* the only bytes left stay */
}

/*
 * The same small version, the PUT cut on stores 0, 1 and 3: one copy of the small version is
 * left (store 2). The heal finishes the undo; the read of that copy fails at that moment (an
 * I/O error, a bit flipped on the way). The undo then removed the cut heads instead of putting
 * the version back: the acknowledged version has three heads, stands no more, and a
 * create-only PUT goes over it. A commit's own undo read the bytes before writing (old_bytes);
 * the heal's must not remove what it cannot put back.
 */
static void test_cut_undo_with_the_last_copy_failing(void **state)
{
    env_t *e = *state;
    char key[48];
    key_on_012(e, "cut-undo-copy-fails", key, sizeof(key));
    obj_info_t w0, v1, info;
    put_big(e, key, OBJ_UNVERSIONED, &w0);
    vput(e, key, "small", OBJ_UNVERSIONED, &v1);
    assert_int_equal(v1.sparse, 0);
    assert_int_not_equal(put_cut(e, key, 0xb), 0);
    assert_int_equal(heads_naming(e, key, v1.upload_id), 3);
    obj__wall_skew_ns = PAST_COMMIT_STALE;
    assert_int_equal(obj_stat_standing(e->set, "bkt", key, &info), 0);
    assert_string_equal(info.upload_id, v1.upload_id);
    e->f[2].corrupt_read = 1;
    obj_heal_report_t rep = {0};
    int hrc = obj_heal(e->set, "bkt", key, &rep);
    e->f[2].corrupt_read = 0;
    print_message("heal=%d; small on %d\n", hrc, heads_naming(e, key, v1.upload_id));
    int crc = put_create_only(e->set, key);
    print_message("create-only PUT=%d\n", crc);
    assert_int_equal(crc, ERR_PRECOND);
    /* The copy readable again, the heal finishes the undo. */
    hrc = obj_heal(e->set, "bkt", key, &rep);
    obj__wall_skew_ns = 0;
    assert_int_equal(hrc, 0);
    assert_int_equal(heads_naming(e, key, v1.upload_id), N);
    char body[64];
    vread(e, key, NULL, body, sizeof(body));
    assert_string_equal(body, "small");
}

/*
 * A versioned DELETE (a delete marker) over W cut after stores 0-2: the credit makes W current
 * for every commit, and the key is noted for the heal, but the heal opens the newest head, the
 * marker, answers "nothing to heal", and never finishes its undo: readers asking stores 0-2
 * find the key deleted, the others find W, for as long as nobody writes the key.
 */
static void test_marker_cut_after_half_its_heads(void **state)
{
    env_t *e = *state;
    char key[48];
    key_on_012(e, "marker-cut", key, sizeof(key));
    obj_info_t w, dm, info;
    put_big(e, key, OBJ_VERSIONED, &w);
    cut_heads_on(e, 0x7);
    int rc = obj_delete_current(e->set, "bkt", key, NULL, OBJ_VERSIONED, &dm);
    cut_heads_clear(e);
    assert_int_not_equal(rc, 0);
    assert_int_equal(head_on(e, key, 0, &dm), 0);
    assert_true(dm.deleted && dm.marker);
    assert_int_equal(heads_naming(e, key, dm.upload_id), 3);
    obj__wall_skew_ns = PAST_COMMIT_STALE;
    assert_int_equal(obj_stat_standing(e->set, "bkt", key, &info), 0);
    assert_string_equal(info.upload_id, w.upload_id);
    obj_heal_report_t rep = {0};
    int hrc = obj_heal(e->set, "bkt", key, &rep);
    int st = obj_stat(e->set, "bkt", key, &info);
    obj__wall_skew_ns = 0;
    print_message("heal=%d; marker on %d, W on %d; stat=%d\n", hrc,
                  heads_naming(e, key, dm.upload_id), heads_naming(e, key, w.upload_id), st);
    assert_int_equal(heads_naming(e, key, dm.upload_id), 0);
    assert_int_equal(st, 0);
    assert_int_equal(versions_of(e, key), 1);
}

/* How many stores hold a tombstone (a retired version's head) at key's current position. */
static int tombstones_on(env_t *e, const char *key)
{
    int n = 0;
    obj_info_t h;
    for (int i = 0; i < N; i++)
        n += head_on(e, key, i, &h) == 0 && h.deleted && !h.marker;
    return n;
}

/*
 * An unversioned DELETE killed after its tombstones on stores 0-2 (of six, write quorum 5):
 * never acknowledged, and the version it read stands (the tombstones count for it, as a cut
 * commit's heads do). Readers asking stores 0-2 (a GET) found the key deleted, readers asking
 * others (a listing) found it, for as long as nobody wrote the key: the heal left the
 * tombstones alone. It finishes the delete now (readers have answered "no such key": the
 * version is not put back under them), and the version's blocks go.
 */
static void delete_cut_on(env_t *e, uint32_t on)
{
    char key[48];
    key_on_012(e, on == 0x7 ? "delete-cut" : "delete-cut-unseen", key, sizeof(key));
    obj_info_t w, info;
    put_big(e, key, OBJ_UNVERSIONED, &w);
    cut_heads_on(e, on);
    int rc = obj_delete(e->set, "bkt", key);
    cut_heads_clear(e);
    assert_int_not_equal(rc, 0);
    assert_int_equal(tombstones_on(e, key), 3);
    obj__wall_skew_ns = PAST_COMMIT_STALE;
    assert_int_equal(obj_stat_standing(e->set, "bkt", key, &info), 0);
    assert_string_equal(info.upload_id, w.upload_id);
    /* A GET asks stores 0-2: it finds the tombstones there, or the version. */
    assert_int_equal(obj_stat(e->set, "bkt", key, &info), on == 0x7 ? ERR_NOT_FOUND : 0);
    obj_heal_report_t rep = {0};
    int hrc = obj_heal(e->set, "bkt", key, &rep);
    int st = obj_stat(e->set, "bkt", key, &info);
    int sst = obj_stat_standing(e->set, "bkt", key, &info);
    print_message("heal=%d; tombstones on %d; stat=%d standing=%d\n", hrc, tombstones_on(e, key),
                  st, sst);
    assert_int_equal(tombstones_on(e, key), N);
    assert_int_equal(st, ERR_NOT_FOUND);
    assert_int_equal(sst, ERR_NOT_FOUND);
    /* Nothing stands: a create-only PUT goes through. */
    assert_int_equal(put_create_only(e->set, key), 0);
    obj__wall_skew_ns = 0;
}

static void test_unversioned_delete_cut_after_half_its_tombstones(void **state)
{
    delete_cut_on(*state, 0x7);
}

/* The same, the tombstones on stores 3-5: the heal's read of the key finds the version, and
 * the tombstones only on the stores it did not ask. */
static void test_unversioned_delete_cut_where_readers_miss_it(void **state)
{
    delete_cut_on(*state, 0x38);
}

/* obj__part_commit_hook: a Complete through another node, cut after its close, lands in the
 * gap between a part's check that its upload is open and its heads; once. */
typedef struct {
    env_t *e;
    obj_set_t *other;
    cut_upload_t *u;
    const char *key;
    int calls, rc;
} cut_meanwhile_t;

static void cut_complete_before_the_part_commits(void *arg, const char *upload)
{
    cut_meanwhile_t *c = arg;
    (void)upload;
    if (c->calls++) return;
    int why = 0;
    obj_info_t done;
    cut_stage = 1;
    obj__complete_cut_hook = cut_at;
    c->rc = obj_mpu_complete(c->other, "bkt", c->key, c->u->upload, c->u->parts, 2, 1, NULL,
                             OBJ_UNVERSIONED, &done, &why);
    obj__complete_cut_hook = NULL;
}

static int count_any_upload_cb(void *arg, const char *key, const char *upload,
                               const obj_info_t *info)
{
    (void)key;
    (void)upload;
    (void)info;
    ++*(int *)arg;
    return 0;
}

/*
 * What a second review found in the first mends. A part uploaded again that passed its
 * check before a Complete's close and landed after it (through another node): the same
 * Complete sent again resumes with the parts its close recorded, not NoSuchUpload. A
 * closing record is padded past any open record (older nodes list none), found by a
 * DeleteBucket's listing, and on a key of the longest length an Abort of it is still
 * settled. A Complete cut after its heads whose object is then replaced (its parts gone
 * with it) is ended by the reaper, not opened again; found by its walk of the records,
 * with no part left to lead to it.
 */
static void test_complete_cut_short_second_review(void **state)
{
    env_t *e = *state;
    obj_set_t *other = other_gateway(e);
    cut_upload_t u, r, lk;
    int err, why = 0;
    obj_info_t info, pi;
    cut_upload_new(e, "cut-late-part", 330, &u);
    cut_meanwhile_t cm = {e, other, &u, "cut-late-part", 0, 0};
    obj__part_commit_hook = cut_complete_before_the_part_commits;
    obj__part_commit_hook_arg = &cm;
    obj_writer_t *w = obj_mpu_part_begin(e->set, "bkt", "cut-late-part", u.upload, 2, &err);
    assert_non_null(w);
    assert_int_equal(obj_put_write(w, u.data, 500), 0);
    assert_int_equal(obj_put_commit(w, NULL, NULL, 0, &pi), 0); /* landed after the close */
    obj__part_commit_hook = NULL;
    assert_int_equal(cm.rc, ERR_IO);
    assert_int_equal(obj_stat(e->set, MPU_UPLOADS, u.upload, &info), 0);
    assert_true(info.size > strlen("bkt") + 1 + SHARD_MAX_KEY); /* padded */
    assert_int_equal(uploads_listed(e, &u), 0);
    int any = 0;
    assert_int_equal(obj_mpu_list_uploads_any(e->set, "bkt", count_any_upload_cb, &any), 0);
    assert_int_equal(any, 1);
    obj__wall_skew_ns = CUT_STALE;
    assert_int_equal(cut_complete(e, "cut-late-part", &u, 2, 0, &why), 0);
    obj__wall_skew_ns = 0;
    assert_cut_object(e, "cut-late-part", &u);
    free(u.data);

    /* Completed (cut after its heads), then replaced: its parts went with it. */
    obj_reaper_t *rp = obj_reaper_new(100);
    cut_upload_new(e, "cut-replaced", 331, &r);
    assert_int_equal(cut_complete(e, "cut-replaced", &r, 2, 3, &why), ERR_IO);
    uint8_t small[10] = {0};
    put(e, "cut-replaced", small, sizeof(small), &info);
    assert_int_equal(part_keys(e, r.upload), 0);
    /* An Abort of the longest key's cut Complete: its aborting record is settled too. */
    char longkey[SHARD_MAX_KEY + 1];
    memset(longkey, 'k', SHARD_MAX_KEY);
    longkey[SHARD_MAX_KEY] = 0;
    cut_upload_new(e, longkey, 332, &lk);
    assert_int_equal(cut_complete(e, longkey, &lk, 2, 1, &why), ERR_IO);
    obj__wall_skew_ns = CUT_STALE;
    assert_int_equal(obj_mpu_abort(e->set, "bkt", longkey, lk.upload), 0);
    obj__wall_skew_ns = 2 * CUT_STALE;
    assert_int_equal(reap_internal_pass(e, rp, 1000).uploads_settled, 0);
    assert_int_equal(reap_internal_pass(e, rp, 1100).uploads_settled, 2);
    obj__wall_skew_ns = 0;
    assert_int_equal(obj_stat(e->set, MPU_UPLOADS, r.upload, &info), ERR_NOT_FOUND);
    assert_int_equal(uploads_listed(e, &r), 0);
    assert_int_equal(obj_stat(e->set, MPU_UPLOADS, lk.upload, &info), ERR_NOT_FOUND);
    assert_int_equal(part_keys(e, lk.upload), 0);
    obj_reaper_free(rp);
    obj_set_free(other);
    free(r.data);
    free(lk.data);

    /* A close that loses its condition while the upload is still open (its record rewritten
     * meanwhile; a close a kill cut on some stores only does the same until covered): 503,
     * never NoSuchUpload, and the same Complete goes through when sent again. */
    cut_upload_t h;
    cut_upload_new(e, "cut-lost-close", 333, &h);
    rewrite_before_close = 1;
    rewrite_key = "cut-lost-close";
    rewrite_env = e;
    assert_int_equal(cut_complete(e, "cut-lost-close", &h, 2, 0, &why), ERR_THROTTLED);
    assert_int_equal(rewrite_before_close, 0);
    assert_int_equal(cut_complete(e, "cut-lost-close", &h, 2, 0, &why), 0);
    assert_cut_object(e, "cut-lost-close", &h);
    free(h.data);
}

static void test_multipart(void **state)
{
    env_t *e = *state;
    size_t psz[] = {300000, 200001, 77};
    size_t total = psz[0] + psz[1] + psz[2];
    uint8_t *data = malloc(total);
    fill(data, total, 51);
    char upload[33];
    assert_int_equal(obj_mpu_create(e->set, "bkt", "mp", "text/x-mp", "a\0b\0", 4, upload), 0);
    obj_mpu_part_t parts[3];
    size_t off = 0;
    /* Parts arrive out of order and part 2 is uploaded twice: the last one counts. */
    int order[] = {2, 1, 3, 2};
    for (int oi = 0; oi < 4; oi++) {
        int p = order[oi];
        size_t o = 0;
        for (int j = 0; j < p - 1; j++)
            o += psz[j];
        int err;
        obj_writer_t *w = obj_mpu_part_begin(e->set, "bkt", "mp", upload, p, &err);
        assert_non_null(w);
        assert_int_equal(obj_put_write(w, data + o, psz[p - 1]), 0);
        obj_info_t pi;
        assert_int_equal(obj_put_commit(w, NULL, NULL, 0, &pi), 0);
        parts[p - 1].part = p;
        snprintf(parts[p - 1].etag, sizeof(parts[p - 1].etag), "\"%.32s\"", pi.etag);
    }
    (void)off;
    /* Wrong ETag, wrong order, too small: refused, nothing visible. */
    obj_mpu_part_t bad[3];
    memcpy(bad, parts, sizeof(bad));
    bad[1].etag[3] ^= 1;
    int why;
    obj_info_t info;
    assert_int_equal(obj_mpu_complete(e->set, "bkt", "mp", upload, bad, 3, 1, NULL, OBJ_UNVERSIONED,
                                      &info, &why),
                     ERR_INVAL);
    assert_int_equal(why, OBJ_MPU_BAD_PART);
    memcpy(bad, parts, sizeof(bad));
    bad[0] = parts[1];
    bad[1] = parts[0];
    assert_int_equal(obj_mpu_complete(e->set, "bkt", "mp", upload, bad, 3, 1, NULL, OBJ_UNVERSIONED,
                                      &info, &why),
                     ERR_INVAL);
    assert_int_equal(why, OBJ_MPU_BAD_ORDER);
    assert_int_equal(obj_mpu_complete(e->set, "bkt", "mp", upload, parts, 3, 250000, NULL,
                                      OBJ_UNVERSIONED, &info, &why),
                     ERR_INVAL);
    assert_int_equal(why, OBJ_MPU_TOO_SMALL);
    assert_int_equal(obj_stat(e->set, "bkt", "mp", &info), ERR_NOT_FOUND);

    assert_int_equal(obj_mpu_complete(e->set, "bkt", "mp", upload, parts, 3, 1, NULL,
                                      OBJ_UNVERSIONED, &info, &why),
                     0);
    assert_string_equal(info.etag + 32, "-3");
    expect(e, "mp", data, total);
    obj_info_t st;
    assert_int_equal(obj_stat(e->set, "bkt", "mp", &st), 0);
    assert_string_equal(st.content_type, "text/x-mp");
    /* A retried Complete with the same parts gets the same object; any other list finds the
     * upload gone. */
    char etag[80];
    snprintf(etag, sizeof(etag), "%s", info.etag);
    assert_int_equal(obj_mpu_complete(e->set, "bkt", "mp", upload, parts, 3, 1, NULL,
                                      OBJ_UNVERSIONED, &info, &why),
                     0);
    assert_string_equal(info.etag, etag);
    assert_int_equal(obj_mpu_complete(e->set, "bkt", "mp", upload, parts, 2, 1, NULL,
                                      OBJ_UNVERSIONED, &info, &why),
                     ERR_NOT_FOUND);
    assert_int_equal(why, OBJ_MPU_NO_UPLOAD);
    /* Degraded reads work across parts too. */
    e->f[0].fail_read = e->f[5].fail_read = 1;
    expect(e, "mp", data, total);
    e->f[0].fail_read = e->f[5].fail_read = 0;

    /* Overwriting with a single PUT drops the parts and the manifest. */
    put(e, "mp", data, 1000, NULL);
    expect(e, "mp", data, 1000);

    /* An aborted upload leaves no parts behind. */
    assert_int_equal(obj_mpu_create(e->set, "bkt", "ab", NULL, NULL, 0, upload), 0);
    int err;
    obj_writer_t *w = obj_mpu_part_begin(e->set, "bkt", "ab", upload, 1, &err);
    assert_int_equal(obj_put_write(w, data, 5000), 0);
    assert_int_equal(obj_put_commit(w, NULL, NULL, 0, NULL), 0);
    assert_null(obj_mpu_part_begin(e->set, "bkt", "other-key", upload, 1, &err));
    assert_int_equal(err, ERR_NOT_FOUND);
    assert_int_equal(obj_mpu_abort(e->set, "bkt", "ab", upload), 0);
    assert_int_equal(obj_mpu_abort(e->set, "bkt", "ab", upload), ERR_NOT_FOUND);
    /* Only delete markers remain of parts: no part blocks on any drive. */
    assert_int_equal(count_keys(e->f[0].d, "\x03mpp\x01"), 0);
    free(data);
}

/* Complete's hooks (what the S3 layer's checksums use): each runs under the upload's lock,
 * each can refuse (nothing visible, the upload stays), the part notes come back on reads. */
typedef struct {
    int refuse_begin, refuse_part, refuse_finish, begins, parts;
    char ctype[256];
} hk_t;

static int hk_begin(void *arg, const obj_info_t *rec)
{
    hk_t *h = arg;
    h->begins++;
    snprintf(h->ctype, sizeof(h->ctype), "%s", rec->content_type);
    return h->refuse_begin;
}

static int hk_part(void *arg, int i, const obj_info_t *head, char note[OBJ_MPU_NOTE_MAX])
{
    hk_t *h = arg;
    h->parts++;
    snprintf(note, OBJ_MPU_NOTE_MAX, "n:%d:%llu tail", i, (unsigned long long)head->size);
    return h->refuse_part && i == 1;
}

static int hk_finish(void *arg, char *umeta, size_t *umeta_len, size_t cap)
{
    hk_t *h = arg;
    if (h->refuse_finish || *umeta_len + 4 > cap) return -1;
    memcpy(umeta + *umeta_len, "k\0v\0", 4);
    *umeta_len += 4;
    return 0;
}

static void test_multipart_hooks(void **state)
{
    env_t *e = *state;
    size_t psz[] = {1000, 333};
    uint8_t data[1333];
    fill(data, sizeof(data), 77);
    char upload[33];
    assert_int_equal(obj_mpu_create(e->set, "bkt", "hk", "text/x-hk", NULL, 0, upload), 0);
    obj_mpu_part_t parts[2];
    for (int p = 1; p <= 2; p++) {
        int err;
        obj_info_t rec, pi;
        obj_writer_t *w = obj_mpu_part_begin_rec(e->set, "bkt", "hk", upload, p, &rec, &err);
        assert_non_null(w);
        assert_string_equal(rec.content_type, "text/x-hk");
        assert_int_equal(obj_put_write(w, data + (p - 1) * psz[0], psz[p - 1]), 0);
        assert_int_equal(obj_put_commit(w, NULL, NULL, 0, &pi), 0);
        parts[p - 1].part = p;
        snprintf(parts[p - 1].etag, sizeof(parts[p - 1].etag), "%.32s", pi.etag);
    }
    hk_t h = {0};
    obj_mpu_hooks_t hooks = {hk_begin, hk_part, hk_finish, &h};
    obj_info_t info;
    int why;
    struct {
        int *flag, want_why;
    } refusals[] = {{&h.refuse_begin, OBJ_MPU_REFUSED},
                    {&h.refuse_part, OBJ_MPU_BAD_PART},
                    {&h.refuse_finish, OBJ_MPU_REFUSED}};
    for (int r = 0; r < 3; r++) {
        *refusals[r].flag = 1;
        assert_int_equal(obj_mpu_complete_hooked(e->set, "bkt", "hk", upload, parts, 2, 1, NULL,
                                                 OBJ_UNVERSIONED, &hooks, &info, &why),
                         ERR_INVAL);
        assert_int_equal(why, refusals[r].want_why);
        assert_int_equal(obj_stat(e->set, "bkt", "hk", &info), ERR_NOT_FOUND);
        *refusals[r].flag = 0;
    }
    obj_info_t rec;
    assert_int_equal(obj_mpu_upload_stat(e->set, "bkt", "hk", upload, &rec), 0);
    h.begins = h.parts = 0;
    assert_int_equal(obj_mpu_complete_hooked(e->set, "bkt", "hk", upload, parts, 2, 1, NULL,
                                             OBJ_UNVERSIONED, &hooks, &info, &why),
                     0);
    assert_int_equal(h.begins, 1);
    assert_int_equal(h.parts, 2);
    assert_string_equal(h.ctype, "text/x-hk");
    assert_int_equal(obj_mpu_upload_stat(e->set, "bkt", "hk", upload, &rec), ERR_NOT_FOUND);
    expect(e, "hk", data, sizeof(data));
    int err;
    obj_reader_t *rd = obj_open(e->set, "bkt", "hk", &info, &err);
    assert_non_null(rd);
    assert_int_equal(info.umeta_len, 4);
    assert_memory_equal(info.umeta, "k\0v\0", 4);
    /* A note is one token: what followed white space was cut. */
    assert_string_equal(obj_read_part_note(rd, 0), "n:0:1000");
    assert_string_equal(obj_read_part_note(rd, 1), "n:1:333");
    assert_string_equal(obj_read_part_note(rd, 2), "");
    assert_string_equal(obj_read_part_note(rd, -1), "");
    obj_close(rd);
    /* A retried Complete calls no hook and answers the same. */
    h.begins = h.parts = 0;
    assert_int_equal(obj_mpu_complete_hooked(e->set, "bkt", "hk", upload, parts, 2, 1, NULL,
                                             OBJ_UNVERSIONED, &hooks, &info, &why),
                     0);
    assert_int_equal(h.begins + h.parts, 0);
    /* Objects completed without hooks have no notes. */
    put(e, "plain", data, 10, NULL);
    rd = obj_open(e->set, "bkt", "plain", NULL, &err);
    assert_non_null(rd);
    assert_string_equal(obj_read_part_note(rd, 0), "");
    obj_close(rd);
}

static void test_meta_codec(void **state)
{
    (void)state;
    obj_info_t a = {0}, b;
    uint8_t buf[8192];
    a.size = 5;
    a.mtime_ns = 123456789;
    a.layout = (ers_layout_t){4, 2, 64, 5};
    strcpy(a.etag, "abc");
    strcpy(a.content_type, "text/plain");
    strcpy(a.upload_id, "00ff");
    memcpy(a.umeta, "k\0v\0", 4);
    a.umeta_len = 4;
    size_t n = obj_meta_encode(&a, buf, sizeof(buf));
    assert_true(n > 0);
    assert_int_equal(obj_meta_decode(buf, n, &b), 0);
    assert_int_equal(b.size, 5);
    assert_int_equal(b.mtime_ns, 123456789);
    assert_string_equal(b.etag, "abc");
    assert_string_equal(b.content_type, "text/plain");
    for (size_t cut = 0; cut < n; cut++)
        assert_int_equal(obj_meta_decode(buf, cut, &b), ERR_CORRUPT);
    /* A stamp of 0 is never written (found by fuzz_objmeta): refused, not read as a head
     * that would re-encode without it, as another object. */
    a.stamp_ns = 77;
    n = obj_meta_encode(&a, buf, sizeof(buf));
    assert_int_equal(buf[n - 14], 11); /* the stamp, last before the end */
    assert_int_equal(obj_meta_decode(buf, n, &b), 0);
    assert_true(b.stamp_ns == 77);
    memset(buf + n - 11, 0, 8);
    assert_int_equal(obj_meta_decode(buf, n, &b), ERR_CORRUPT);
}

/*
 * The metadata time (T_UMSTAMP, tag 16): written when a head's metadata is older than its
 * stamp (a copy: a promotion, an archive), never 0 nor equal to the stamp, never on a
 * deleted head; round trip exact. The blob without it is the same object (what a reader of
 * an older build, which skips the tag, finds), its metadata time that of its stamp.
 */
static void test_meta_umeta_time(void **state)
{
    (void)state;
    obj_info_t a = {0}, b;
    uint8_t buf[8192], again[8192], plain[8192];
    a.size = 5;
    a.mtime_ns = 1000;
    a.stamp_ns = 3000;
    a.layout = (ers_layout_t){4, 2, 64, 5};
    strcpy(a.upload_id, "00ff");
    size_t pn = obj_meta_encode(&a, plain, sizeof(plain));
    assert_true(pn > 0);
    assert_int_equal(obj_meta_decode(plain, pn, &b), 0);
    assert_int_equal(b.umeta_ns, 0);
    assert_true(obj_umeta_ns(&b) == 3000);
    a.umeta_ns = 3000; /* the stamp's: not written */
    assert_int_equal(obj_meta_encode(&a, buf, sizeof(buf)), pn);
    assert_memory_equal(buf, plain, pn);
    a.umeta_ns = 2000;
    size_t n = obj_meta_encode(&a, buf, sizeof(buf));
    assert_int_equal(n, pn + 11);
    assert_int_equal(buf[n - 14], 16); /* last, before the end */
    assert_int_equal(obj_meta_decode(buf, n, &b), 0);
    assert_true(b.umeta_ns == 2000 && obj_umeta_ns(&b) == 2000 && b.stamp_ns == 3000);
    assert_int_equal(obj_meta_encode(&b, again, sizeof(again)), n);
    assert_memory_equal(again, buf, n);
    for (size_t cut = 0; cut < n; cut++)
        assert_int_equal(obj_meta_decode(buf, cut, &b), ERR_CORRUPT);
    /* Written as an older build would skip it: the rest is the object without it. */
    memcpy(again, buf, n);
    again[n - 14] = 200; /* an unknown tag in its place */
    assert_int_equal(obj_meta_decode(again, n, &b), 0);
    assert_int_equal(b.umeta_ns, 0);
    /* Not 0, not the stamp, not twice, not on a deleted head. */
    memcpy(again, buf, n);
    memset(again + n - 11, 0, 8);
    assert_int_equal(obj_meta_decode(again, n, &b), ERR_CORRUPT);
    memcpy(again, buf, n);
    le_put64(again + n - 11, 3000);
    assert_int_equal(obj_meta_decode(again, n, &b), ERR_CORRUPT);
    memcpy(again, buf, n - 3);
    memcpy(again + n - 3, buf + n - 14, 14);
    assert_int_equal(obj_meta_decode(again, n + 11, &b), ERR_CORRUPT);
    obj_info_t t = {0};
    t.deleted = 1;
    t.mtime_ns = 1000;
    t.stamp_ns = 3000;
    t.umeta_ns = 2000;
    strcpy(t.upload_id, "00ff");
    n = obj_meta_encode(&t, buf, sizeof(buf));
    assert_true(n > 0);
    assert_int_equal(obj_meta_decode(buf, n, &b), 0);
    assert_int_equal(b.umeta_ns, 0); /* (not written) */
    uint8_t field[11] = {16, 8, 0};
    le_put64(field + 3, 2000);
    memcpy(again, buf, n - 3);
    memcpy(again + n - 3, field, 11);
    memcpy(again + n + 8, buf + n - 3, 3);
    assert_int_equal(obj_meta_decode(again, n + 11, &b), ERR_CORRUPT);
}

/* An inline head: version 2 with T_INLINE after the layout; never in version 1, never without
 * it in version 2. */
static void test_meta_inline(void **state)
{
    (void)state;
    obj_info_t a = {0}, b;
    uint8_t buf[8192];
    a.size = 5;
    a.mtime_ns = 1;
    a.layout = (ers_layout_t){4, 2, 64, 5};
    strcpy(a.upload_id, "01");
    a.inl = 0x7;
    a.inl_crc = 0xdeadbeef;
    size_t n = obj_meta_encode(&a, buf, sizeof(buf));
    assert_true(n > 0);
    assert_int_equal(buf[0], 3);
    assert_int_equal(obj_meta_decode(buf, n, &b), 0);
    assert_int_equal(b.inl, 0x7);
    assert_int_equal(b.inl_crc, 0xdeadbeef);
    uint8_t again[8192];
    assert_int_equal(obj_meta_encode(&b, again, sizeof(again)), n);
    assert_memory_equal(again, buf, n);
    buf[0] = 1; /* a version-1 reader's view: a head with T_INLINE is not one it knows */
    assert_int_equal(obj_meta_decode(buf, n, &b), ERR_CORRUPT);
    a.inl = 0;
    n = obj_meta_encode(&a, buf, sizeof(buf));
    assert_int_equal(buf[0], 1);
    buf[0] = 2; /* version 2 without T_INLINE */
    assert_int_equal(obj_meta_decode(buf, n, &b), ERR_CORRUPT);
    /* Version 3 keeps hex ids in 16 bytes; other ids plain; a version 2 blob (plain ids)
     * still reads, and a plain hex id in version 3 is refused (a second encoding). */
    a.inl = 0x7;
    n = obj_meta_encode(&a, buf, sizeof(buf)); /* upload id "01", no ETag */
    strcpy(a.upload_id, "0123456789abcdef0123456789abcdef");
    strcpy(a.etag, "fedcba9876543210fedcba9876543210");
    size_t plain = n - 2 + 32 + 32, bin = obj_meta_encode(&a, buf, sizeof(buf));
    assert_int_equal(bin, n - 2 + 16 + 16); /* "01" was 2 bytes; both ids 16 now */
    assert_true(bin < plain);
    assert_int_equal(obj_meta_decode(buf, bin, &b), 0);
    assert_string_equal(b.upload_id, a.upload_id);
    assert_string_equal(b.etag, a.etag);
    uint8_t v2[8192];
    size_t v2n = 0;
    v2[v2n++] = 2;
    for (size_t pos = 1; pos < bin;) { /* the same fields, ids spelled out */
        uint8_t tag = buf[pos];
        size_t len = (size_t)(buf[pos + 1] | buf[pos + 2] << 8);
        const char *s = tag == 14 ? a.upload_id : tag == 15 ? a.etag : NULL;
        v2[v2n++] = s ? (tag == 14 ? 2 : 3) : tag;
        v2[v2n++] = (uint8_t)(s ? 32 : len);
        v2[v2n++] = 0;
        memcpy(v2 + v2n, s ? (const void *)s : buf + pos + 3, s ? 32 : len);
        v2n += s ? 32 : len;
        pos += 3 + len;
    }
    assert_int_equal(obj_meta_decode(v2, v2n, &b), 0);
    assert_string_equal(b.upload_id, a.upload_id);
    assert_string_equal(b.etag, a.etag);
    assert_int_equal(obj_meta_encode(&b, again, sizeof(again)), bin);
    assert_memory_equal(again, buf, bin);
    v2[0] = 3;
    assert_int_equal(obj_meta_decode(v2, v2n, &b), ERR_CORRUPT);
    strcpy(a.upload_id, "01");
    a.etag[0] = 0;
    n = obj_meta_encode(&a, buf, sizeof(buf));

    /* Sparse: a field after T_INLINE, round trip exact; only with T_INLINE. */
    a.inl = 0x7;
    a.sparse = 1;
    n = obj_meta_encode(&a, buf, sizeof(buf));
    assert_true(n > 0);
    assert_int_equal(obj_meta_decode(buf, n, &b), 0);
    assert_int_equal(b.sparse, 1);
    assert_int_equal(b.inl, 0x7);
    assert_int_equal(obj_meta_encode(&b, again, sizeof(again)), n);
    assert_memory_equal(again, buf, n);
    a.inl = 0;
    assert_int_equal(obj_meta_encode(&a, buf, sizeof(buf)), 0);
    a.sparse = 0;
    a.inl = 1;
    a.deleted = 1; /* a delete marker has no bytes */
    assert_int_equal(obj_meta_encode(&a, buf, sizeof(buf)), 0);
}

/*
 * Small objects inline: sizes around the threshold, where the bytes live (no
 * blocks), reads that survive m failing or rotting stores (copies tried in
 * turn, the crc catching rot below the drive's checks), writes with m failing
 * stores, metadata rewrites and version moves that keep the bytes,
 * overwrites between inline and erasure-coded.
 */
static int count_blocks(void *arg, const drive_id_t *id, const drive_stat_t *st)
{
    (void)id;
    (void)st;
    (*(int *)arg)++;
    return 0;
}

static int umeta_green(void *arg, const obj_info_t *cur, char *out, size_t *out_len)
{
    (void)arg;
    (void)cur;
    memcpy(out, "color\0green\0", 12);
    *out_len = 12;
    return 0;
}

static void test_inline(void **state)
{
    env_t *e = *state;
    const uint32_t max = 4096;
    obj_set_inline_max(e->set, max);
    static uint8_t data[3 * 4096];
    size_t sizes[] = {0, 1, 100, max - 1, max, max + 1, 2 * max};
    obj_info_t info;
    int blocks;
    fill(data, sizeof(data), 11);
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        char key[32];
        snprintf(key, sizeof(key), "in%zu", sizes[i]);
        put(e, key, data, sizes[i], &info);
        expect(e, key, data, sizes[i]);
        assert_int_equal(info.inl != 0, sizes[i] <= max);
        if (info.inl) assert_int_equal(__builtin_popcount(info.inl), M + 1);
        blocks = 0;
        for (int j = 0; j < N; j++)
            assert_int_equal(drive_list(e->f[j].d, "bkt\x01", key, NULL, count_blocks, &blocks), 0);
        assert_int_equal(blocks > 0, sizes[i] > max); /* inline: no blocks at all */
    }

    /* Reads: any m stores failing or rotting, copies included. */
    put(e, "k", data, 1000, &info);
    for (int a = 0; a < N; a++)
        for (int b = a + 1; b < N; b++) {
            e->f[a].fail_read = 1;
            e->f[b].corrupt_read = 1;
            expect(e, "k", data, 1000);
            e->f[a].fail_read = e->f[b].corrupt_read = 0;
        }
    /* All m+1 copies failing: an error, never wrong bytes. */
    for (int j = 0; j < N; j++)
        e->f[j].corrupt_read = (info.inl >> j) & 1;
    int err;
    obj_reader_t *r = obj_open(e->set, "bkt", "k", NULL, &err);
    assert_null(r);
    assert_int_equal(err, ERR_UNRECOVERABLE);
    for (int j = 0; j < N; j++)
        e->f[j].corrupt_read = 0;

    /* Writes with m failing stores (copies among them) commit, and read back whole. */
    for (int j = 0, f = 0; j < N && f < M; j++)
        if ((info.inl >> j) & 1) {
            e->f[j].fail_write = 1;
            f++;
        }
    put(e, "k", data + 7, 900, &info);
    for (int j = 0; j < N; j++)
        e->f[j].fail_write = 0;
    expect(e, "k", data + 7, 900);

    /* A metadata rewrite keeps the bytes (they travel with the heads). */
    assert_int_equal(obj_update_umeta(e->set, "bkt", "k", umeta_green, NULL), 0);
    expect(e, "k", data + 7, 900);
    assert_int_equal(obj_stat(e->set, "bkt", "k", &info), 0);
    assert_int_equal(info.umeta_len, 12);

    /* Overwrites across the threshold, both ways. */
    put(e, "k", data, 2 * max, &info);
    expect(e, "k", data, 2 * max);
    put(e, "k", data + 1, 10, &info);
    expect(e, "k", data + 1, 10);

    /* Versions: archived, read by id, promoted back when the current one goes. */
    obj_info_t v1, v2, g;
    char got[64];
    vput(e, "vk", "first", OBJ_VERSIONED, &v1);
    vput(e, "vk", "second", OBJ_VERSIONED, &v2);
    assert_true(v1.inl && v2.inl);
    vread(e, "vk", v1.vid, got, sizeof(got));
    assert_string_equal(got, "first");
    assert_int_equal(obj_delete_version(e->set, "bkt", "vk", v2.vid, NULL, NULL), 0);
    vread(e, "vk", NULL, got, sizeof(got));
    assert_string_equal(got, "first");
    assert_int_equal(obj_stat_version(e->set, "bkt", "vk", NULL, &g), 0);
    assert_string_equal(g.upload_id, v1.upload_id);
}

static int count_obj_keys(void *arg, const char *key, const obj_info_t *info)
{
    (void)key;
    (void)info;
    (*(int *)arg)++;
    return 0;
}

/* Every key under prefix listed once, with any M stores failing their walks. */
static void list_whole(env_t *e, const char *prefix, int want)
{
    for (int a = 0; a < N; a++)
        for (int b = a + 1; b < N; b++) {
            int n = 0;
            e->f[a].fail_read = e->f[b].fail_read = 1;
            assert_int_equal(obj_list(e->set, "bkt", prefix, NULL, count_obj_keys, &n), 0);
            assert_int_equal(n, want);
            e->f[a].fail_read = e->f[b].fail_read = 0;
        }
}

static void test_inline_sparse(void **state)
{
    env_t *e = *state;
    const uint32_t max = 4096;
    static uint8_t data[3 * 4096];
    obj_info_t info, big;
    char got[64];
    obj_set_inline_max(e->set, max);
    fill(data, sizeof(data), 5);

    /* A new key: heads on its copies only. */
    put(e, "sp/new", data, 100, &info);
    assert_int_equal(info.sparse, 1);
    assert_int_equal(info.inl, obj__inline_stores(e->set, "bkt", "sp/new"));
    assert_int_equal(heads_at(e, "sp/new", ""), info.inl);
    /* Overwritten by another small one: sparse still, on the same stores. */
    put(e, "sp/new", data + 1, 200, &info);
    assert_int_equal(info.sparse, 1);
    assert_int_equal(heads_at(e, "sp/new", ""), info.inl);
    /* Any m stores failing: the bytes, and the key in a listing. */
    for (int a = 0; a < N; a++)
        for (int b = a + 1; b < N; b++) {
            e->f[a].fail_read = e->f[b].fail_read = 1;
            expect(e, "sp/new", data + 1, 200);
            e->f[a].fail_read = e->f[b].fail_read = 0;
        }

    /* An empty object is not sparse: a head on every store (obj_put_commit says why). */
    put(e, "ep/dir/", data, 0, &info);
    assert_int_equal(info.sparse, 0);
    assert_int_equal(heads_at(e, "ep/dir/", ""), (1u << N) - 1);
    for (int a = 0; a < N; a++)
        for (int b = a + 1; b < N; b++) {
            e->f[a].fail_read = e->f[b].fail_read = 1;
            expect(e, "ep/dir/", data, 0);
            e->f[a].fail_read = e->f[b].fail_read = 0;
        }
    list_whole(e, "ep/", 1);

    /* Over an erasure-coded version: a head everywhere, so no store keeps the old one. */
    put(e, "sp/was-big", data, 2 * max, &big);
    put(e, "sp/was-big", data + 2, 50, &info);
    assert_int_equal(info.sparse, 0);
    assert_int_equal(heads_at(e, "sp/was-big", ""), (1u << N) - 1);
    expect(e, "sp/was-big", data + 2, 50);
    /* Deleted (a tombstone everywhere, older): sparse again, and listed once. */
    assert_int_equal(obj_delete(e->set, "bkt", "sp/was-big"), 0);
    put(e, "sp/was-big", data + 3, 60, &info);
    assert_int_equal(info.sparse, 1);
    expect(e, "sp/was-big", data + 3, 60);
    list_whole(e, "sp/", 2);

    /* A store of the copies fails the write: a head on every other store, the bytes
     * on the first m+1 stores that work. */
    uint32_t c = obj__inline_stores(e->set, "bkt", "sp/fallback");
    int bad = __builtin_ctz(c);
    e->f[bad].fail_write = 1;
    put(e, "sp/fallback", data + 4, 300, &info);
    e->f[bad].fail_write = 0;
    assert_int_equal(info.sparse, 0);
    assert_int_equal(__builtin_popcount(info.inl), M + 1);
    assert_false((info.inl >> bad) & 1);
    assert_int_equal(heads_at(e, "sp/fallback", ""), ((1u << N) - 1) & ~(1u << bad));
    for (int a = 0; a < N; a++)
        for (int b = a + 1; b < N; b++) {
            e->f[a].fail_read = e->f[b].fail_read = 1;
            expect(e, "sp/fallback", data + 4, 300);
            e->f[a].fail_read = e->f[b].fail_read = 0;
        }
    list_whole(e, "sp/", 3);

    /* A commit that falls short (m+1 stores failing writes) leaves no trace: the
     * version it would have covered is back where the new heads went, a new key is
     * absent, listings see exactly what they saw before. */
    for (int round = 0; round < 2; round++) {
        const char *key = round ? "sp/failed-new" : "sp/new";
        for (int j = 0; j <= M; j++)
            e->f[(j * 2) % N].fail_write = 1;
        int err;
        obj_writer_t *w = obj_put_begin(e->set, "bkt", key, &err);
        assert_non_null(w);
        assert_int_equal(obj_put_write(w, data + 9, 77), 0);
        assert_int_equal(obj_put_commit(w, NULL, NULL, 0, NULL), ERR_UNRECOVERABLE);
        for (int j = 0; j < N; j++)
            e->f[j].fail_write = 0;
        if (round == 0) {
            expect(e, key, data + 1, 200);
        } else {
            assert_int_equal(obj_stat(e->set, "bkt", key, &info), ERR_NOT_FOUND);
            assert_int_equal(heads_at(e, key, ""), 0);
        }
        list_whole(e, "sp/", 3);
    }

    /* An unversioned delete leaves its tombstone on every store (the heal thread drops them
     * a minute later) and no live head; with a store failing, the others' tombstones win
     * over the head it keeps, whichever m stores a reader is missing. */
    put(e, "sp/gone", data, 2 * max, &big);
    assert_int_equal(obj_delete(e->set, "bkt", "sp/gone"), 0);
    assert_int_equal(heads_at(e, "sp/gone", ""), (1u << N) - 1);
    for (int i = 0; i < N; i++)
        assert_false(live_head(e, i, "sp/gone"));
    put(e, "sp/gone", data, 10, &info);
    assert_int_equal(info.sparse, 1);
    int keeper = __builtin_ctz(info.inl); /* a copy that fails to delete */
    e->f[keeper].fail_write = 1;
    assert_int_equal(obj_delete(e->set, "bkt", "sp/gone"), 0);
    e->f[keeper].fail_write = 0;
    /* It keeps its head; every other store has a tombstone. */
    assert_int_equal(heads_at(e, "sp/gone", ""), (1u << N) - 1);
    drive_id_t kid = {"bkt", "sp/gone", "", (uint32_t)keeper};
    uint8_t km[HEAD_MAX];
    drive_stat_t kst;
    obj_info_t kept;
    assert_int_equal(drive_stat(e->f[keeper].d, &kid, &kst, km, sizeof(km)), 0);
    assert_int_equal(obj_meta_decode(km, kst.meta_len, &kept), 0);
    assert_false(kept.deleted);
    /* A sparse object's delete leaves tombstones on every store, no live head. */
    put(e, "sp/gone2", data, 10, &info);
    assert_int_equal(obj_delete(e->set, "bkt", "sp/gone2"), 0);
    assert_int_equal(heads_at(e, "sp/gone2", ""), (1u << N) - 1);
    for (int i = 0; i < N; i++)
        assert_false(live_head(e, i, "sp/gone2"));
    for (int a = 0; a < N; a++)
        for (int b = a + 1; b < N; b++) {
            e->f[a].fail_read = e->f[b].fail_read = 1;
            assert_int_equal(obj_stat(e->set, "bkt", "sp/gone", &info), ERR_NOT_FOUND);
            e->f[a].fail_read = e->f[b].fail_read = 0;
        }
    list_whole(e, "sp/", 3);

    /* Versions: sparse noncurrent heads, found with the key's first store failing. */
    obj_info_t v1, v2;
    vput(e, "vsp", "one", OBJ_VERSIONED, &v1);
    vput(e, "vsp", "two", OBJ_VERSIONED, &v2);
    assert_true(v1.sparse && v2.sparse);
    char pos[OBJ_VID_LEN + 1];
    obj__vid_of(pos, v1.mtime_ns);
    assert_int_equal(heads_at(e, "vsp", pos), v1.inl);
    int first = (int)obj__first_store(e->set, "bkt", "vsp");
    e->f[first].fail_read = 1;
    vread(e, "vsp", v1.vid, got, sizeof(got));
    assert_string_equal(got, "one");
    char out[256] = "";
    assert_int_equal(obj_list_versions(e->set, "bkt", "vsp", NULL, NULL, vlist_cb, out), 0);
    char want[256];
    snprintf(want, sizeof(want), "vsp:%s*,vsp:%s,", v2.vid, v1.vid);
    assert_string_equal(out, want);
    /* Deleting the current one promotes v1 with a head everywhere (noncurrent walk from a
     * store of the copies, the first one failing). */
    assert_int_equal(obj_delete_version(e->set, "bkt", "vsp", v2.vid, NULL, NULL), 0);
    e->f[first].fail_read = 0;
    vread(e, "vsp", NULL, got, sizeof(got));
    assert_string_equal(got, "one");
    assert_int_equal(heads_at(e, "vsp", ""), (1u << N) - 1);
}

/*
 * A GET of an inline object whose first store has whole-record reads: that
 * store's lookup reads the bytes too (one get there, a stat on each of the
 * m others, nothing else). A copy rotting there, or a version whose copies
 * are elsewhere, still reads right from another store.
 */
static void test_inline_one_lookup(void **state)
{
    env_t *e = *state;
    obj_set_inline_max(e->set, 4096);
    static uint8_t data[1000];
    obj_info_t info;
    int tried = 0;
    fill(data, sizeof(data), 5);
    for (int k = 0; k < 40; k++) {
        char key[32];
        snprintf(key, sizeof(key), "one%d", k);
        put(e, key, data + k, sizeof(data) - (size_t)k, &info);
        uint32_t mask = obj__inline_stores(e->set, "bkt", key);
        int first = -1;
        for (int j = 0; j < N; j++)
            if (((mask >> j) & 1) && !((mask >> ((j + N - 1) % N)) & 1)) first = j;
        assert_true(first >= 0);
        if (first % 2 == 0) continue; /* even stores have no get: stat, then stat + read + stat */
        tried++;
        for (int j = 0; j < N; j++)
            e->f[j].n_stat = e->f[j].n_get = e->f[j].n_read = 0;
        expect(e, key, data + k, sizeof(data) - (size_t)k);
        long gets = 0, stats = 0, reads = 0;
        for (int j = 0; j < N; j++) {
            gets += e->f[j].n_get;
            stats += e->f[j].n_stat;
            reads += e->f[j].n_read;
        }
        assert_int_equal(e->f[first].n_get, 1);
        assert_int_equal(gets, 1);
        assert_int_equal(stats, M);
        assert_int_equal(reads, 0);
        /* Its copy there rots: the crc catches it, another copy answers. */
        e->f[first].corrupt_read = 1;
        expect(e, key, data + k, sizeof(data) - (size_t)k);
        e->f[first].corrupt_read = 0;
    }
    assert_true(tried > 0);
}

/*
 * The head metadata format field by field (server/obj_meta.c): a blob is
 * built here from its fields, then each field is corrupted in turn (wrong
 * length, bad value, missing, repeated, out of order, in a head of the
 * wrong kind) and must be refused. Tags: 1 layout, 2 upload, 3 etag,
 * 4 content type, 5 mtime, 6 user metadata, 7 deleted, 8 multipart, 255 end.
 */
typedef struct {
    uint8_t tag;
    const void *v;
    size_t n;
} fld_t;

enum { OP_PUT, OP_INSERT, OP_DROP, OP_SWAP }; /* field `at`: replace, insert before, drop, swap */

typedef struct {
    const char *what;
    int op, at;
    fld_t f;
} corrupt_t;

#define MAX_FLDS 12

static size_t blob(uint8_t *out, uint8_t version, const fld_t *f, int nf)
{
    size_t pos = 1;
    out[0] = version;
    for (int i = 0; i < nf; i++) {
        out[pos] = f[i].tag;
        out[pos + 1] = (uint8_t)f[i].n;
        out[pos + 2] = (uint8_t)(f[i].n >> 8);
        if (f[i].n) memcpy(out + pos + 3, f[i].v, f[i].n);
        pos += 3 + f[i].n;
    }
    return pos;
}

/* Apply c to the fields of a head that decodes; the result must not. */
static void expect_refused(const fld_t *good, int ng, const corrupt_t *c)
{
    fld_t f[MAX_FLDS];
    static uint8_t b[1 << 16];
    obj_info_t o;
    int nf = ng;
    memcpy(f, good, sizeof(*f) * (size_t)ng);
    switch (c->op) {
    case OP_PUT:
        f[c->at] = c->f;
        break;
    case OP_INSERT:
        memmove(f + c->at + 1, f + c->at, sizeof(*f) * (size_t)(nf++ - c->at));
        f[c->at] = c->f;
        break;
    case OP_DROP:
        memmove(f + c->at, f + c->at + 1, sizeof(*f) * (size_t)(--nf - c->at));
        break;
    default: {
        fld_t t = f[c->at];
        f[c->at] = f[c->at + 1];
        f[c->at + 1] = t;
    }
    }
    size_t n = blob(b, 1, f, nf);
    int rc = obj_meta_decode(b, n, &o);
    if (rc != ERR_CORRUPT) fail_msg("%s: decode gave %d, not ERR_CORRUPT", c->what, rc);
}

static void test_meta_corrupt_fields(void **state)
{
    (void)state;
    static uint8_t b[1 << 16], enc[8192];
    static char big[4096];
    obj_info_t in = {0}, o;
    uint8_t mt[9] = {0x15, 0xcd, 0x5b, 0x07}, lay[ERS_LAYOUT_SIZE + 1], bad[ERS_LAYOUT_SIZE];
    uint8_t mp[13] = {0x40, 0, 0, 0, 0, 0, 0, 0, 3}, mp0[12] = {0}, mpx[12] = {0};
    memset(big, 'a', sizeof(big));
    in.mtime_ns = 123456789;
    strcpy(in.upload_id, "0123456789abcdef0123456789abcdef");
    in.layout = (ers_layout_t){4, 2, 64, 1000};
    in.size = 1000;
    strcpy(in.etag, "d41d8cd98f00b204e9800998ecf8427e");
    strcpy(in.content_type, "text/plain");
    memcpy(in.umeta, "color\0blue\0acl\0private\0", 23);
    in.umeta_len = 23;
    ers_layout_encode(&in.layout, lay);

    /* The model of the format is the encoder's: a live head, a multipart one, a delete marker. */
    const fld_t live[] = {{5, mt, 8},       {2, in.upload_id, 32}, {1, lay, ERS_LAYOUT_SIZE},
                          {3, in.etag, 32}, {4, "text/plain", 10}, {6, in.umeta, 23},
                          {255, NULL, 0}};
    fld_t multi[7], del[4] = {{5, mt, 8}, {2, in.upload_id, 32}, {7, NULL, 0}, {255, NULL, 0}};
    memcpy(multi, live, sizeof(multi));
    multi[2] = (fld_t){8, mp, 12};
    size_t n = obj_meta_encode(&in, enc, sizeof(enc));
    assert_int_equal(n, blob(b, 1, live, 7));
    assert_memory_equal(enc, b, n);
    obj_info_t mi = in;
    mi.multipart = 1;
    mi.nparts = 3;
    mi.size = 64;
    n = obj_meta_encode(&mi, enc, sizeof(enc));
    assert_int_equal(n, blob(b, 1, multi, 7));
    assert_memory_equal(enc, b, n);
    obj_info_t di = {0};
    di.deleted = 1;
    di.mtime_ns = in.mtime_ns;
    strcpy(di.upload_id, in.upload_id);
    n = obj_meta_encode(&di, enc, sizeof(enc));
    assert_int_equal(n, blob(b, 1, del, 4));
    assert_memory_equal(enc, b, n);

    /* Layouts that pass their crc but are not what ers_layout_encode writes, or hold bad values. */
    uint8_t resv[ERS_LAYOUT_SIZE], zero_k[ERS_LAYOUT_SIZE];
    memcpy(bad, lay, sizeof(bad));
    bad[20] ^= 1; /* size, crc not updated */
    memcpy(resv, lay, sizeof(resv));
    resv[7] = 1; /* reserved */
    le_put32(resv + 28, crc32c(0, resv, 28));
    memcpy(zero_k, lay, sizeof(zero_k));
    zero_k[5] = 0; /* k */
    le_put32(zero_k + 28, crc32c(0, zero_k, 28));
    mpx[8] = 0x11; /* 10001 parts */
    mpx[9] = 0x27;

    const corrupt_t lc[] = {
        {"mtime short", OP_PUT, 0, {5, mt, 7}},
        {"mtime long", OP_PUT, 0, {5, mt, 9}},
        {"mtime missing", OP_DROP, 0, {0}},
        {"mtime twice", OP_INSERT, 1, {5, mt, 8}},
        {"upload too long", OP_PUT, 1, {2, big, 33}},
        {"upload with NUL", OP_PUT, 1, {2, "01\0003", 4}},
        {"upload missing", OP_DROP, 1, {0}},
        {"upload before mtime", OP_SWAP, 0, {0}},
        {"upload twice", OP_INSERT, 2, {2, "ab", 2}},
        {"layout short", OP_PUT, 2, {1, lay, ERS_LAYOUT_SIZE - 1}},
        {"layout long", OP_PUT, 2, {1, lay, ERS_LAYOUT_SIZE + 1}},
        {"layout crc", OP_PUT, 2, {1, bad, ERS_LAYOUT_SIZE}},
        {"layout reserved byte", OP_PUT, 2, {1, resv, ERS_LAYOUT_SIZE}},
        {"layout k 0", OP_PUT, 2, {1, zero_k, ERS_LAYOUT_SIZE}},
        {"layout missing", OP_DROP, 2, {0}},
        {"layout twice", OP_INSERT, 3, {1, lay, ERS_LAYOUT_SIZE}},
        {"layout and multipart", OP_INSERT, 3, {8, mp, 12}},
        {"layout and deleted", OP_INSERT, 3, {7, NULL, 0}},
        {"layout after etag", OP_SWAP, 2, {0}},
        {"etag too long", OP_PUT, 3, {3, big, 80}},
        {"etag with NUL", OP_PUT, 3, {3, "ab\0cd", 5}},
        {"etag missing", OP_DROP, 3, {0}},
        {"etag after content type", OP_SWAP, 3, {0}},
        {"content type too long", OP_PUT, 4, {4, big, 256}},
        {"content type with NUL", OP_PUT, 4, {4, "text\0", 5}},
        {"content type missing", OP_DROP, 4, {0}},
        {"content type twice", OP_INSERT, 5, {4, "a/b", 3}},
        {"umeta too long", OP_PUT, 5, {6, big, 2049}},
        {"umeta without its NUL", OP_PUT, 5, {6, "k\0v", 3}},
        {"umeta half a pair", OP_PUT, 5, {6, "k\0v\0w\0", 6}},
        {"umeta missing", OP_DROP, 5, {0}},
        {"umeta before content type", OP_SWAP, 4, {0}},
        {"umeta twice", OP_INSERT, 6, {6, "", 0}},
        {"end with a value", OP_PUT, 6, {255, "x", 1}},
        {"end missing", OP_DROP, 6, {0}},
        {"a field after the end", OP_INSERT, 7, {200, "x", 1}},
        {"marker on an object", OP_INSERT, 6, {9, NULL, 0}},
        {"version id short", OP_INSERT, 6, {10, "0123456789abcde", 15}},
        {"version id not hex", OP_INSERT, 6, {10, "0123456789abcdeg", 16}},
        {"version id upper case", OP_INSERT, 6, {10, "0123456789ABCDEF", 16}},
        {"stamp short", OP_INSERT, 6, {11, mt, 7}},
        {"stamp equal to the mtime", OP_INSERT, 6, {11, mt, 8}},
        {"version id before umeta", OP_INSERT, 5, {10, "0123456789abcdef", 16}},
    };
    const corrupt_t mc[] = {
        {"multipart short", OP_PUT, 2, {8, mp, 11}},
        {"multipart long", OP_PUT, 2, {8, mp, 13}},
        {"multipart 0 parts", OP_PUT, 2, {8, mp0, 12}},
        {"multipart 10001 parts", OP_PUT, 2, {8, mpx, 12}},
        {"multipart twice", OP_INSERT, 3, {8, mp, 12}},
        {"multipart and deleted", OP_INSERT, 3, {7, NULL, 0}},
        {"multipart and layout", OP_INSERT, 2, {1, lay, ERS_LAYOUT_SIZE}},
        {"multipart without etag", OP_DROP, 3, {0}},
    };
    const corrupt_t dc[] = {
        {"deleted with a value", OP_PUT, 2, {7, "x", 1}},
        {"marker with a value", OP_INSERT, 3, {9, "x", 1}},
        {"marker before deleted", OP_INSERT, 2, {9, NULL, 0}},
        {"deleted twice", OP_INSERT, 3, {7, NULL, 0}},
        {"deleted with an etag", OP_INSERT, 3, {3, "abc", 3}},
        {"deleted with a content type", OP_INSERT, 3, {4, "a/b", 3}},
        {"deleted with umeta", OP_INSERT, 3, {6, "", 0}},
        {"deleted before upload", OP_SWAP, 1, {0}},
        {"deleted, mtime missing", OP_DROP, 0, {0}},
        {"deleted, upload missing", OP_DROP, 1, {0}},
        {"deleted, end missing", OP_DROP, 3, {0}},
    };
    for (size_t i = 0; i < sizeof(lc) / sizeof(lc[0]); i++)
        expect_refused(live, 7, &lc[i]);
    for (size_t i = 0; i < sizeof(mc) / sizeof(mc[0]); i++)
        expect_refused(multi, 7, &mc[i]);
    for (size_t i = 0; i < sizeof(dc) / sizeof(dc[0]); i++)
        expect_refused(del, 4, &dc[i]);

    /* The version byte, and anything after the end. */
    n = blob(b, 1, live, 7);
    assert_int_equal(obj_meta_decode(b, n, &o), 0);
    b[0] = 2;
    assert_int_equal(obj_meta_decode(b, n, &o), ERR_CORRUPT);
    b[0] = 0;
    assert_int_equal(obj_meta_decode(b, n, &o), ERR_CORRUPT);
    b[0] = 1;
    b[n] = 0;
    assert_int_equal(obj_meta_decode(b, n + 1, &o), ERR_CORRUPT);

    /* A later writer's fields are skipped wherever they stand before the end. */
    for (int at = 0; at < 7; at++) {
        fld_t f[8];
        memcpy(f, live, sizeof(live));
        memmove(f + at + 1, f + at, sizeof(*f) * (size_t)(7 - at));
        f[at] = (fld_t){at % 2 ? 99 : 200, "new", 3};
        n = blob(b, 1, f, 8);
        assert_int_equal(obj_meta_decode(b, n, &o), 0);
        assert_string_equal(o.etag, in.etag);
        assert_int_equal(o.umeta_len, 23);
        assert_int_equal(o.layout.size, 1000);
    }

    /* Nothing is encoded that would not decode. */
    obj_info_t x = in;
    memcpy(x.umeta, "k\0", 2);
    x.umeta_len = 2;
    assert_int_equal(obj_meta_encode(&x, enc, sizeof(enc)), 0);
    x = mi;
    x.nparts = 0;
    assert_int_equal(obj_meta_encode(&x, enc, sizeof(enc)), 0);
    x = in;
    memset(x.upload_id, 'a', sizeof(x.upload_id));
    assert_int_equal(obj_meta_encode(&x, enc, sizeof(enc)), 0);
    x = in;
    x.layout.k = 0;
    assert_int_equal(obj_meta_encode(&x, enc, sizeof(enc)), 0);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_meta_codec),
        cmocka_unit_test(test_meta_inline),
        cmocka_unit_test(test_meta_umeta_time),
        cmocka_unit_test_setup_teardown(test_inline, setup, teardown),
        cmocka_unit_test_setup_teardown(test_inline_sparse, setup, teardown),
        cmocka_unit_test_setup_teardown(test_inline_one_lookup, setup, teardown),
        cmocka_unit_test(test_meta_corrupt_fields),
        cmocka_unit_test_setup_teardown(test_multipart, setup, teardown),
        cmocka_unit_test_setup_teardown(test_two_cuts_in_a_row_on_two_stores, setup, teardown),
        cmocka_unit_test_setup_teardown(test_two_cuts_in_a_row_on_three_stores, setup, teardown),
        cmocka_unit_test_setup_teardown(test_two_cuts_in_a_row_versioned, setup, teardown),
        cmocka_unit_test_setup_teardown(test_put_tidy_undoes_a_complete_resumed_meanwhile, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_sparse_put_over_tombstones_then_cut, setup, teardown),
        cmocka_unit_test_setup_teardown(test_late_put_taken_for_superseded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_second_cut_over_a_key_split_short, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cut_over_every_copy_of_a_small_version, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_cut_undo_with_the_last_copy_failing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_marker_cut_after_half_its_heads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unversioned_delete_cut_after_half_its_tombstones,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_unversioned_delete_cut_where_readers_miss_it, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_late_promotion_of_a_version_deleted_meanwhile, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_promotion_of_a_version_deleted_meanwhile_unchecked,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_delete_of_a_small_version_with_a_copy_failing, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_complete_cut_short_second_review, setup, teardown),
        cmocka_unit_test_setup_teardown(test_multipart_hooks, setup, teardown),
    };
    obj_fixture_args(argc, argv);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
