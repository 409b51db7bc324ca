/*
 * net.c - see net.h.
 */
#define _GNU_SOURCE
#include "net.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

void die(const char *what)
{
    perror(what);
    exit(1);
}

uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

int connect_unix(const char *path)
{
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof address.sun_path) {
        fprintf(stderr, "socket path too long: %s\n", path);
        exit(1);
    }
    strcpy(address.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        die("socket");
    if (connect(fd, (struct sockaddr *)&address, sizeof address) < 0)
        die("connect");
    return fd;
}

/* Waits until fd is ready for `events`. */
static void wait_for(int fd, short events)
{
    struct pollfd ready = {.fd = fd, .events = events};
    while (poll(&ready, 1, -1) < 0) {
        if (errno != EINTR)
            die("poll");
    }
}

void write_all(int fd, const uint8_t *data, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, data, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN) {
                wait_for(fd, POLLOUT);
                continue;
            }
            die("write");
        }
        data += n;
        len -= (size_t)n;
    }
}

unsigned read_responses(int fd, enum protocol proto, unsigned expected, struct buf *in)
{
    unsigned count = 0, errors = 0;
    for (;;) {
        size_t used = count_responses(proto, in->data, in->len, &count, &errors);
        memmove(in->data, in->data + used, in->len - used);
        in->len -= used;
        if (count >= expected)
            return errors;
        buf_reserve(in, 4096);
        ssize_t n = read(fd, in->data + in->len, in->cap - in->len);
        if (n == 0) {
            fprintf(stderr, "server closed the connection\n");
            exit(1);
        }
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN) {
                wait_for(fd, POLLIN);
                continue;
            }
            die("read");
        }
        in->len += (size_t)n;
    }
}

void raise_fd_limit(void)
{
    struct rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
        limit.rlim_cur = limit.rlim_max;
        setrlimit(RLIMIT_NOFILE, &limit);
    }
}
