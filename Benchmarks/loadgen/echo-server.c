/*
 * echo-server - the "raw echo" baseline: the cheapest server a Unix stream socket
 * allows. One thread, epoll, every byte read is written straight back; no framing,
 * no parsing. loadgen's raw protocol sends mentoryd ping frames, so the echo carries
 * the same bytes as mentoryd's requests.
 *
 *   echo-server PATH        (listens on the Unix socket PATH until killed)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static void die(const char *what)
{
    perror(what);
    exit(1);
}

/* Writes all of data to a non-blocking fd, waiting for room when it is full (the
 * load generator reads every response, so the wait ends). Returns -1 on a closed peer. */
static int write_all(int fd, const char *data, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, data, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN) {
                fd_set writable;
                FD_ZERO(&writable);
                FD_SET(fd, &writable);
                select(fd + 1, NULL, &writable, NULL, NULL);
                continue;
            }
            return -1;
        }
        data += n;
        len -= (size_t)n;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: echo-server PATH\n");
        return 2;
    }
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    if (strlen(argv[1]) >= sizeof address.sun_path) {
        fprintf(stderr, "socket path too long\n");
        return 2;
    }
    strcpy(address.sun_path, argv[1]);
    signal(SIGPIPE, SIG_IGN); /* a client that leaves gives EPIPE, not death */
    unlink(argv[1]);
    int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (listener < 0)
        die("socket");
    if (bind(listener, (struct sockaddr *)&address, sizeof address) < 0)
        die("bind");
    if (listen(listener, 4096) < 0)
        die("listen");

    int epoll = epoll_create1(EPOLL_CLOEXEC);
    if (epoll < 0)
        die("epoll_create1");
    struct epoll_event event = {.events = EPOLLIN, .data.fd = listener};
    if (epoll_ctl(epoll, EPOLL_CTL_ADD, listener, &event) < 0)
        die("epoll_ctl");

    static char buffer[64 * 1024];
    struct epoll_event events[256];
    for (;;) {
        int ready = epoll_wait(epoll, events, 256, -1);
        if (ready < 0) {
            if (errno == EINTR)
                continue;
            die("epoll_wait");
        }
        for (int i = 0; i < ready; i++) {
            int fd = events[i].data.fd;
            if (fd == listener) {
                int client;
                while ((client = accept4(listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
                    struct epoll_event added = {.events = EPOLLIN, .data.fd = client};
                    if (epoll_ctl(epoll, EPOLL_CTL_ADD, client, &added) < 0)
                        die("epoll_ctl");
                }
                continue;
            }
            ssize_t n = read(fd, buffer, sizeof buffer);
            if (n < 0 && (errno == EAGAIN || errno == EINTR))
                continue;
            if (n <= 0 || write_all(fd, buffer, (size_t)n) < 0)
                close(fd); /* closing removes it from the epoll set */
        }
    }
}
