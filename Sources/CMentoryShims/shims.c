#define _GNU_SOURCE
#include <sys/socket.h>
#include "mentory_shims.h"

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
