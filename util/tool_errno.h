/* What a failed command-line tool said, as an errno: the shell fallback
 * runs coreutils or busybox in the sandbox with LC_ALL=C, and they print
 * strerror()'s text ("cat: write error: No space left on device"). */
#ifndef SBFS_TOOL_ERRNO_H
#define SBFS_TOOL_ERRNO_H

/* The errno whose message appears first in msg (NUL-terminated), among
 * those a file operation can meet; fallback when none does or msg is
 * NULL. A positive errno value. */
int sb_tool_errno(const char *msg, int fallback);

#endif
