/* The nemesis's wall-clock jump (LD_PRELOAD): CLOCK_REALTIME, gettimeofday and time of this process read the
   real wall clock plus the whole seconds in the file $NEMESIS_WALL_OFFSET_FILE (signed, re-read at most once a
   second), as when an NTP step moves a host's clock; the monotonic clocks and every timed wait are untouched.
   libfaketime 0.9.10 cannot do this to a Python process: with FAKETIME_DONT_FAKE_MONOTONIC=1 its
   clock_nanosleep fails time.sleep with EINVAL. Built by benchmarks/nemesis.py with gcc. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

typedef int (*clock_gettime_fn)(clockid_t, struct timespec *);
static clock_gettime_fn real_clock_gettime;
static volatile long offset_s;
static volatile time_t next_read_s;

static long wall_offset(void) {
    struct timespec mono;
    if (!real_clock_gettime)
        real_clock_gettime = (clock_gettime_fn)dlsym(RTLD_NEXT, "clock_gettime");
    real_clock_gettime(CLOCK_MONOTONIC, &mono);
    if (mono.tv_sec >= next_read_s) {
        const char *path = getenv("NEMESIS_WALL_OFFSET_FILE");
        int fd = path ? open(path, O_RDONLY | O_CLOEXEC) : -1;
        next_read_s = mono.tv_sec + 1;
        if (fd >= 0) {
            char text[32] = {0};
            ssize_t n = read(fd, text, sizeof text - 1);
            close(fd);
            if (n > 0)
                offset_s = strtol(text, NULL, 10);
        }
    }
    return offset_s;
}

int clock_gettime(clockid_t clock, struct timespec *ts) {
    long offset = wall_offset();
    int rc = real_clock_gettime(clock, ts);
    if (rc == 0 && (clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE))
        ts->tv_sec += offset;
    return rc;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
    struct timespec ts;
    int rc = clock_gettime(CLOCK_REALTIME, &ts);
    (void)tz;
    if (rc == 0) {
        tv->tv_sec = ts.tv_sec;
        tv->tv_usec = ts.tv_nsec / 1000;
    }
    return rc;
}

time_t time(time_t *out) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (out)
        *out = ts.tv_sec;
    return ts.tv_sec;
}
