// The epoll calls of mentory-floor's epoll transport (Glibc's Swift module has no sys/epoll.h).
#ifndef EPOLL_FLOOR_H
#define EPOLL_FLOOR_H

#include <stdint.h>

/// Readiness flags, as epoll's.
#define EPOLL_FLOOR_IN 0x001u
#define EPOLL_FLOOR_OUT 0x004u
#define EPOLL_FLOOR_ERR 0x008u
#define EPOLL_FLOOR_HUP 0x010u

/// epoll_create1(EPOLL_CLOEXEC).
int epoll_floor_create(void);
/// Registers `fd` for `events` (`modify`: changes its registration instead); 0, or -1 with errno.
int epoll_floor_control(int epoll, int fd, uint32_t events, int modify);
/// Unregisters `fd`.
int epoll_floor_remove(int epoll, int fd);
/// epoll_wait with no timeout into two arrays of `max`: each ready descriptor and its flags.
int epoll_floor_wait(int epoll, int *fds, uint32_t *events, int max);
/// accept4 with SOCK_NONBLOCK | SOCK_CLOEXEC, the peer's address ignored.
int epoll_floor_accept(int listener);
/// A non-blocking eventfd, to wake the loop from another thread.
int epoll_floor_eventfd(void);
/// Adds one to the eventfd's counter (wakes the loop waiting on it).
void epoll_floor_signal(int eventfd);
/// Reads the eventfd's counter back to zero.
void epoll_floor_drain(int eventfd);

#endif
