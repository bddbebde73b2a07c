/* The write-back journal: closes from many threads at once each get a
 * durable entry (sharing the folder's fsyncs), a renamed entry keeps its
 * new path, a removed one is gone, and after the daemon's death the
 * recovery saves every other file under its path with its bytes, also
 * from a journal whose pointer a crash took (found in the spool folder,
 * and said so). */
#include "tests/unit/unit.h"
#include "fs/writeback/wb_journal.h"

#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define THREADS 8
#define PER_THREAD 25

static struct wb_journal *j;
static char spool[64];
static pthread_barrier_t start;

struct adder {
	int t;
	int64_t seq[PER_THREAD];
	int fd[PER_THREAD];
};

static void content(int t, int i, char *buf, size_t len)
{
	snprintf(buf, len, "thread %d file %d\n", t, i);
}

static void *add_many(void *arg)
{
	struct adder *a = arg;
	pthread_barrier_wait(&start);
	for (int i = 0; i < PER_THREAD; i++) {
		char rel[64], text[64];
		snprintf(rel, sizeof rel, "/t%d/f%d", a->t, i);
		content(a->t, i, text, sizeof text);
		a->fd[i] = open(spool, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
		if (a->fd[i] < 0 || write(a->fd[i], text, strlen(text)) < 0)
			a->seq[i] = -1;
		else {
			bool copied = true;
			a->seq[i] = wb_journal_add(j, a->fd[i], rel, &copied);
			if (copied) /* a spool never journaled is linked, not copied */
				a->seq[i] = -2;
		}
	}
	return NULL;
}

static int remove_one(const char *path, const struct stat *st, int type,
		      struct FTW *ftw)
{
	(void)st, (void)type, (void)ftw;
	remove(path);
	return 0;
}

static bool file_is(const char *path, const char *want)
{
	char got[128] = "";
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(got, 1, sizeof got - 1, f) : 0;
	if (f)
		fclose(f);
	got[n] = '\0';
	return strcmp(got, want) == 0;
}

int main(void)
{
	char base[] = "/tmp/sbfs-wbj-XXXXXX";
	if (!mkdtemp(base))
		return 1;
	char state[128];
	snprintf(spool, sizeof spool, "%s/spool", base);
	snprintf(state, sizeof state, "%s/state", base);
	mkdir(spool, 0700);
	setenv("XDG_STATE_HOME", state, 1);

	char err[512] = "";
	j = wb_journal_open(spool, "box", err, sizeof err);
	CHECK(j != NULL);
	if (!j) {
		fprintf(stderr, "%s\n", err);
		return unit_done("wb_journal");
	}

	static struct adder a[THREADS];
	pthread_t th[THREADS];
	pthread_barrier_init(&start, NULL, THREADS);
	for (int t = 0; t < THREADS; t++) {
		a[t].t = t;
		pthread_create(&th[t], NULL, add_many, &a[t]);
	}
	for (int t = 0; t < THREADS; t++)
		pthread_join(th[t], NULL);
	pthread_barrier_destroy(&start);

	int64_t seen[THREADS * PER_THREAD];
	size_t n = 0;
	for (int t = 0; t < THREADS; t++)
		for (int i = 0; i < PER_THREAD; i++) {
			CHECK(a[t].seq[i] > 0);
			for (size_t k = 0; k < n; k++)
				CHECK(seen[k] != a[t].seq[i]);
			seen[n++] = a[t].seq[i];
		}
	uint64_t entries, fsyncs;
	wb_journal_counts(j, &entries, &fsyncs);
	CHECK_INT(entries, THREADS * PER_THREAD);
	CHECK(fsyncs >= 1 && fsyncs <= entries);
	printf("  %llu entries made durable by %llu folder fsyncs\n",
	       (unsigned long long)entries, (unsigned long long)fsyncs);

	/* a renamed entry, a removed one, one rewritten */
	CHECK_INT(wb_journal_rename(j, a[0].seq[0], "/moved/here"), 0);
	wb_journal_remove(j, a[1].seq[0]);
	CHECK_INT(pwrite(a[2].fd[0], "new\n", 4, 0), 4);
	CHECK_INT(ftruncate(a[2].fd[0], 4), 0);
	CHECK_INT(wb_journal_sync(j, a[2].fd[0]), 0);
	/* a spool whose entry went (its upload landed), written again: the
	 * kernel will not link it twice, so the new entry is a copy, with the
	 * bytes of the moment */
	wb_journal_remove(j, a[3].seq[0]);
	CHECK_INT(pwrite(a[3].fd[0], "again\n", 6, 0), 6);
	CHECK_INT(ftruncate(a[3].fd[0], 6), 0);
	bool copied = false;
	a[3].seq[0] = wb_journal_add(j, a[3].fd[0], "/again", &copied);
	CHECK(a[3].seq[0] > 0);
	CHECK(copied);
	CHECK_INT(pwrite(a[3].fd[0], "later\n", 6, 0), 6); /* not in the copy */

	/* the daemon dies: its journal is left for the next start */
	wb_journal_close(j, 1);
	for (int t = 0; t < THREADS; t++)
		for (int i = 0; i < PER_THREAD; i++)
			close(a[t].fd[i]);
	FILE *out = fopen("/dev/null", "w");
	size_t saved = wb_journal_recover(out);
	fclose(out);
	CHECK_INT(saved, THREADS * PER_THREAD - 1);

	char path[256], want[64];
	snprintf(path, sizeof path, "%s/sbfs/unsaved/box/moved/here", state);
	content(0, 0, want, sizeof want);
	CHECK(file_is(path, want));
	snprintf(path, sizeof path, "%s/sbfs/unsaved/box/t1/f0", state);
	CHECK(access(path, F_OK) != 0);
	snprintf(path, sizeof path, "%s/sbfs/unsaved/box/t2/f0", state);
	CHECK(file_is(path, "new\n"));
	snprintf(path, sizeof path, "%s/sbfs/unsaved/box/again", state);
	CHECK(file_is(path, "again\n"));
	for (int t = 3; t < THREADS; t++)
		for (int i = t == 3; i < PER_THREAD; i++) {
			snprintf(path, sizeof path, "%s/sbfs/unsaved/box/t%d/f%d", state, t, i);
			content(t, i, want, sizeof want);
			CHECK(file_is(path, want));
		}
	snprintf(path, sizeof path, "%s/sbfs-journal-box", spool);
	CHECK(access(path, F_OK) != 0); /* recovered: the folder is gone */

	/* The pointer is gone (a power cut before it reached the disk):
	 * the spool folder the mount used is searched. */
	j = wb_journal_open(spool, "nopointer", err, sizeof err);
	CHECK(j != NULL);
	if (!j)
		return unit_done("wb_journal");
	int fd = open(spool, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	CHECK_INT(write(fd, "orphan\n", 7), 7);
	CHECK(wb_journal_add(j, fd, "/d/orphan", &copied) > 0);
	close(fd);
	wb_journal_close(j, 1);
	snprintf(path, sizeof path, "%s/sbfs/journal/nopointer", state);
	CHECK_INT(unlink(path), 0);
	char said[1024] = "";
	out = fmemopen(said, sizeof said - 1, "w");
	CHECK_INT(wb_journal_recover(out), 1);
	fclose(out);
	CHECK(strstr(said, "found its write-back journal in") != NULL);
	CHECK(strstr(said, "without the pointer") != NULL);
	snprintf(path, sizeof path, "%s/sbfs/unsaved/nopointer/d/orphan", state);
	CHECK(file_is(path, "orphan\n"));
	snprintf(path, sizeof path, "%s/sbfs-journal-nopointer", spool);
	CHECK(access(path, F_OK) != 0);

	nftw(base, remove_one, 16, FTW_DEPTH | FTW_PHYS);
	return unit_done("wb_journal");
}
