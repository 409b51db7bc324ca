#define _GNU_SOURCE
#include <sys/socket.h>
#include "mentory_shims.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

#ifndef SO_PEERGROUPS
#define SO_PEERGROUPS 59
#endif

_Static_assert(sizeof(struct mentory_ucred) == sizeof(struct ucred), "mentory_ucred must match struct ucred");

int mentory_so_peercred(void) {
    return SO_PEERCRED;
}

int mentory_so_peergroups(void) {
    return SO_PEERGROUPS;
}

int mentory_malloc_trim(void) {
#ifdef __GLIBC__
    return malloc_trim(0);
#else
    return -1;
#endif
}

int mentory_malloc_limit_arenas(int count) {
#ifdef __GLIBC__
    return mallopt(M_ARENA_MAX, count);
#else
    (void)count;
    return -1;
#endif
}

int mentory_accept(int listener) {
    return accept4(listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
}
