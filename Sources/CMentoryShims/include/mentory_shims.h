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

/// How many malloc arenas (glibc's `M_ARENA_MAX`) a process linking this library lets glibc keep, unless
/// `MALLOC_ARENA_MAX` is set in its environment.
#define MENTORY_MALLOC_ARENA_LIMIT 2

/// The environment variable glibc reads for its arena limit; when it is set, the limit is left to it.
#define MENTORY_MALLOC_ARENA_LIMIT_VARIABLE "MALLOC_ARENA_MAX"

/// The arena limit this library set as the process started, or 0 if it set none (`MALLOC_ARENA_MAX` is set, or
/// the C library has no such setting or refused it). A constructor sets it, before `main` and so before any
/// thread exists: a thread that has an arena keeps it, and the Swift runtime may start threads before `main`'s
/// first statement runs.
int mentory_malloc_arena_limit(void);

/// accept4 with SOCK_NONBLOCK | SOCK_CLOEXEC, the peer's address not asked for: the new descriptor, or -1 with
/// errno (EAGAIN when none is waiting).
int mentory_accept(int listener);

#endif
