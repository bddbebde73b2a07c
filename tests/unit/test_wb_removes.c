/* Write-back's queued removes, the pure parts: the ordered queue and its
 * gone-set (exact paths and ancestors), the batch-remove report parser
 * of the shell fallback, and when an rmdir may queue at all (the exec
 * marks, the listing a forgotten child invalidates). */
#include "tests/unit/unit.h"
#include "backends/backend.h"
#include "backends/shell_ops.h"
#include "fs/core/node_table.h"
#include "fs/writeback/wb_removes.h"
#include "fs/writeback/wb_removes_queue.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#define L(s) s, sizeof(s) - 1

static void queue_order_and_set(void)
{
	struct rmq q;
	rmq_init(&q);
	CHECK(!rmq_gone(&q, "/w/a"));
	CHECK_INT(rmq_push(&q, "/w/d/f1", false), 0);
	CHECK_INT(rmq_push(&q, "/w/d/f2", false), 0);
	CHECK_INT(rmq_push(&q, "/w/d", true), 0);
	CHECK_INT(rmq_pending(&q), 3);

	/* exact names, and everything below a queued directory */
	CHECK(rmq_gone(&q, "/w/d/f1"));
	CHECK(rmq_gone(&q, "/w/d"));
	CHECK(rmq_gone(&q, "/w/d/x/y"));
	CHECK(!rmq_gone(&q, "/w/d2"));      /* a prefix that is not an ancestor */
	CHECK(rmq_gone(&q, "/w/d/f10"));   /* below /w/d, queued too */
	CHECK(!rmq_gone(&q, "/w/e/f1"));
	CHECK(!rmq_gone(&q, "/w"));
	CHECK(!rmq_gone(&q, "/w/"));
	CHECK(rmq_gone_in(&q, "/w/d", "f2"));
	CHECK(rmq_gone_in(&q, "/w/d/", "f2"));
	CHECK(rmq_gone_in(&q, "/w", "d"));
	CHECK(!rmq_gone_in(&q, "/w", "f2"));

	/* taken in order; still gone until done */
	struct rmq_entry *v;
	size_t k = rmq_take(&q, 2, 1 << 20, &v);
	CHECK_INT(k, 2);
	CHECK(strcmp(v[0].path, "/w/d/f1") == 0 && !v[0].is_dir);
	CHECK(strcmp(v[1].path, "/w/d/f2") == 0);
	CHECK_INT(rmq_pending(&q), 1);
	CHECK(rmq_gone(&q, "/w/d/f1"));
	rmq_done(&q, v, k);
	CHECK_INT(q.nset, 3); /* /w/d, and its parent's and grandparent's keys */
	CHECK(rmq_gone(&q, "/w/d/f1")); /* below the dir still queued */

	k = rmq_take(&q, 10, 1 << 20, &v);
	CHECK_INT(k, 1);
	CHECK(v[0].is_dir);
	rmq_done(&q, v, k);
	CHECK(!rmq_gone(&q, "/w/d"));
	CHECK_INT(rmq_take(&q, 10, 1 << 20, &v), 0);
	CHECK_INT(q.nset, 0);
	rmq_free(&q);
}

/* A queued directory removal is still counted by its parent's link count
 * (a stat of the parent lands it first) and by a listing of its
 * grandparent (which shows the parent's count). */
