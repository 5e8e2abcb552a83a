/*
 * wake_latency: what one wake-up of a sleeping thread costs on this machine,
 * the floor under every synchronous FUSE round trip (a request wakes a
 * daemon thread, the reply wakes the caller).
 *
 * Two processes pass one byte back and forth through two pipes, 20,000
 * times, in four placements:
 *   same CPU            both pinned to CPU 0: every wake is local
 *   two CPUs            CPU 0 and CPU 1, both sleep in read(2): two remote
 *                       wakes per round trip
 *   two CPUs, one spins the CPU 1 side polls instead of sleeping: one remote
 *                       wake (of the CPU 0 side) per round trip
 *   two CPUs, both spin nobody sleeps: no wake at all
 * and prints the mean microseconds per round trip of each.
 *
 * Build and run (bench/RESULTS.md quotes it):
 *   cc -O2 -o /tmp/wake_latency bench/wake_latency.c && /tmp/wake_latency
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { ROUNDS = 20000 };

static void pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) {
        perror("wake_latency: sched_setaffinity");
        exit(2);
    }
}

/* One byte from fd; a non-blocking fd is polled until it comes. */
static void get(int fd)
{
    char c;
    for (;;) {
        ssize_t n = read(fd, &c, 1);
        if (n == 1)
            return;
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        perror("wake_latency: read");
        exit(1);
    }
}

static void put(int fd)
{
    if (write(fd, "x", 1) != 1) {
        perror("wake_latency: write");
        exit(1);
    }
}

static double round_trip_us(int parent_cpu, int child_cpu, int child_spins, int parent_spins)
{
    int ping[2], pong[2];
    if (pipe(ping) != 0 || pipe(pong) != 0) {
        perror("wake_latency: pipe");
        exit(2);
    }
    pid_t pid = fork();
    if (pid < 0) {
        perror("wake_latency: fork");
        exit(2);
    }
    if (pid == 0) {
        pin(child_cpu);
        if (child_spins)
            fcntl(ping[0], F_SETFL, O_NONBLOCK);
        for (int i = 0; i < ROUNDS; i++) {
            get(ping[0]);
            put(pong[1]);
        }
        _exit(0);
    }
    pin(parent_cpu);
    if (parent_spins)
        fcntl(pong[0], F_SETFL, O_NONBLOCK);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < ROUNDS; i++) {
        put(ping[1]);
        get(pong[0]);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    waitpid(pid, NULL, 0);
    close(ping[0]);
    close(ping[1]);
    close(pong[0]);
    close(pong[1]);
    double ns = (t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec);
    return ns / ROUNDS / 1000.0;
}

int main(void)
{
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {
        fprintf(stderr, "wake_latency: needs two CPUs\n");
        return 2;
    }
    printf("same CPU:              %6.2f us per round trip\n", round_trip_us(0, 0, 0, 0));
    printf("two CPUs:              %6.2f us per round trip\n", round_trip_us(0, 1, 0, 0));
    printf("two CPUs, one spins:   %6.2f us per round trip\n", round_trip_us(0, 1, 1, 0));
    printf("two CPUs, both spin:   %6.2f us per round trip\n", round_trip_us(0, 1, 1, 1));
    return 0;
}
