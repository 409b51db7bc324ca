#define _GNU_SOURCE
#include "epoll_floor.h"

#include <stddef.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

int epoll_floor_create(void) { return epoll_create1(EPOLL_CLOEXEC); }

int epoll_floor_control(int epoll, int fd, uint32_t events, int modify)
{
    struct epoll_event event = { .events = events, .data.fd = fd };
    return epoll_ctl(epoll, modify ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, &event);
}

int epoll_floor_remove(int epoll, int fd) { return epoll_ctl(epoll, EPOLL_CTL_DEL, fd, NULL); }

int epoll_floor_wait(int epoll, int *fds, uint32_t *events, int max)
{
    struct epoll_event ready[512];
    if (max > 512)
        max = 512;
    int count = epoll_wait(epoll, ready, max, -1);
    for (int i = 0; i < count; i++) {
        fds[i] = ready[i].data.fd;
        events[i] = ready[i].events;
    }
    return count;
}

int epoll_floor_accept(int listener) { return accept4(listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC); }

int epoll_floor_eventfd(void) { return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); }

void epoll_floor_signal(int eventfd)
{
    uint64_t one = 1;
    (void)!write(eventfd, &one, sizeof one);
}

void epoll_floor_drain(int eventfd)
{
    uint64_t count;
    (void)!read(eventfd, &count, sizeof count);
}
