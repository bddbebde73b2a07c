#include "exec_marker.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

/* grep with a regex, not -F: busybox grep -F stops at the NULs of an
 * environ file. A marker is [0-9a-f] of a fixed length, so no marker
 * matches the start of another. A signal sent before the command exists
 * is held: the scan repeats (10 s at most) until it finds the command.
 * Then two more passes signal what was forked meanwhile: one kill per
 * process is not a group's one kill, and a shell signalled while it forked
 * its next sleep waited on that sleep, its trap pending (CI: "sbexec
 * still running after 1 HUP"). */
static const char signal_script[] =
	"found= quiet=0 i=0\n"
	"while [ $i -lt 100 ] && [ $quiet -lt 2 ]; do i=$((i+1)) new=0\n"
	"  for f in $(grep -l \"" EXEC_MARKER_VAR "=$1\" /proc/[0-9]*/environ 2>/dev/null); do\n"
	"    p=${f#/proc/}; p=${p%/environ}\n"
	"    case \" $found \" in *\" $p \"*) continue ;; esac\n"
	"    kill -s \"$2\" \"$p\" 2>/dev/null; found=\"$found $p\" new=1\n"
	"  done\n"
	"  [ -n \"$found\" ] && [ $new = 0 ] && quiet=$((quiet+1))\n"
	"  [ $quiet -lt 2 ] && { sleep 0.1 2>/dev/null || sleep 1; }\n"
	"done\n"
	"exit 0\n";

static const char kill_script[] =
	"i=0; while [ $i -lt 3 ]; do i=$((i+1))\n"
	"  for f in $(grep -l \"" EXEC_MARKER_VAR "=$1\" /proc/[0-9]*/environ 2>/dev/null); do\n"
	"    p=${f#/proc/}; p=${p%/environ}\n"
	"    kill -9 -- \"-$p\" 2>/dev/null; kill -9 \"$p\" 2>/dev/null\n"
	"  done\n"
	"done\n"
	"exit 0\n";

void exec_marker_new(char out[EXEC_MARKER_SIZE])
{
	unsigned char r[(EXEC_MARKER_SIZE - 1) / 2] = {0};
	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r)) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		memcpy(r, &ts, sizeof(r) < sizeof(ts) ? sizeof(r) : sizeof(ts));
	}
	for (size_t i = 0; i < sizeof(r); i++)
		snprintf(out + 2 * i, 3, "%02x", r[i]);
}

void exec_marker_kill_argv(const char *argv[6], const char *marker)
{
	const char *v[6] = {"sh", "-c", kill_script, "sbfs-kill", marker, NULL};
	memcpy(argv, v, sizeof(v));
}

void exec_marker_signal_argv(const char *argv[7], const char *marker, int sig)
{
	/* by name: POSIX kill -s takes no number */
	const char *v[7] = {"sh", "-c", signal_script, "sbfs-signal", marker,
			    sigabbrev_np(sig), NULL};
	memcpy(argv, v, sizeof(v));
}
