#ifndef MENTORY_SHIMS_H
#define MENTORY_SHIMS_H

#include <sys/types.h>

/// The layout of Linux's `struct ucred`, the value of the SO_PEERCRED socket option.
/// Declared here so Swift can read the option without _GNU_SOURCE.
struct mentory_ucred {
    pid_t pid;
    uid_t uid;
    gid_t gid;
};

/// The SO_PEERCRED option name (17 on Linux).
int mentory_so_peercred(void);

#endif