static void dir_removal_ancestors(void)
{
	struct rmq q;
	rmq_init(&q);
	CHECK_INT(rmq_push(&q, "/w/a/f", false), 0);
	CHECK(!rmq_dir_removed_below(&q, "/w/a", 1)); /* a file counts no link */
	CHECK_INT(rmq_push(&q, "/w/a/b", true), 0);
	CHECK_INT(rmq_push(&q, "/x", true), 0);
	CHECK(rmq_dir_removed_below(&q, "/w/a", 1));
	CHECK(rmq_dir_removed_below(&q, "/w/a/", 1));
	CHECK(rmq_dir_removed_below(&q, "/w", 2));
	CHECK(!rmq_dir_removed_below(&q, "/w", 1));
	CHECK(!rmq_dir_removed_below(&q, "/w/a", 2));
	CHECK(!rmq_dir_removed_below(&q, "/w/a/b", 1));
	CHECK(rmq_dir_removed_below(&q, "/", 1)); /* /x */
	CHECK(!rmq_dir_removed_below(&q, "/", 2));
	CHECK(!rmq_gone(&q, "/w/a")); /* the keys name no path */
	/* taken but not landed: still counted; landed: not */
	struct rmq_entry *v = NULL;
	size_t k = rmq_take(&q, 3, 1 << 20, &v);
	CHECK_INT(k, 3);
	CHECK(rmq_dir_removed_below(&q, "/w/a", 1));
	rmq_done(&q, v, k);
	CHECK(!rmq_dir_removed_below(&q, "/w/a", 1));
	CHECK(!rmq_dir_removed_below(&q, "/w", 2));
	CHECK(!rmq_dir_removed_below(&q, "/", 1));
	CHECK_INT((long)q.nset, 0);
	/* a name queued twice is counted until both land */
	CHECK_INT(rmq_push(&q, "/w/c", true), 0);
	CHECK_INT(rmq_push(&q, "/w/c", true), 0);
	k = rmq_take(&q, 1, 1 << 20, &v);
	rmq_done(&q, v, k);
	CHECK(rmq_dir_removed_below(&q, "/w", 1));
	rmq_free(&q);
}

static void queue_twice_and_budget(void)
{
	struct rmq q;
	rmq_init(&q);
	/* one name queued twice (removed, made again, removed again) stays
	 * gone until both landed */
	CHECK_INT(rmq_push(&q, "/w/a", false), 0);
	CHECK_INT(rmq_push(&q, "/w/a", false), 0);
	struct rmq_entry *v;
	size_t k = rmq_take(&q, 1, 1 << 20, &v);
	rmq_done(&q, v, k);
	CHECK(rmq_gone(&q, "/w/a"));
	k = rmq_take(&q, 1, 1 << 20, &v);
	rmq_done(&q, v, k);
	CHECK(!rmq_gone(&q, "/w/a"));

	/* many entries: the set grows, order holds, the byte budget splits
	 * batches but always takes at least one */
	char p[64];
	for (int i = 0; i < 5000; i++) {
		snprintf(p, sizeof p, "/w/dir%d/file%d", i % 37, i);
		CHECK_INT(rmq_push(&q, p, false), 0);
	}
	CHECK(rmq_gone(&q, "/w/dir3/file4999") == (4999 % 37 == 3));
	CHECK(rmq_gone(&q, "/w/dir5/file5"));
	size_t total = 0;
	int next = 0;
	bool ordered = true;
	while ((k = rmq_take(&q, 4096, 1000, &v)) > 0) {
		CHECK(k <= 4096);
		for (size_t i = 0; i < k; i++) {
			int d, f;
			if (sscanf(v[i].path, "/w/dir%d/file%d", &d, &f) != 2 || f != next++)
				ordered = false;
		}
		total += k;
		rmq_done(&q, v, k);
	}
	CHECK(ordered);
	CHECK_INT(total, 5000);
	CHECK_INT(q.nset, 0);
	CHECK_INT(rmq_push(&q, "/w/long/enough/to/pass/the/budget", true), 0);
	CHECK_INT(rmq_take(&q, 10, 4, &v), 1);
	rmq_done(&q, v, 1);
	rmq_free(&q);
}

