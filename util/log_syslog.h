/* The daemon's log lines as syslog datagrams (RFC 3164, as syslog(3)
 * sends them to /dev/log), for a daemon started without -o log=: on a
 * systemd machine they land in the journal (journalctl -t sbfs). */
#ifndef SBFS_LOG_SYSLOG_H
#define SBFS_LOG_SYSLOG_H

#include <stddef.h>
#include <time.h>

#include "log.h"

/* The datagram of one line: "<PRI>Mmm dd hh:mm:ss sbfs[PID]: TAG: msg"
 * (PRI: LOG_DAEMON and the level's priority; a warning or an error says
 * so in its text too, for the plain-text files some syslogs write). when
 * NULL: no time in the header (the receiver stamps it on arrival). tag
 * (the mountpoint) tells one mount's lines from another's; NULL or "":
 * none. Returns the length written (truncated to fit, always
 * terminated). */
size_t sb_syslog_format(char *buf, size_t len, enum sb_log_level level,
			const struct tm *when, int pid, const char *tag,
			const char *msg);
/* LOG_ERR, LOG_WARNING, LOG_INFO or LOG_DEBUG, with LOG_DAEMON. */
int sb_syslog_priority(enum sb_log_level level);

/* Where the datagrams go: /dev/log, or $SBFS_SYSLOG_SOCKET (a test hook,
 * read here once: the e2e suite binds its own socket there). */
void sb_syslog_open(const char *tag);
/* Sends one line; with no socket there (no syslog daemon), the line is
 * dropped silently and the next one tries again. Thread-safe. */
void sb_syslog_send(enum sb_log_level level, const char *msg);
/* From a signal handler: only async-signal-safe calls, no time in the
 * header. Does nothing unless sb_syslog_open ran. */
void sb_syslog_send_signal_safe(enum sb_log_level level, const char *msg);

#endif
