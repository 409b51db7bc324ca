/*
 * readytime - how long a daemon takes from exec to READY=1.
 *
 *   readytime [--cpu N] NOTIFY_PATH -- PROGRAM [ARGS...]
 *
 * Binds an AF_UNIX datagram socket at NOTIFY_PATH, forks, and execs PROGRAM with
 * NOTIFY_SOCKET=NOTIFY_PATH in its environment (as systemd does for Type=notify),
 * pinned to CPU N when --cpu is given (set in the child, so no taskset exec is timed).
 * The clock (CLOCK_MONOTONIC) starts just before the fork and stops when a datagram
 * holding the line READY=1 arrives. Prints "ready_ms=<milliseconds> pid=<pid>", then
 * stops the daemon with SIGTERM (SIGKILL after 10 s) and waits for it. Gives up
 * after 60 s without READY=1 and exits 1.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* 1 when the notification message (newline-separated assignments) holds READY=1. */
static int says_ready(const char *message)
{
    for (const char *line = message; line != NULL && *line != '\0';) {
        if (strncmp(line, "READY=1", 7) == 0 && (line[7] == '\n' || line[7] == '\0'))
            return 1;
        line = strchr(line, '\n');
        if (line != NULL)
            line++;
    }
    return 0;
}

/* SIGTERM, then SIGKILL if the child is still there after 10 s; reaps it. */
static void stop(pid_t child)
{
    kill(child, SIGTERM);
    for (int waited = 0; waited < 1000; waited++) {
        if (waitpid(child, NULL, WNOHANG) == child)
            return;
        usleep(10000);
    }
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
}

int main(int argc, char **argv)
{
    int cpu = -1;
    if (argc > 2 && strcmp(argv[1], "--cpu") == 0) {
        cpu = atoi(argv[2]);
        argv += 2;
        argc -= 2;
    }
    if (argc < 4 || strcmp(argv[2], "--") != 0) {
        fprintf(stderr, "usage: readytime [--cpu N] NOTIFY_PATH -- PROGRAM [ARGS...]\n");
        return 2;
    }
    const char *path = argv[1];
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof address.sun_path) {
        fprintf(stderr, "notify socket path too long\n");
        return 2;
    }
    strcpy(address.sun_path, path);
    unlink(path);
    int sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (sock < 0 || bind(sock, (struct sockaddr *)&address, sizeof address) < 0) {
        perror("notify socket");
        return 1;
    }

    double start = now_ms();
    pid_t child = fork();
    if (child < 0) {
        perror("fork");
        return 1;
    }
    if (child == 0) {
        if (cpu >= 0) {
            cpu_set_t set;
            CPU_ZERO(&set);
            CPU_SET(cpu, &set);
            if (sched_setaffinity(0, sizeof set, &set) < 0)
                perror("sched_setaffinity");
        }
        setenv("NOTIFY_SOCKET", path, 1);
        execvp(argv[3], argv + 3);
        perror("exec");
        _exit(127);
    }

    char message[4096];
    int status = 1;
    for (;;) {
        double left = 60000 - (now_ms() - start);
        struct pollfd pending = {.fd = sock, .events = POLLIN};
        int ready = left > 0 ? poll(&pending, 1, (int)left) : 0;
        if (ready < 0 && errno == EINTR)
            continue;
        if (ready <= 0) {
            fprintf(stderr, "no READY=1 within 60 s\n");
            break;
        }
        ssize_t n = recv(sock, message, sizeof message - 1, 0);
        if (n < 0)
            continue;
        message[n] = '\0';
        if (says_ready(message)) {
            printf("ready_ms=%.3f pid=%d\n", now_ms() - start, (int)child);
            fflush(stdout);
            status = 0;
            break;
        }
    }
    stop(child);
    close(sock);
    unlink(path);
    return status;
}
