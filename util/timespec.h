/* Timespec arithmetic the deadlines and clocks share. */
#ifndef SBFS_TIMESPEC_H
#define SBFS_TIMESPEC_H

#include <pthread.h>
#include <time.h>

/* t plus ms milliseconds (ms >= 0), normalised. */
static inline struct timespec timespec_after_ms(struct timespec t, long ms)
{
	t.tv_sec += ms / 1000;
	t.tv_nsec += (ms % 1000) * 1000000L;
	if (t.tv_nsec >= 1000000000L) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000L;
	}
	return t;
}

/* CLOCK_MONOTONIC's now plus ms: a deadline for the condition variables
 * below. */
static inline struct timespec monotonic_after_ms(long ms)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return timespec_after_ms(now, ms);
}

/* A condition variable whose timed waits take CLOCK_MONOTONIC deadlines
 * (a wall-clock step neither cuts a wait short nor stretches it). */
static inline void cond_init_monotonic(pthread_cond_t *c)
{
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(c, &ca);
	pthread_condattr_destroy(&ca);
}

#endif
