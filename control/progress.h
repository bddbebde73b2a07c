/* `sbfs sync --progress` and `sbfs status --watch`: what write-back still
 * has to upload, how fast it goes and how long it will take, read from
 * the daemon's status again and again. */
#ifndef SBFS_CONTROL_PROGRESS_H
#define SBFS_CONTROL_PROGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include <jansson.h>

struct progress_sample {
	double t;                /* seconds, monotonic */
	long long files, bytes;  /* pending: queued and uploading */
	long long failed;        /* uploads that failed and wait for a retry */
	long long bytes_up;      /* uploaded since the mount, all calls */
};

/* The sample a status reply gives at time t. */
void progress_sample(json_t *status, double t, struct progress_sample *s);

/* One line: pending files and bytes, the rate since prev (NULL: none yet)
 * and the time left at that rate. */
void progress_format(const struct progress_sample *prev,
		     const struct progress_sample *cur, char *buf, size_t len);

/* sync --progress (until_synced: runs a sync and shows progress until it
 * returns, then its status) or status --watch (until interrupted or the
 * mount goes). A process exit status. */
int control_client_progress(const char *mount, bool until_synced, FILE *out);

#endif
