/*
 * xfer: what the `wl` command's transfers share: a job runner (N files at
 * once, each of which libwarmlake splits into parallel parts) and a
 * progress meter on stderr (bytes, rate, ETA), drawn only when stderr is a
 * terminal.
 */
#ifndef WL_CLI_XFER_H
#define WL_CLI_XFER_H

#include <stddef.h>
#include <stdint.h>

/* Run fn(arg, i) for every i in [0, n) on `jobs` threads; returns how many returned nonzero. */
size_t xfer_run(size_t n, int jobs, int (*fn)(void *arg, size_t i), void *arg);

/* The meter: counts bytes from any thread (xfer_bytes is a wl_config_t on_bytes callback,
   its arg ignored). start draws every 200 ms on stderr when it is a terminal and enabled. */
void xfer_bytes(void *arg, uint64_t n);
void xfer_meter_start(uint64_t total, int enabled);
void xfer_meter_stop(void);

#endif
