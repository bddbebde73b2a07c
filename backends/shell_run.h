/* Private to the shell implementation (shell_run.c runs the scripts,
 * shell_parse.c reads their output, shell_read.c and shell_write.c are
 * the operations): what every script and its runner share.
 *
 * Exit codes reserved by the scripts (mapped by shell_status_to_errno):
 *   100 missing path -> ENOENT      101 not a regular file -> EINVAL
 *   102 is a directory -> EISDIR    103 not a directory -> ENOTDIR
 *   104 exists -> EEXIST            105 not empty -> ENOTEMPTY
 *   106 the tool refused -> the errno its message names (util/tool_errno.h),
 *       else EACCES                 107 raced with a change -> retried/EAGAIN
 *   108 not permitted -> EPERM
 *   126/127 tool missing or not runnable -> ENOTSUP (tool named in the log)
 */
#ifndef SBFS_SHELL_RUN_H
#define SBFS_SHELL_RUN_H

#include "shell_ops.h"
#include "output_capture.h"

#include <stdbool.h>
#include <stdint.h>

#define READ_BLOCK 65536
/* A read window comes in segments of this many blocks (16 MiB): the guest
 * checks the file's identity again after each, and readers take each one
 * as soon as it is checked, not when the whole window has come. Each check
 * is a `stat` run in the guest: at 4 MiB a cold 256 MiB read took a third
 * longer on local. */
#define READ_SEGMENT_BLOCKS 256

/* Shared by every script: `need` names a missing tool, `miss` tells a
 * missing path from one whose parent is not a directory. */
#define PRELUDE                                                               \
	"need(){ for t do command -v \"$t\" >/dev/null 2>&1 || "              \
	"{ printf 'sbfs: tool missing in sandbox: %s\\n' \"$t\" >&2; exit 127; }; done; }\n" \
	"miss(){ p=$(dirname -- \"$1\"); if [ -e \"$p\" ] && [ ! -d \"$p\" ]; " \
	"then exit 103; fi; exit 100; }\n"                                     \
	"ex(){ [ -e \"$1\" ] || [ -L \"$1\" ]; }\n"                            \
	"need dirname\n"

/* Exact copy of a link target: $(...) strips trailing newlines, so add a
 * sentinel and cut it and readlink's own newline back off. */
#define READ_LINK_INTO_T                                                      \
	"t=$(readlink -- \"$f\"; echo x); t=${t%x}; t=${t%?}\n"

/* stat's format for one entry; shell_parse_stat_line reads it back. */
#define STAT_FMT "%f %s %Y %X %Z %h %i %u %g"

int shell_status_to_errno(int code);

/* Runs `sh -c PRELUDE+script sh args...` in the guest through the raw exec
 * slot (not sb_exec: these are not user commands), stdout going to on_out,
 * and maps the outcome to 0 or a negative errno. At most 11 args. */
int shell_run(struct sb_backend *b, const char *what, const char *script,
	      const char *const *args, int stdin_fd, sb_output_fn on_out,
	      void *out_arg);
/* shell_run with the whole argv given (sh -c script sh args...). */
int shell_run_argv(struct sb_backend *b, const char *what,
		   const char *const *argv, int stdin_fd,
		   sb_output_fn on_out, void *out_arg);
/* shell_run with stdout kept in out. */
int shell_capture(struct sb_backend *b, const char *what, const char *script,
		  const char *const *args, struct output_capture *out);
/* Paths must be absolute guest paths: that also keeps any of them from
 * being read as an option by a tool that lacks `--`. */
bool shell_path_ok(const char *p);

/* Digits in base 10 or 16 from *p, up to the first other character or
 * end, *p moved past them; -EPROTO for none, more than 20, or overflow. */
int shell_parse_u64(const char **p, const char *end, int base, uint64_t *v);

#endif
