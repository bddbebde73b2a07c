#ifndef SBFS_LOG_H
#define SBFS_LOG_H

enum sb_log_level { SB_LOG_ERROR, SB_LOG_WARN, SB_LOG_INFO, SB_LOG_DEBUG };

/* Messages go to stderr (foreground) or the daemon's log file; debug
 * messages only with -d. */
void sb_log_set_level(enum sb_log_level level);
void sb_log_set_prefix(const char *prefix);
void sb_log(enum sb_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define sb_err(...) sb_log(SB_LOG_ERROR, __VA_ARGS__)
#define sb_warn(...) sb_log(SB_LOG_WARN, __VA_ARGS__)
#define sb_info(...) sb_log(SB_LOG_INFO, __VA_ARGS__)
#define sb_debug(...) sb_log(SB_LOG_DEBUG, __VA_ARGS__)

#endif
