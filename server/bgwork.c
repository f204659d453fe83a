/*
 * bgwork: a background worker's thread, naps, kicks, pacing, and the bucket
 * names its passes walk (contracts in bgwork.h).
 *
 * The thread holds the worker's mutex except while a pass runs; between
 * passes it naps on the condition variable until the next is due. A kick
 * (or a stop) signals it; a kick during a pass is kept and starts the next
 * one at once. A pass's own naps (pacing, waiting for a store) use the same
 * condition variable, so a stop wakes them too.
 */
#include "server/bgwork.h"

#include "common/clock.h"
#include "server/s3_int.h"

#include <time.h>

double bgwork_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int bgwork_nap(bgwork_t *w, double s)
{
    struct timespec ts;
    double t = bgwork_now() + s;
    ts.tv_sec = (time_t)t;
    ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
    if (!w->stop) pthread_cond_timedwait(&w->cv, &w->mu, &ts);
    return w->stop;
}

int bgwork_stopping(bgwork_t *w)
{
    return w ? __atomic_load_n(&w->stop, __ATOMIC_ACQUIRE) : 0;
}

void bgwork_lock(bgwork_t *w)
{
    pthread_mutex_lock(&w->mu);
}

void bgwork_unlock(bgwork_t *w)
{
    pthread_mutex_unlock(&w->mu);
}

static void *bg_main(void *arg)
{
    bgwork_t *w = arg;
    pthread_mutex_lock(&w->mu);
    double next = bgwork_now() + w->first_s;
    while (!w->stop) {
        double wait = next - bgwork_now();
        if (!w->kick && wait > 0) {
            bgwork_nap(w, wait);
            continue;
        }
        w->kick = 0;
        pthread_mutex_unlock(&w->mu);
        next = w->pass(w->arg);
        pthread_mutex_lock(&w->mu);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

int bgwork_start(bgwork_t *w, const char *name, double first_s, bgwork_pass_fn pass, void *arg)
{
    w->stop = w->kick = 0;
    w->first_s = first_s;
    w->pass = pass;
    w->arg = arg;
    pthread_mutex_init(&w->mu, NULL);
    clock_cond_init(&w->cv);
    if (pthread_create(&w->thread, NULL, bg_main, w) != 0) {
        pthread_mutex_destroy(&w->mu);
        pthread_cond_destroy(&w->cv);
        return ERR_NOMEM;
    }
    if (name) pthread_setname_np(w->thread, name);
    return 0;
}

void bgwork_kick(bgwork_t *w)
{
    pthread_mutex_lock(&w->mu);
    w->kick = 1;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

void bgwork_stop(bgwork_t *w)
{
    pthread_mutex_lock(&w->mu);
    __atomic_store_n(&w->stop, 1, __ATOMIC_RELEASE);
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
}

double bgwork_pace_count(bgwork_pace_t *p, uint64_t bytes)
{
    p->bytes += bytes;
    double el = bgwork_now() - p->t0;
    return el > 0 ? (double)p->bytes / el / 1e6 : 0;
}

int bgwork_pace_hold(bgwork_t *w, const bgwork_pace_t *p)
{
    for (double ahead = (double)p->bytes / p->rate - (bgwork_now() - p->t0); ahead > 0 && !w->stop;
         ahead = (double)p->bytes / p->rate - (bgwork_now() - p->t0))
        bgwork_nap(w, ahead < 1 ? ahead : 1);
    return w->stop;
}

/* ---- bucket names ---- */

typedef struct {
    char **v;
    size_t n;
} names_t;

static int add_name(void *arg, const char *key, const obj_info_t *info)
{
    names_t *ns = arg;
    (void)info;
    ns->v = xrealloc(ns->v, (ns->n + 2) * sizeof(char *));
    ns->v[ns->n++] = xstrdup(key);
    ns->v[ns->n] = NULL;
    return 0;
}

static int add_latest(void *arg, const char *key, const obj_info_t *info, int latest)
{
    if (!latest || info->deleted) return 0;
    return add_name(arg, key, info);
}

char **bgwork_bucket_names(obj_set_t *set, int every_store, int *rc)
{
    names_t ns = {.v = xcalloc(1, sizeof(char *))};
    *rc = every_store ? obj_list_versions_all(set, BUCKETS, NULL, NULL, NULL, add_latest, &ns)
                      : obj_list(set, BUCKETS, NULL, NULL, add_name, &ns);
    return ns.v;
}

void bgwork_names_free(char **names)
{
    if (!names) return;
    for (size_t i = 0; names[i]; i++)
        free(names[i]);
    free(names);
}
