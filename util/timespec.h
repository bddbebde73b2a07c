/* Timespec arithmetic the deadlines and clocks share. */
#ifndef SBFS_TIMESPEC_H
#define SBFS_TIMESPEC_H

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

#endif
