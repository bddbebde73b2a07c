/* Collects a command's output in memory up to a limit, for the backends'
 * helper commands (shell file operations, vendor file helpers). */
#ifndef SBFS_OUTPUT_CAPTURE_H
#define SBFS_OUTPUT_CAPTURE_H

#include <stdbool.h>
#include <stddef.h>

struct output_capture {
	char *data;      /* NUL-terminated once anything arrived */
	size_t len, cap;
	size_t limit;    /* bytes kept at most */
	bool keep_head;  /* past the limit: keep what fits (stderr) instead of
			  * aborting the command with -EFBIG */
};

/* An sb_output_fn; arg is a struct output_capture. */
int output_capture_cb(void *arg, const char *data, size_t len);
void output_capture_free(struct output_capture *c);

#endif
