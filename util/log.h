#ifndef SBFS_LOG_H
#define SBFS_LOG_H

#include <stdbool.h>

enum sb_log_level { SB_LOG_ERROR, SB_LOG_WARN, SB_LOG_INFO, SB_LOG_DEBUG };

/* Messages go to stderr (foreground), the daemon's log file (-o log=) or
 * syslog (a daemon without one); debug messages only with -d. */
void sb_log_set_level(enum sb_log_level level);
/* error, warning, info or debug: 0, or -1 for another word. */
int sb_log_level_parse(const char *name, enum sb_log_level *level);
/* Each line starts with the UTC time (the daemon's log file). */
void sb_log_set_timestamps(bool on);
void sb_log_set_prefix(const char *prefix);
/* From now on every line goes to syslog (the journal) instead of stderr:
 * a daemon that has no log file. tag (the mountpoint) starts each line,
 * so several mounts' lines can be told apart. See log_syslog.h. */
void sb_log_to_syslog(const char *tag);
bool sb_log_is_syslog(void);
void sb_log(enum sb_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define sb_err(...) sb_log(SB_LOG_ERROR, __VA_ARGS__)
#define sb_warn(...) sb_log(SB_LOG_WARN, __VA_ARGS__)
#define sb_info(...) sb_log(SB_LOG_INFO, __VA_ARGS__)
#define sb_debug(...) sb_log(SB_LOG_DEBUG, __VA_ARGS__)

#endif