static void report_parser(void)
{
	struct sb_ns_change v[4] = {
		{.path = "/w/a"}, {.path = "/w/d", .is_dir = true},
		{.path = "/w/b"}, {.path = "/w/e", .is_dir = true},
	};
	CHECK_INT(shell_parse_ns_report(L("DONE 4\n"), v, 4), 0);
	for (int i = 0; i < 4; i++)
		CHECK_INT(v[i].rc, 0);
	CHECK_INT(shell_parse_ns_report(L("FAIL 1 105\nFAIL 2 100\nFAIL 3 103\nDONE 4\n"), v, 4), 0);
	CHECK_INT(v[0].rc, 0);
	CHECK_INT(v[1].rc, -ENOTEMPTY);
	CHECK_INT(v[2].rc, -ENOENT);
	CHECK_INT(v[3].rc, -ENOTDIR);
	CHECK_INT(shell_parse_ns_report(L("FAIL 0 106\nFAIL 2 102\nDONE 4\n"), v, 4), 0);
	CHECK_INT(v[0].rc, -EACCES);
	CHECK_INT(v[2].rc, -EISDIR);
	CHECK_INT(v[1].rc, 0);
	/* an unknown code is still a failure */
	CHECK_INT(shell_parse_ns_report(L("FAIL 0 42\nDONE 4\n"), v, 4), 0);
	CHECK_INT(v[0].rc, -EPROTO);

	static const char *const bad[] = {
		"",                       /* nothing: the command did not finish */
		"FAIL 1 105\n",           /* no DONE */
		"DONE 3\n",               /* a count that is not ours */
		"DONE 4",                 /* cut short */
		"DONE 4\nFAIL 1 105\n",   /* after the end */
		"FAIL 4 105\nDONE 4\n",   /* index out of range */
		"FAIL -1 105\nDONE 4\n",
		"FAIL 1 0\nDONE 4\n",     /* a failure with success's code */
		"FAIL 1\nDONE 4\n",
		"FAIL 1 105 x\nDONE 4\n",
		"rm: cannot remove\nDONE 4\n",
		"DONE 4\nDONE 4\n",
		"DONE 4x\n",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		int rc = shell_parse_ns_report(bad[i], strlen(bad[i]), v, 4);
		if (rc != -EPROTO)
			fprintf(stderr, "accepted bad report #%zu\n", i);
		CHECK_INT(rc, -EPROTO);
	}
	char big[200];
	memset(big, '1', sizeof big);
	memcpy(big, "FAIL ", 5);
	big[sizeof big - 1] = '\n';
	CHECK_INT(shell_parse_ns_report(big, sizeof big, v, 4), -EPROTO);
}

/* An rmdir queues only where ENOTEMPTY is ruled out. */
static void rmdir_can_queue(void)
{
	const struct wbr_dir_view certain = {
		.list_fresh = true, .list_exec_mark = 3, .exec_mark = 3,
	};
	CHECK(wbr_rmdir_can_queue(&certain));

	struct wbr_dir_view v = certain;
	v.has_children = true; /* a name the mount still has */
	CHECK(!wbr_rmdir_can_queue(&v));
	v = certain;
	v.pending_upload = true;
	CHECK(!wbr_rmdir_can_queue(&v));
	v = certain;
	v.list_fresh = false; /* expired, or an sbexec ended since */
	CHECK(!wbr_rmdir_can_queue(&v));
	v = certain;
	v.exec_mark = 4; /* a command started (and maybe ended) since */
	CHECK(!wbr_rmdir_can_queue(&v));
	v = certain;
	v.exec_mark = SB_EXEC_BUSY; /* one runs now */
	CHECK(!wbr_rmdir_can_queue(&v));
	/* listed while one ran, and one runs still: busy both times is
	 * not "nothing ran in between" */
	v.list_exec_mark = SB_EXEC_BUSY;
	CHECK(!wbr_rmdir_can_queue(&v));
}

static void exec_quiet_mark(void)
{
	struct sb_backend b;
	memset(&b, 0, sizeof b);
	uint64_t before = sb_exec_quiet_mark(&b);
	CHECK(before != SB_EXEC_BUSY);
	CHECK_INT(sb_exec_quiet_mark(&b), before); /* nothing ran */
	atomic_fetch_add(&b.execs_started, 1);
	CHECK(sb_exec_quiet_mark(&b) == SB_EXEC_BUSY);
	atomic_fetch_add(&b.execs_started, 1);
	atomic_fetch_add(&b.execs_ended, 1);
	CHECK(sb_exec_quiet_mark(&b) == SB_EXEC_BUSY); /* one of two ended */
	atomic_fetch_add(&b.execs_ended, 1);
	uint64_t after = sb_exec_quiet_mark(&b);
	CHECK(after != SB_EXEC_BUSY);
	CHECK(after != before);
}

/* A listing says "a name without a node is absent": when the kernel
 * forgets a child the table then frees, that no longer holds. */
