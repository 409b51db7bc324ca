#define _GNU_SOURCE
#include <stdlib.h>
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

static int malloc_arena_limit = 0;

// Runs as the process loads, before main and any thread: see mentory_malloc_arena_limit.
__attribute__((constructor)) static void mentory_limit_malloc_arenas(void) {
#ifdef __GLIBC__
    if (getenv(MENTORY_MALLOC_ARENA_LIMIT_VARIABLE) == NULL && mallopt(M_ARENA_MAX, MENTORY_MALLOC_ARENA_LIMIT) == 1) {
        malloc_arena_limit = MENTORY_MALLOC_ARENA_LIMIT;
    }
#endif
}

int mentory_malloc_arena_limit(void) {
    return malloc_arena_limit;
}

int mentory_accept(int listener) {
    return accept4(listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
}
