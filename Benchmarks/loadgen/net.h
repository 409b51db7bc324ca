/*
 * net.h - what the C load generators share: Unix-socket connections, blocking I/O that
 * gives up loudly, and a monotonic clock.
 */
#ifndef LOADGEN_NET_H
#define LOADGEN_NET_H

#include "wire.h"

#include <stddef.h>
#include <stdint.h>

/* perror(what), then exit 1. */
void die(const char *what);

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t now_ns(void);

/* A blocking connection to the Unix socket at `path`; exits on failure. */
int connect_unix(const char *path);

/* Writes all of data[0..len) to fd, waiting for room when fd is non-blocking; exits on failure. */
void write_all(int fd, const uint8_t *data, size_t len);

/* Reads until `expected` whole responses of `proto` have arrived on fd (waiting when fd is
 * non-blocking); returns the error responses among them. `in` keeps bytes between calls. */
unsigned read_responses(int fd, enum protocol proto, unsigned expected, struct buf *in);

/* Raises the open-file limit to its hard limit, for thousands of connections. */
void raise_fd_limit(void);

#endif
