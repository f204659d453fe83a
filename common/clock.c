#include "common/clock.h"

#include <time.h>

uint64_t clock_wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * NS_PER_SEC + (uint64_t)ts.tv_nsec;
}

static uint64_t real_now(wl_clock_t *c)
{
    struct timespec ts;
    (void)c;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * NS_PER_SEC + (uint64_t)ts.tv_nsec;
}

static void real_sleep(wl_clock_t *c, uint64_t ns)
{
    struct timespec ts = {.tv_sec = (time_t)(ns / NS_PER_SEC), .tv_nsec = (long)(ns % NS_PER_SEC)};
    (void)c;
    while (nanosleep(&ts, &ts) != 0)
        ;
}

wl_clock_t *clock_real(void)
{
    static wl_clock_t real = {real_now, real_sleep};
    return &real;
}

static uint64_t sim_now(wl_clock_t *c)
{
    return __atomic_load_n(&((wl_sim_clock_t *)c)->t, __ATOMIC_ACQUIRE);
}

static void sim_sleep(wl_clock_t *c, uint64_t ns)
{
    __atomic_add_fetch(&((wl_sim_clock_t *)c)->t, ns, __ATOMIC_ACQ_REL);
}

void clock_sim_init(wl_sim_clock_t *c, uint64_t start_ns)
{
    c->base.now_ns = sim_now;
    c->base.sleep_ns = sim_sleep;
    c->t = start_ns;
}

void clock_sim_advance(wl_sim_clock_t *c, uint64_t ns)
{
    sim_sleep(&c->base, ns);
}

void clock_cond_init(pthread_cond_t *cv)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(cv, &ca);
    pthread_condattr_destroy(&ca);
}
