#define _GNU_SOURCE
#include "mentory_epoll.h"

#include <pthread.h>
#include <stddef.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

_Static_assert(MENTORY_EPOLL_IN == EPOLLIN && MENTORY_EPOLL_OUT == EPOLLOUT, "epoll flags");
_Static_assert(MENTORY_EPOLL_ERR == EPOLLERR && MENTORY_EPOLL_HUP == EPOLLHUP, "epoll flags");
_Static_assert(MENTORY_EPOLL_RDHUP == EPOLLRDHUP, "epoll flags");

int mentory_epoll_create(void) {
    return epoll_create1(EPOLL_CLOEXEC);
}

int mentory_epoll_control(int epoll, int fd, uint32_t events, uint64_t token, int modify) {
    struct epoll_event event = {.events = events, .data.u64 = token};
    return epoll_ctl(epoll, modify ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, &event);
}

int mentory_epoll_remove(int epoll, int fd) {
    return epoll_ctl(epoll, EPOLL_CTL_DEL, fd, NULL);
}

int mentory_epoll_wait(int epoll, uint64_t *tokens, uint32_t *events, int max, int timeout_ms) {
    struct epoll_event ready[1024];
    if (max > 1024)
        max = 1024;
    int count = epoll_wait(epoll, ready, max, timeout_ms);
    for (int i = 0; i < count; i++) {
        tokens[i] = ready[i].data.u64;
        events[i] = ready[i].events;
    }
    return count;
}

int mentory_eventfd(void) {
    return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
}

void mentory_eventfd_signal(int fd) {
    uint64_t one = 1;
    (void)!write(fd, &one, sizeof one);
}

void mentory_eventfd_drain(int fd) {
    uint64_t count;
    (void)!read(fd, &count, sizeof count);
}

void mentory_thread_set_name(const char *name) {
    char truncated[16];
    size_t length = 0;
    while (length < 15 && name[length] != '\0') {
        truncated[length] = name[length];
        length++;
    }
    truncated[length] = '\0';
    pthread_setname_np(pthread_self(), truncated);
}
