/*
 * The node's memory report and malloc's setup (server/node_memory.c): a large
 * block freed goes back to the system at once, whatever was freed before it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "server/node_memory.h"

#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif

/* Written, and seen to escape: the compiler may not drop a malloc and free pair around it. */
static void touch(void *p, size_t n)
{
    memset(p, 0x5a, n);
    __asm__ volatile("" : : "r"(p) : "memory");
}

/*
 * Without the setup, glibc raises its mmap threshold to the 8 MiB block freed
 * first (and its trim threshold to twice that): the 4 MiB block after it comes
 * from the heap and, freed, stays held there. With it, both are mapped and
 * unmapped on their own.
 */
static void test_large_frees_go_back(void **state)
{
    (void)state;
#ifdef SANITIZED
    skip(); /* ASan's allocator is not glibc's, and reports no malloc figures */
#endif
    node_memory_setup();
    void *a = malloc(8u << 20);
    touch(a, 8u << 20);
    free(a);
    node_memory_t before = {0}, after = {0};
    node_memory_process(&before);
    void *b = malloc(4u << 20);
    touch(b, 4u << 20);
    free(b);
    node_memory_process(&after);
    /* Held and free: what malloc took from the system and has not given back. */
    uint64_t free_before = before.malloc_held - before.malloc_in_use;
    uint64_t free_after = after.malloc_held - after.malloc_in_use;
    assert_true(free_after < free_before + (1u << 20));
}

/*
 * A block under the mmap threshold freed at the top of the heap stays held
 * for the next one (up to the trim threshold): with glibc's 128 KiB, which
 * the mmap setting alone left, it went back to the system at once and the
 * next block of its size was faulted in again, page by page.
 */
static void test_a_freed_top_block_is_kept(void **state)
{
    (void)state;
#ifdef SANITIZED
    skip();
#endif
    node_memory_setup();
    malloc_trim(0); /* start from a trimmed heap */
    void *a = malloc(1u << 20);
    touch(a, 1u << 20);
    node_memory_t in_use = {0}, freed = {0};
    node_memory_process(&in_use);
    free(a);
    node_memory_process(&freed);
    assert_true(freed.malloc_held + (64u << 10) >= in_use.malloc_held);
}

static void test_process_figures(void **state)
{
    (void)state;
    node_memory_t m = {0};
    void *p = malloc(64u << 10);
    touch(p, 64u << 10);
    node_memory_process(&m);
    assert_true(m.rss > 0);
#ifndef SANITIZED
    assert_true(m.malloc_in_use >= 64u << 10);
    assert_true(m.malloc_in_use <= m.malloc_held);
#endif
    free(p);
    /* Only the process's fields are filled. */
    assert_int_equal(m.index_cache, 0);
    assert_int_equal(m.writer_buffers, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_large_frees_go_back),
        cmocka_unit_test(test_a_freed_top_block_is_kept),
        cmocka_unit_test(test_process_figures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
