// The Linux calls of MentoryEventLoop's epoll loop: Glibc's Swift module has no sys/epoll.h or sys/eventfd.h.
#ifndef MENTORY_EPOLL_H
#define MENTORY_EPOLL_H

#include <stdint.h>

/// Readiness flags, as epoll's (EPOLLIN, EPOLLOUT, EPOLLERR, EPOLLHUP, EPOLLRDHUP).
#define MENTORY_EPOLL_IN 0x001u
#define MENTORY_EPOLL_OUT 0x004u
#define MENTORY_EPOLL_ERR 0x008u
#define MENTORY_EPOLL_HUP 0x010u
#define MENTORY_EPOLL_RDHUP 0x2000u

/// epoll_create1(EPOLL_CLOEXEC): a new epoll instance, or -1 with errno.
int mentory_epoll_create(void);

/// Registers `fd` for `events` with `token` as its data (`modify`: changes its registration instead); 0, or -1
/// with errno.
int mentory_epoll_control(int epoll, int fd, uint32_t events, uint64_t token, int modify);

/// Unregisters `fd`; 0, or -1 with errno.
int mentory_epoll_remove(int epoll, int fd);

/// epoll_wait for at most `max` (up to 1,024) events and `timeout_ms` (-1: no limit), each event's token and flags
/// written to the two arrays: how many, or -1 with errno.
int mentory_epoll_wait(int epoll, uint64_t *tokens, uint32_t *events, int max, int timeout_ms);

/// A non-blocking, close-on-exec eventfd with a zero counter, or -1 with errno.
int mentory_eventfd(void);

/// Adds one to an eventfd's counter, which makes it readable (a full counter is readable already).
void mentory_eventfd_signal(int fd);

/// Reads an eventfd's counter back to zero.
void mentory_eventfd_drain(int fd);

/// Names the calling thread (at most 15 bytes are kept), as `ps -L` and `top -H` show it.
void mentory_thread_set_name(const char *name);

#endif
