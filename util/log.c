#include "log.h"
#include "log_syslog.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static enum sb_log_level log_level = SB_LOG_INFO;
static char log_prefix[64] = "sbfs";
static bool log_timestamps;
static bool log_syslog;

void sb_log_set_level(enum sb_log_level level) { log_level = level; }
void sb_log_set_timestamps(bool on) { log_timestamps = on; }

void sb_log_to_syslog(const char *tag)
{
	sb_syslog_open(tag);
	log_syslog = true;
}

bool sb_log_is_syslog(void) { return log_syslog; }

int sb_log_level_parse(const char *name, enum sb_log_level *level)
{
	static const char *const names[] = {"error", "warning", "info", "debug"};
	for (int i = 0; i < 4; i++)
		if (!strcmp(name, names[i])) {
			*level = (enum sb_log_level)i;
			return 0;
		}
	return -1;
}

void sb_log_set_prefix(const char *prefix)
{
	snprintf(log_prefix, sizeof log_prefix, "%s", prefix);
}

void sb_log(enum sb_log_level level, const char *fmt, ...)
{
	if (level > log_level)
		return;
	static const char *const names[] = {"error", "warning", "info", "debug"};
	/* One fprintf per message so lines from threads do not interleave. */
	char msg[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	/* syslog stamps the time and keeps the level as the priority. */
	if (log_syslog) {
		sb_syslog_send(level, msg);
		return;
	}
	/* A log file is read later: each line says when. */
	char when[40] = "";
	if (log_timestamps) {
		struct timespec ts;
		struct tm tm;
		clock_gettime(CLOCK_REALTIME, &ts);
		gmtime_r(&ts.tv_sec, &tm);
		size_t n = strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
		snprintf(when + n, sizeof when - n, ".%03ldZ ", ts.tv_nsec / 1000000);
	}
	if (level == SB_LOG_INFO)
		fprintf(stderr, "%s%s: %s\n", when, log_prefix, msg);
	else
		fprintf(stderr, "%s%s: %s: %s\n", when, log_prefix, names[level], msg);
}