static void forgotten_child_invalidates_listing(void)
{
	struct node_table t;
	CHECK_INT(node_table_init(&t, 0755), 0);
	struct timespec now, later;
	clock_gettime(CLOCK_MONOTONIC, &now);
	later = now;
	later.tv_sec += 60;
	struct node *d = node_child_get(&t, t.root, "d");
	CHECK(d != NULL);
	struct stat st = {.st_mode = S_IFDIR | 0755, .st_nlink = 2};
	node_set_attr(&t, d, &st, NULL, &later);
	d->list_set = true;
	d->list_gen = t.gen;
	d->list_expires = later;
	struct node *x = node_child_get(&t, d, "x"); /* moved in: no attributes */
	CHECK(x != NULL);
	x->nlookup = 1;
	CHECK(node_list_fresh(&t, d, &now));
	x->nlookup = 0; /* the kernel forgot it */
	CHECK(node_release_if_unused(&t, x));
	CHECK(node_child(&t, d, "x") == NULL);
	CHECK(!node_list_fresh(&t, d, &now));

	/* a removed child (detached) leaves the listing whole */
	d->list_set = true;
	struct node *y = node_child_get(&t, d, "y");
	node_set_attr(&t, y, &st, NULL, &later);
	node_detach(&t, y);
	CHECK(node_list_fresh(&t, d, &now));
	node_table_destroy(&t);
}

/* Which calls land the queue first: only those on a queued name (or below
 * one), a link count that counts a queued remove, and the calls that
 * could see anything (a command, a rename, a remove not queued). */
static void which_calls_wait(void)
{
	struct rmq q;
	rmq_init(&q);
	CHECK(!rmq_call_waits(&q, SB_CALL_WRITE, "/w/a", NULL));
	CHECK(rmq_call_waits(&q, SB_CALL_EXEC, NULL, NULL));
	CHECK_INT(rmq_push(&q, "/w/d/f", false), 0);
	CHECK_INT(rmq_push(&q, "/w/e", true), 0);

	/* another name: goes ahead */
	CHECK(!rmq_call_waits(&q, SB_CALL_WRITE, "/w/d/g", NULL));
	CHECK(!rmq_call_waits(&q, SB_CALL_MKDIR, "/w/d/h", NULL));
	CHECK(!rmq_call_waits(&q, SB_CALL_LINK, "/w/d/g", "/w/d/g2"));
	CHECK(!rmq_call_waits(&q, SB_CALL_SYMLINK, "f", "/w/d/s"));
	CHECK(!rmq_call_waits(&q, SB_CALL_CHMOD, "/w/d/g", NULL));
	CHECK(!rmq_call_waits(&q, SB_CALL_READ, "/w/d/g", NULL));
	CHECK(!rmq_call_waits(&q, SB_CALL_STAT, "/w/d/f2", NULL));
	CHECK(!rmq_call_waits(&q, SB_CALL_STAT, "/w/d", NULL)); /* a file counts no link */
	CHECK(!rmq_call_waits(&q, SB_CALL_LIST, "/w/d", NULL));
	/* the queued name itself, or below a queued directory */
	CHECK(rmq_call_waits(&q, SB_CALL_WRITE, "/w/d/f", NULL));
	CHECK(rmq_call_waits(&q, SB_CALL_MKDIR, "/w/d/f", NULL));
	CHECK(rmq_call_waits(&q, SB_CALL_WRITE, "/w/e", NULL));
	CHECK(rmq_call_waits(&q, SB_CALL_WRITE, "/w/e/x", NULL));
	CHECK(rmq_call_waits(&q, SB_CALL_LINK, "/w/d/g", "/w/d/f"));
	CHECK(rmq_call_waits(&q, SB_CALL_SYMLINK, "g", "/w/d/f"));
	CHECK(rmq_call_waits(&q, SB_CALL_TRUNCATE, "/w/d/f", NULL));
	/* an unknown name is any name */
	CHECK(rmq_call_waits(&q, SB_CALL_WRITE, NULL, NULL));
	CHECK(rmq_call_waits(&q, SB_CALL_LINK, "/w/d/g", NULL));
	/* a directory's link count, its listing's subdirectory counts */
	CHECK(rmq_call_waits(&q, SB_CALL_STAT, "/w", NULL));
	CHECK(rmq_call_waits(&q, SB_CALL_LIST, "/", NULL));
	/* whatever could see it */
	CHECK(rmq_call_waits(&q, SB_CALL_EXEC, NULL, NULL));
	CHECK(rmq_call_waits(&q, SB_CALL_RENAME, "/w/x", "/w/y"));
	CHECK(rmq_call_waits(&q, SB_CALL_REMOVE, "/w/x", NULL));
	CHECK(rmq_call_waits(&q, SB_CALL_STATFS, "/w", NULL));

	/* a name of a file with other names: every stat and listing waits,
	 * the file is known by its identity until its remove is done */
	struct rmq_file file = {.dev = 7, .ino = 42};
	CHECK(!rmq_names_file(&q, file));
	CHECK_INT(rmq_push_linked(&q, "/w/tmp", file), 0);
	CHECK(rmq_names_file(&q, file));
	CHECK(!rmq_names_file(&q, (struct rmq_file){.dev = 7, .ino = 43}));
	CHECK(!rmq_names_file(&q, (struct rmq_file){.dev = 8, .ino = 42}));
	CHECK(rmq_call_waits(&q, SB_CALL_STAT, "/w/obj", NULL));
	CHECK(rmq_call_waits(&q, SB_CALL_LIST, "/x", NULL));
	CHECK(!rmq_call_waits(&q, SB_CALL_WRITE, "/w/obj2", NULL));
	CHECK(rmq_gone(&q, "/w/tmp"));
	struct rmq_entry *v;
	size_t k = rmq_take(&q, 10, 1 << 20, &v);
	CHECK_INT(k, 3);
	CHECK(v[2].file.ino == 42 && !v[2].is_dir);
	CHECK(rmq_names_file(&q, file)); /* being removed */
	rmq_done(&q, v, k);
	CHECK(!rmq_names_file(&q, file));
	CHECK(!rmq_call_waits(&q, SB_CALL_STAT, "/w/obj", NULL));
	CHECK(!rmq_call_waits(&q, SB_CALL_LIST, "/", NULL));
	rmq_free(&q);
}

