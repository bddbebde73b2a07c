/* sh_quote against hostile names, each round-tripped through a real sh. */
#include "tests/unit/unit.h"
#include "util/shell_quote.h"

#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

/* Runs /bin/sh -c "printf %s <quoted>" and compares the bytes it prints. */
static void round_trip(const char *s, size_t len)
{
	char *q = sh_quote(s, len);
	CHECK(q != NULL);
	if (!q)
		return;
	size_t cmdlen = strlen(q) + 16;
	char *cmd = malloc(cmdlen);
	snprintf(cmd, cmdlen, "printf %%s %s", q);
	int p[2];
	CHECK(pipe(p) == 0);
	pid_t pid = fork();
	if (pid == 0) {
		dup2(p[1], 1);
		close(p[0]);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	char out[1024];
	size_t got = 0;
	ssize_t n;
	while ((n = read(p[0], out + got, sizeof(out) - got)) > 0)
		got += (size_t)n;
	close(p[0]);
	int st;
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK_MEM(out, got, s, len);
	free(cmd);
	free(q);
}

int main(void)
{
	static const char *const names[] = {
		"plain", "it's", "'", "''", "a'b'c", "$(touch /tmp/pwned)",
		"`id`", "new\nline", "-rf", "--", "with space", "\t tab",
		"\xff\xfe invalid utf8 \xc3", "*?[a]", "!history", "back\\slash",
		"\"double\"", "${HOME}", ";|&<>", "",
	};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		round_trip(names[i], strlen(names[i]));
	char longname[255];
	for (size_t i = 0; i < sizeof(longname); i++)
		longname[i] = (char)("a'$`\n\xff"[i % 6]);
	round_trip(longname, sizeof(longname));

	char *q = sh_quote("it's", 4);
	CHECK(q && strcmp(q, "'it'\\''s'") == 0);
	free(q);
	q = sh_quote("", 0);
	CHECK(q && strcmp(q, "''") == 0);
	free(q);
	return unit_done("shell_quote");
}
