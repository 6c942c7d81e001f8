/* Why the reader spins before it sleeps: the cost of a one-byte round trip between two
 * processes over two pipes, by how the waiting side waits. Not part of the library.
 *
 *     cc -O2 -o /tmp/pipe_pingpong benches/pipe_pingpong.c
 *     for mode in 0 1 2 3; do /tmp/pipe_pingpong $mode 100000; done
 *
 * mode 0: blocking read(2); 1: poll(2) with a 100 ms timeout, then read; 2: poll(2) with no
 * timeout, then read; 3: spin on a non-blocking read(2) for up to 200 us, then as 1.
 * Prints the waiting side's user and system CPU and the wall time per round trip.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <poll.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <sys/eventfd.h>
int main(int argc, char **argv) {
    int mode = atoi(argv[1]); int n = atoi(argv[2]);
    int a[2], b[2]; pipe(a); pipe(b);
    int waker = eventfd(0, EFD_NONBLOCK);
    pid_t pid = fork();
    char c = 'x';
    if (pid == 0) { close(a[1]); close(b[0]);
        for (;;) { if (read(a[0], &c, 1) != 1) _exit(0); write(b[1], &c, 1); }
    }
    close(a[0]); close(b[1]); if (mode == 3) { fcntl(b[0], F_SETFL, O_NONBLOCK); } struct rusage r0, r1; struct timespec t0, t1;
    getrusage(RUSAGE_SELF, &r0); clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < n; i++) {
        write(a[1], &c, 1);
        if (mode == 0) { read(b[0], &c, 1); }
        else if (mode == 3) {
            struct timespec s0, s1; clock_gettime(CLOCK_MONOTONIC, &s0);
            for (;;) {
                if (read(b[0], &c, 1) == 1) break;
                clock_gettime(CLOCK_MONOTONIC, &s1);
                if ((s1.tv_sec - s0.tv_sec) * 1000000000L + (s1.tv_nsec - s0.tv_nsec) > 200000L) {
                    struct pollfd p[2] = {{b[0], POLLIN, 0}, {waker, POLLIN, 0}};
                    poll(p, 2, 100); read(b[0], &c, 1); break;
                }
            }
        }
        else {
            struct pollfd p[2] = {{b[0], POLLIN, 0}, {waker, POLLIN, 0}};
            poll(p, 2, mode == 1 ? 100 : -1);
            read(b[0], &c, 1);
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1); getrusage(RUSAGE_SELF, &r1);
    double us = (r1.ru_utime.tv_sec - r0.ru_utime.tv_sec) * 1e6 + (r1.ru_utime.tv_usec - r0.ru_utime.tv_usec);
    double sy = (r1.ru_stime.tv_sec - r0.ru_stime.tv_sec) * 1e6 + (r1.ru_stime.tv_usec - r0.ru_stime.tv_usec);
    double wall = (t1.tv_sec - t0.tv_sec) * 1e6 + (t1.tv_nsec - t0.tv_nsec) / 1e3;
    printf("mode %d: user %.2f sys %.2f wall %.2f us/rt\n", mode, us / n, sy / n, wall / n);
    close(a[1]); waitpid(pid, 0, 0);
    return 0;
}