/* A queued mkdir: every call on or below its path waits, and a stat or
 * listing that would count or name it; its path is never gone, even
 * after a remove of the same name (only the sandbox, once the queue has
 * landed, tells which came last). */
static void queued_mkdir(void)
{
	struct rmq q;
	rmq_init(&q);
	CHECK_INT(rmq_push(&q, "/w/d/f", false), 0);
	CHECK_INT(rmq_push(&q, "/w/d", true), 0);
	CHECK_INT(rmq_push_mkdir(&q, "/w/d", 0750), 0);
	CHECK(rmq_made(&q, "/w/d"));
	CHECK(rmq_made(&q, "/w/d/x/y"));
	CHECK(!rmq_made(&q, "/w/d2"));
	CHECK(!rmq_made(&q, "/w"));
	CHECK(!rmq_gone(&q, "/w/d"));
	CHECK(!rmq_gone(&q, "/w/d/f"));
	CHECK(rmq_call_waits(&q, SB_CALL_WRITE, "/w/d/new", NULL));
	CHECK(rmq_call_waits(&q, SB_CALL_SYMLINK, "t", "/w/d/s"));
	CHECK(rmq_call_waits(&q, SB_CALL_STAT, "/w/d", NULL));
	CHECK(rmq_call_waits(&q, SB_CALL_STAT, "/w", NULL));  /* its link count */
	CHECK(rmq_call_waits(&q, SB_CALL_LIST, "/w", NULL));  /* names it */
	CHECK(rmq_call_waits(&q, SB_CALL_LIST, "/", NULL));   /* counts /w's dirs */
	CHECK(!rmq_call_waits(&q, SB_CALL_WRITE, "/w/e/f", NULL));
	CHECK(!rmq_call_waits(&q, SB_CALL_STAT, "/w/e", NULL));

	struct rmq_entry *e;
	CHECK_INT(rmq_take(&q, 8, 1 << 20, &e), 3);
	CHECK(e[2].make && e[2].mode == 0750 && !e[0].make);
	CHECK(rmq_made(&q, "/w/d")); /* landing: still waited for */
	rmq_done(&q, e, 3);
	CHECK(!rmq_made(&q, "/w/d"));
	CHECK(!rmq_call_waits(&q, SB_CALL_WRITE, "/w/d/new", NULL));
	CHECK(!rmq_call_waits(&q, SB_CALL_LIST, "/w", NULL));
	CHECK_INT(q.nset, 0);
	rmq_free(&q);
}

int main(void)
{
	queue_order_and_set();
	which_calls_wait();
	dir_removal_ancestors();
	queue_twice_and_budget();
	report_parser();
	rmdir_can_queue();
	exec_quiet_mark();
	forgotten_child_invalidates_listing();
	queued_mkdir();
	return unit_done("wb_removes");
}
