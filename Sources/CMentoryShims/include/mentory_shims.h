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

/// How many supplementary groups one SO_PEERGROUPS read returns at most.
#define MENTORY_PEER_GROUPS_CAPACITY 1024

/// A buffer for the SO_PEERGROUPS socket option (Linux >= 4.13): the peer's supplementary groups,
/// sorted ascending by the kernel; the slots after the last group are left as the caller zeroed them.
struct mentory_peer_groups {
    gid_t groups[MENTORY_PEER_GROUPS_CAPACITY];
};

/// The SO_PEERCRED option name (17 on Linux).
int mentory_so_peercred(void);

/// The SO_PEERGROUPS option name (59 on Linux).
int mentory_so_peergroups(void);

/// Asks the C allocator to return the free pages of every arena to the system (glibc's `malloc_trim(0)`).
/// Returns 1 if memory was released, 0 if not, and -1 where the C library has no such call.
int mentory_malloc_trim(void);

/// Caps how many arenas the C allocator creates for the process's threads (glibc's `M_ARENA_MAX`).
/// Returns 1 on success, 0 if the C library refused, and -1 where it has no such setting.
int mentory_malloc_limit_arenas(int count);

/// accept4 with SOCK_NONBLOCK | SOCK_CLOEXEC, the peer's address not asked for: the new descriptor, or -1 with
/// errno (EAGAIN when none is waiting).
int mentory_accept(int listener);

#endif
