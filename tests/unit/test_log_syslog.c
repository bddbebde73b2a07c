/* The syslog lines of a daemon without -o log=: the level's priority
 * under LOG_DAEMON, RFC 3164's header, the mountpoint first, and none of
 * the log file's own timestamp. */
#include <syslog.h>

#include "util/log_syslog.h"
#include "unit.h"

static const char *line(enum sb_log_level level, const struct tm *when,
			const char *tag, const char *msg)
{
	static char buf[512];
	sb_syslog_format(buf, sizeof buf, level, when, 4242, tag, msg);
	return buf;
}

int main(void)
{
	CHECK_INT(sb_syslog_priority(SB_LOG_ERROR), LOG_DAEMON | LOG_ERR);
	CHECK_INT(sb_syslog_priority(SB_LOG_WARN), LOG_DAEMON | LOG_WARNING);
	CHECK_INT(sb_syslog_priority(SB_LOG_INFO), LOG_DAEMON | LOG_INFO);
	CHECK_INT(sb_syslog_priority(SB_LOG_DEBUG), LOG_DAEMON | LOG_DEBUG);

	/* no time in the header: what the crash handler sends */
	CHECK(!strcmp(line(SB_LOG_INFO, NULL, "/home/u/box", "sandbox x mounted at /home/u/box"),
		      "<30>sbfs[4242]: /home/u/box: sandbox x mounted at /home/u/box"));
	CHECK(!strcmp(line(SB_LOG_ERROR, NULL, "/m", "gone"), "<27>sbfs[4242]: /m: error: gone"));
	CHECK(!strcmp(line(SB_LOG_WARN, NULL, "/m", "slow"), "<28>sbfs[4242]: /m: warning: slow"));
	CHECK(!strcmp(line(SB_LOG_DEBUG, NULL, "/m", "call"), "<31>sbfs[4242]: /m: debug: call"));
	CHECK(!strcmp(line(SB_LOG_INFO, NULL, NULL, "x"), "<30>sbfs[4242]: x"));
	CHECK(!strcmp(line(SB_LOG_INFO, NULL, "", "x"), "<30>sbfs[4242]: x"));

	/* the header's time as syslog(3) writes it, and no ISO stamp */
	struct tm tm = {.tm_year = 126, .tm_mon = 11, .tm_mday = 2, .tm_hour = 4,
			.tm_min = 5, .tm_sec = 9};
	CHECK(!strcmp(line(SB_LOG_INFO, &tm, "/m", "up"), "<30>Dec  2 04:05:09 sbfs[4242]: /m: up"));
	tm.tm_mday = 25;
	tm.tm_mon = 0;
	CHECK(!strcmp(line(SB_LOG_WARN, &tm, "/m", "up"), "<28>Jan 25 04:05:09 sbfs[4242]: /m: warning: up"));
	CHECK(!strstr(line(SB_LOG_INFO, &tm, "/m", "up"), "2026"));

	/* truncated to fit, always terminated */
	char small[16];
	size_t n = sb_syslog_format(small, sizeof small, SB_LOG_INFO, NULL, 1, "/m",
				    "a long message");
	CHECK_INT(n, 15);
	CHECK(!strcmp(small, "<30>sbfs[1]: /m"));
	return unit_done("log_syslog");
}
