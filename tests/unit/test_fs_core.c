/* The fs core driven directly, without FUSE and without a sandbox: the
 * operations of fs_ops.h over the in-memory backend (mem_backend.h).
 * Namespace, listing cache, eviction, rename over an open file,
 * write-back ordering, failure paths, notifications, lock order. */
#include "tests/unit/unit.h"
#include "tests/unit/mem_backend.h"
#include "tests/unit/spool_fault.h"
#include "backends/shell_run.h"
#include "fs/coherence.h"
#include "fs/fs_node.h"
#include "fs/core/fs_internal.h"
#include "fs/writeback/writeback.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define ROOT NODE_ROOT_INO
#define W "/workspace"

struct t {
	struct sb_backend *b;
	struct fs fs;
	char spool[64];
};

static void setup_with(struct t *t, bool writeback, size_t max_nodes)
{
	t->b = mem_backend_new();
	snprintf(t->spool, sizeof t->spool, "/tmp/sbfs-unit-fs-XXXXXX");
	if (!t->b || !mkdtemp(t->spool)) {
		fprintf(stderr, "setup failed\n");
		exit(2);
	}
	struct fs_config cfg = {
		.attr_timeout = 60, .dir_timeout = 60, .spool_dir = t->spool,
		.writeback = writeback, .max_nodes = max_nodes,
		.owner_uid = -1, .owner_gid = -1,
	};
	CHECK_INT(fs_init(&t->fs, t->b, &cfg), 0);
	/* The journal's pointer goes in a state directory of the test's own:
	 * mounts running meanwhile recover orphaned journals from theirs. */
	char state[96];
	snprintf(state, sizeof state, "%s/state", t->spool);
	setenv("XDG_STATE_HOME", state, 1);
	char err[256];
	if (writeback && wb_start(&t->fs, "unit", err, sizeof err) < 0) {
		fprintf(stderr, "wb_start: %s\n", err);
		exit(2);
	}
}

static void setup(struct t *t) { setup_with(t, false, 0); }

static void teardown(struct t *t)
{
	wb_stop(&t->fs, false);
	fs_destroy(&t->fs);
	mem_backend_free(t->b);
	static const char *const made[] = {"state/sbfs/journal", "state/sbfs",
					   "state", ""};
	char p[128];
	snprintf(p, sizeof p, "%s/state/sbfs/spool-dirs", t->spool);
	unlink(p);
	for (size_t i = 0; i < sizeof made / sizeof made[0]; i++) {
		snprintf(p, sizeof p, "%s/%s", t->spool, made[i]);
		rmdir(p);
	}
}

/* The inode of parent/name, or 0. */
static uint64_t look(struct t *t, uint64_t parent, const char *name)
{
	struct fs_entry e;
	return fs_lookup(&t->fs, parent, name, &e) == 0 ? e.ino : 0;
}

static unsigned long asks(struct t *t)
{
	return mem_calls(t->b, SB_CALL_STAT) + mem_calls(t->b, SB_CALL_LIST);
}

/* Creates parent/name with data, closed; the handle's inode. */
static uint64_t make_file(struct t *t, uint64_t parent, const char *name,
			  const char *data, struct fs_open *o)
{
	struct fs_entry e;
	o->flags = O_WRONLY | O_CREAT;
	o->keep_cache = false;
	if (fs_create(&t->fs, parent, name, 0644, o, &e) < 0)
		return 0;
	CHECK_INT(fs_write(&t->fs, e.ino, o->fh, data, strlen(data), 0),
		  (long long)strlen(data));
	return e.ino;
}

static void list_dir(struct t *t, uint64_t ino)
{
	struct fs_dir *d;
	CHECK_INT(fs_opendir(&t->fs, ino, &d, &(struct fs_later){0}), 0);
	if (d)
		fs_releasedir(&t->fs, ino, d);
}

/* ---- namespace ---- */

static void test_lookup(void)
{
	struct t t;
	setup(&t);
	mem_put(t.b, W "/a", "hi");
	struct fs_entry e;
	CHECK_INT(fs_lookup(&t.fs, ROOT, "a", &e), 0);
	CHECK(S_ISREG(e.attr.st_mode));
	CHECK_INT(e.attr.st_size, 2);
	CHECK_INT(e.attr.st_uid, getuid()); /* the sandbox user shows as us */
	CHECK(e.attr_timeout > 0);
	unsigned long before = asks(&t);
	CHECK_INT(look(&t, ROOT, "a"), e.ino); /* cached: no call */
	CHECK_INT(asks(&t), before);
	CHECK_INT(fs_lookup(&t.fs, ROOT, "missing", &e), -ENOENT);
	CHECK_INT(fs_lookup(&t.fs, ROOT, "a/b", &e), -EINVAL);
	CHECK_INT(fs_lookup(&t.fs, 999, "a", &e), -ENOENT);
	teardown(&t);
}

static void test_create_upload(void)
{
	struct t t;
	setup(&t);
	struct fs_open o;
	uint64_t ino = make_file(&t, ROOT, "new", "hello", &o);
	CHECK(ino != 0);
	/* nothing reaches the sandbox before the close */
	CHECK(!mem_exists(t.b, W "/new"));
	CHECK_INT(look(&t, ROOT, "new"), ino);
	struct stat st;
	double timeout;
	CHECK_INT(fs_getattr(&t.fs, ino, &st, &timeout), 0);
	CHECK_INT(st.st_size, 5); /* the spool's size while dirty */
	CHECK_INT(fs_flush(&t.fs, ino, o.fh), 0);
	char *got = mem_get(t.b, W "/new");
	CHECK(got && strcmp(got, "hello") == 0);
	free(got);
	fs_release(&t.fs, ino, o.fh);
	struct fs_entry e;
	CHECK_INT(look(&t, ROOT, "new"), ino); /* the kernel looks up first */
	CHECK_INT(fs_create(&t.fs, ROOT, "new", 0644,
			    &(struct fs_open){.flags = O_CREAT | O_EXCL}, &e),
		  -EEXIST);
	teardown(&t);
}

static void test_rename_unlink(void)
{
	struct t t;
	setup(&t);
	mem_put(t.b, W "/d/x", "data");
	uint64_t d = look(&t, ROOT, "d"), x = look(&t, d, "x");
	CHECK(d && x);
	CHECK_INT(fs_rename(&t.fs, d, "x", ROOT, "y", 0, NULL), 0);
	CHECK(mem_exists(t.b, W "/y"));
	CHECK(!mem_exists(t.b, W "/d/x"));
	unsigned long before = asks(&t);
	CHECK_INT(look(&t, ROOT, "y"), x); /* the node moved, still fresh */
	CHECK_INT(asks(&t), before);
	CHECK_INT(look(&t, d, "x"), 0);
	CHECK_INT(fs_rename(&t.fs, ROOT, "y", ROOT, "z", 4, NULL), -EINVAL);
	mem_put(t.b, W "/other", "o");
	CHECK(look(&t, ROOT, "other") != 0);
	CHECK_INT(fs_rename(&t.fs, ROOT, "y", ROOT, "other", RENAME_NOREPLACE, NULL),
		  -EEXIST);
	CHECK_INT(fs_unlink(&t.fs, ROOT, "y"), 0);
	CHECK(!mem_exists(t.b, W "/y"));
	CHECK_INT(look(&t, ROOT, "y"), 0);
	CHECK_INT(fs_unlink(&t.fs, ROOT, "y"), -ENOENT);
	CHECK_INT(fs_rmdir(&t.fs, ROOT, "d"), 0);
	CHECK(!mem_exists(t.b, W "/d"));
	teardown(&t);
}

static void test_mkdir_symlink(void)
{
	struct t t;
	setup(&t);
	struct fs_entry e;
	CHECK_INT(fs_mkdir(&t.fs, ROOT, "m", 0755, &e), 0);
	CHECK(S_ISDIR(e.attr.st_mode));
	uint64_t m = e.ino;
	/* a new directory is empty: lookups inside need no call */
	unsigned long before = asks(&t);
	CHECK_INT(fs_lookup(&t.fs, m, "nothing", &e), -ENOENT);
	CHECK_INT(asks(&t), before);
	CHECK_INT(fs_symlink(&t.fs, "target", m, "l", &e), 0);
	CHECK(S_ISLNK(e.attr.st_mode));
	char *shown = NULL;
	CHECK_INT(fs_readlink(&t.fs, e.ino, &shown), 0);
	CHECK(shown && strcmp(shown, "target") == 0);
	free(shown);
	CHECK_INT(fs_mknod(&t.fs, m, "fifo", S_IFIFO | 0644, &e), -EPERM);
	CHECK_INT(fs_mkdir(&t.fs, ROOT, "m", 0755, &e), -EEXIST);
	CHECK_INT(fs_rmdir(&t.fs, ROOT, "m"), -ENOTEMPTY);
	teardown(&t);
}

/* ---- the listing cache ---- */

static void test_listing_answers_absent(void)
{
	struct t t;
	setup(&t);
	mem_put(t.b, W "/dir/a", "1");
	mem_put(t.b, W "/dir/b", "2");
	uint64_t dir = look(&t, ROOT, "dir");
	list_dir(&t, dir);
	unsigned long before = asks(&t);
	CHECK_INT(look(&t, dir, "nope"), 0);
	CHECK(look(&t, dir, "a") != 0);
	CHECK_INT(asks(&t), before); /* the listing answered both */
	/* names a listing holds come back from readdir, "." and ".." first */
	struct fs_dir *d;
	CHECK_INT(fs_opendir(&t.fs, dir, &d, &(struct fs_later){0}), 0);
	CHECK_INT(asks(&t), before); /* still fresh */
	fs_releasedir(&t.fs, dir, d);
	teardown(&t);
}

/* A listing of a directory's parent marks the directory as named by it;
 * it must not make the names the directory's own listing holds look
 * absent (before 7d84653 one counter served both: ENOENT for an existing
 * file once its attributes were no longer fresh). */
static void test_parent_listing_keeps_child_listing(void)
{
	struct t t;
	setup(&t);
	mem_put(t.b, W "/p/c/f", "x");
	uint64_t p = look(&t, ROOT, "p"), c = look(&t, p, "c");
	list_dir(&t, c); /* c's listing names f */
	/* p's listings name c, twice (the second once the first expired),
	 * so that no count of p's listings can equal one of c's by chance */
	for (int i = 0; i < 2; i++) {
		list_dir(&t, p);
		table_lock(&t.fs);
		node_by_ino(&t.fs.t, p)->list_set = false;
		table_unlock(&t.fs);
	}
	table_lock(&t.fs);
	struct node *pc = node_by_ino(&t.fs.t, c);
	struct node *f = pc ? node_child(&t.fs.t, pc, "f") : NULL;
	CHECK(f != NULL);
	if (f)
		node_forget_attr(f); /* as after a read saw it change */
	table_unlock(&t.fs);
	struct fs_entry e;
	CHECK_INT(fs_lookup(&t.fs, c, "f", &e), 0);
	CHECK_INT(e.attr.st_size, 1);
	teardown(&t);
}

static void test_listing_drops_removed_names(void)
{
	struct t t;
	setup(&t);
	mem_put(t.b, W "/dir/a", "1");
	uint64_t dir = look(&t, ROOT, "dir");
	CHECK(look(&t, dir, "a") != 0);
	mem_remove(t.b, W "/dir/a"); /* behind the mount's back */
	mem_put(t.b, W "/dir/b", "2");
	fs_invalidate(&t.fs, "/dir"); /* a refresh */
	list_dir(&t, dir);
	CHECK_INT(look(&t, dir, "a"), 0);
	CHECK(look(&t, dir, "b") != 0);
	teardown(&t);
}

/* ---- eviction ---- */

static void test_eviction(void)
{
	struct t t;
	setup_with(&t, false, 4);
	char name[16];
	for (int i = 0; i < 10; i++) {
		char path[64];
		snprintf(path, sizeof path, W "/big/f%d", i);
		mem_put(t.b, path, "z");
	}
	uint64_t big = look(&t, ROOT, "big");
	list_dir(&t, big);
	CHECK(t.fs.t.count >= 12);
	uint64_t f0 = look(&t, big, "f0");
	fs_forget(&t.fs, f0, 1); /* past the bound: a sweep */
	CHECK(t.fs.t.count <= 4);
	CHECK(t.fs.t.evicted >= 8);
	/* the listing no longer vouches for the names that went */
	unsigned long before = asks(&t);
	for (int i = 0; i < 10; i++) {
		snprintf(name, sizeof name, "f%d", i);
		CHECK(look(&t, big, name) != 0);
	}
	CHECK(asks(&t) > before);
	/* what the kernel holds stays */
	CHECK(node_by_ino(&t.fs.t, big) != NULL);
	teardown(&t);
}

/* ---- open files ---- */

static void test_rename_over_open_file(void)
{
	struct t t;
	setup(&t);
	struct fs_open o;
	uint64_t old = make_file(&t, ROOT, "t", "old!", &o);
	CHECK_INT(fs_flush(&t.fs, old, o.fh), 0);
	mem_put(t.b, W "/src", "new");
	uint64_t src = look(&t, ROOT, "src");
	CHECK_INT(fs_rename(&t.fs, ROOT, "src", ROOT, "t", 0, NULL), 0);
	CHECK_INT(look(&t, ROOT, "t"), src);
	char buf[16] = "";
	struct fs_later later = {0};
	CHECK_INT(fs_read(&t.fs, old, o.fh, buf, sizeof buf, 0, &later), 4);
	CHECK(memcmp(buf, "old!", 4) == 0);
	/* the replaced file lives on in its spool, never uploaded again */
	CHECK_INT(fs_write(&t.fs, old, o.fh, "ZZ", 2, 0), 2);
	CHECK_INT(fs_flush(&t.fs, old, o.fh), 0);
	fs_release(&t.fs, old, o.fh);
	char *got = mem_get(t.b, W "/t");
	CHECK(got && strcmp(got, "new") == 0);
	free(got);
	struct stat st;
	double timeout;
	CHECK_INT(fs_getattr(&t.fs, old, &st, &timeout), 0);
	CHECK_INT(st.st_nlink, 0);
	teardown(&t);
}

/* An open file never read holds nothing of its content: replaced, it
 * fetches it first, while the sandbox still has it. */
static void test_rename_over_unread_open_file(void)
{
	struct t t;
	setup(&t);
	mem_put(t.b, W "/t", "remote content");
	uint64_t old = look(&t, ROOT, "t");
	struct fs_open o = {.flags = O_RDONLY};
	CHECK_INT(fs_open(&t.fs, old, &o), 0);
	mem_put(t.b, W "/s", "x");
	CHECK(look(&t, ROOT, "s") != 0);
	unsigned long reads = mem_calls(t.b, SB_CALL_READ);
	CHECK_INT(fs_rename(&t.fs, ROOT, "s", ROOT, "t", 0, NULL), 0);
	CHECK(mem_calls(t.b, SB_CALL_READ) > reads);
	char buf[32] = "";
	struct fs_later later = {0};
	CHECK_INT(fs_read(&t.fs, old, o.fh, buf, sizeof buf, 0, &later), 14);
	CHECK(memcmp(buf, "remote content", 14) == 0);
	fs_release(&t.fs, old, o.fh);
	teardown(&t);
}

static void test_read_through_spool(void)
{
	struct t t;
	setup(&t);
	mem_put(t.b, W "/r", "abcdef");
	uint64_t r = look(&t, ROOT, "r");
	struct fs_open o = {.flags = O_RDONLY};
	CHECK_INT(fs_open(&t.fs, r, &o), 0);
	char buf[8] = "";
	struct fs_later later = {0};
	CHECK_INT(fs_read(&t.fs, r, o.fh, buf, 6, 0, &later), 6);
	CHECK(memcmp(buf, "abcdef", 6) == 0);
	CHECK_INT(later.inval_attrs, 0);
	unsigned long reads = mem_calls(t.b, SB_CALL_READ);
	CHECK_INT(fs_read(&t.fs, r, o.fh, buf, 3, 2, &later), 3);
	CHECK(memcmp(buf, "cde", 3) == 0);
	CHECK_INT(mem_calls(t.b, SB_CALL_READ), reads); /* from the spool */
	/* the sandbox's copy changed (an sbexec), the mount refreshed and
	 * the kernel asked again: the spool's old content is not reused */
	mem_put(t.b, W "/r", "ABCDEFGH");
	fs_invalidate(&t.fs, "/");
	struct stat st;
	double timeout;
	CHECK_INT(fs_getattr(&t.fs, r, &st, &timeout), 0);
	CHECK_INT(st.st_size, 8);
	CHECK_INT(fs_read(&t.fs, r, o.fh, buf, 8, 0, &later), 8);
	CHECK(memcmp(buf, "ABCDEFGH", 8) == 0);
	CHECK_INT(fs_read(&t.fs, r, 12345, buf, 6, 0, &later), -EBADF);
	fs_release(&t.fs, r, o.fh);
	teardown(&t);
}

/* Creates ROOT/name with data, uploaded and closed: its spool is then kept
 * as a read cache. Its inode. */
static uint64_t make_closed(struct t *t, const char *name, const char *data)
{
	struct fs_open o;
	uint64_t ino = make_file(t, ROOT, name, data, &o);
	CHECK_INT(fs_flush(&t->fs, ino, o.fh), 0);
	fs_release(&t->fs, ino, o.fh);
	return ino;
}

/* A spool kept as a read cache goes with its name (unlink, a rename over
 * it), and all of them on demand (a full spool disk): each held disk
 * space that a write needed. */
static void test_read_caches_give_way(void)
{
	struct t t;
	setup(&t);
	uint64_t a = make_closed(&t, "a", "aaaa");
	CHECK_INT(t.fs.spool.kept_count, 1);
	CHECK_INT(fs_unlink(&t.fs, ROOT, "a"), 0);
	CHECK_INT(t.fs.spool.kept_count, 0);
	fs_forget(&t.fs, a, 1);

	uint64_t b = make_closed(&t, "b", "bbbb");
	uint64_t c = make_closed(&t, "c", "cc");
	CHECK_INT(t.fs.spool.kept_count, 2);
	CHECK_INT(fs_rename(&t.fs, ROOT, "c", ROOT, "b", 0, NULL), 0);
	CHECK_INT(t.fs.spool.kept_count, 1); /* c's, now named b */
	fs_forget(&t.fs, b, 1);

	/* removed in the sandbox: the copy goes once the kernel forgets it */
	uint64_t e = make_closed(&t, "e", "ee");
	CHECK_INT(t.fs.spool.kept_count, 2);
	CHECK_INT(mem_remove(t.b, W "/e"), 0);
	fs_changed(&t.fs, "e", NULL);
	CHECK_INT(look(&t, ROOT, "e"), 0);
	fs_forget(&t.fs, e, 1);
	CHECK_INT(t.fs.spool.kept_count, 1);

	make_closed(&t, "d", "dd");
	CHECK_INT(t.fs.spool.kept_count, 2);
	CHECK(spool_give_back(&t.fs, -ENOSPC, NULL));
	CHECK_INT(t.fs.spool.kept_count, 0);
	CHECK_INT(t.fs.spool.kept_bytes, 0);
	CHECK(!spool_give_back(&t.fs, -ENOSPC, NULL)); /* nothing left to give */
	/* what was cached is read from the sandbox again */
	struct fs_open o = {.flags = O_RDONLY};
	CHECK_INT(fs_open(&t.fs, c, &o), 0);
	char buf[4] = "";
	unsigned long reads = mem_calls(t.b, SB_CALL_READ);
	CHECK_INT(fs_read(&t.fs, c, o.fh, buf, sizeof buf, 0, &(struct fs_later){0}), 2);
	CHECK(memcmp(buf, "cc", 2) == 0);
	CHECK(mem_calls(t.b, SB_CALL_READ) > reads);
	fs_release(&t.fs, c, o.fh);
	teardown(&t);
}

/* A full spool disk while reading: a clean spool gives back what reads
 * fetched and reads on a window at a time; a dirty one holds the only copy
 * of its writes and gives nothing. */
static void test_read_gives_back_fetched(void)
{
	struct t t;
	setup(&t);
	char data[300000];
	for (size_t i = 0; i < sizeof data - 1; i++)
		data[i] = (char)('a' + i % 26);
	data[sizeof data - 1] = '\0';
	mem_put(t.b, W "/r", data);
	uint64_t r = look(&t, ROOT, "r");
	struct fs_open o = {.flags = O_RDWR};
	CHECK_INT(fs_open(&t.fs, r, &o), 0);
	static char buf[sizeof data];
	struct fs_later later = {0};
	CHECK_INT(fs_read(&t.fs, r, o.fh, buf, sizeof data - 1, 0, &later),
		  (long long)sizeof data - 1);
	struct file_state *f = node_by_ino(&t.fs.t, r)->file;
	struct stat st;
	CHECK(fstat(f->fd, &st) == 0 && st.st_blocks > 0);
	file_lock(f);
	CHECK_INT(file_state_drop_fetched(f), 0);
	CHECK_INT(f->present.n, 0);
	CHECK(f->spool_tight);
	CHECK_INT(file_state_drop_fetched(f), -ENOSPC); /* nothing left */
	file_unlock(f);
	CHECK(fstat(f->fd, &st) == 0 && st.st_blocks == 0);
	CHECK_INT((long long)st.st_size, (long long)sizeof data - 1);
	unsigned long reads = mem_calls(t.b, SB_CALL_READ);
	memset(buf, 0, sizeof buf);
	CHECK_INT(fs_read(&t.fs, r, o.fh, buf, 1000, 200000, &later), 1000);
	CHECK(memcmp(buf, data + 200000, 1000) == 0);
	CHECK(mem_calls(t.b, SB_CALL_READ) > reads);
	CHECK_INT(fs_write(&t.fs, r, o.fh, "X", 1, 0), 1);
	file_lock(f);
	CHECK_INT(file_state_drop_fetched(f), -ENOSPC);
	CHECK(f->present.n > 0);
	file_unlock(f);
	fs_release(&t.fs, r, o.fh);
	teardown(&t);
}

/* ---- the spool's room, through its seam (spool_fault.h) ---- */

/* A sandbox file of size bytes, each byte its offset's letter. */
static char *letters(size_t size)
{
	char *d = malloc(size + 1);
	for (size_t i = 0; i < size; i++)
		d[i] = (char)('a' + i % 26);
	d[size] = '\0';
	return d;
}

/* Reads ino whole through an open handle, chunk bytes a call, and
 * compares with want; the first failing read's result, or 0. */
static long long read_whole(struct t *t, uint64_t ino, const char *want,
			    size_t size, size_t chunk)
{
	struct fs_open o = {.flags = O_RDONLY};
	long long r = fs_open(&t->fs, ino, &o);
	char *buf = malloc(chunk);
	for (size_t off = 0; r == 0 && off < size; off += chunk) {
		size_t n = size - off < chunk ? size - off : chunk;
		ssize_t got = fs_read(&t->fs, ino, o.fh, buf, n, (off_t)off,
				      &(struct fs_later){0});
		if (got != (ssize_t)n)
			r = got < 0 ? got : -EIO;
		else if (memcmp(buf, want + off, n) != 0)
			r = -EILSEQ;
	}
	free(buf);
	if (o.fh)
		fs_release(&t->fs, ino, o.fh);
	return r;
}

/* A file four times the spool disk's room reads whole: the fetch that
 * fills the disk gives back what reads fetched and goes on a window at a
 * time (the e2e test: spool.bats, 17 MB on a 4 MiB tmpfs). */
static void test_spool_full_during_fetch(void)
{
	struct t t;
	spool_fault_install(256 * 1024, 0);
	setup(&t);
	size_t size = 1024 * 1024;
	char *data = letters(size);
	mem_put(t.b, W "/big", data);
	uint64_t big = look(&t, ROOT, "big");
	CHECK_INT(read_whole(&t, big, data, size, 64 * 1024), 0);
	CHECK(spool_fault_enospc() > 0); /* the disk did fill */
	free(data);
	teardown(&t);
	spool_fault_remove();
}

/* A write on a spool disk that readers' fetched windows fill: what reads
 * fetched (clean, fetched again when wanted) gives way to the write as it
 * does to a read, and the readers still read whole (issue 41 item 6: two
 * 25 MiB writers got ENOSPC beside two readers of 100 MB files). */
static void test_spool_full_write_beside_readers(void)
{
	struct t t;
	spool_fault_install(640 * 1024, 0);
	setup(&t);
	size_t size = 512 * 1024;
	char *data = letters(size);
	static char buf[64 * 1024];
	/* four readers, each one window in (no read-ahead on a first read):
	 * 512 KiB of the 640 held by what they fetched */
	struct fs_open ro[4];
	uint64_t r[4];
	static const char *const names[4] = {"r0", "r1", "r2", "r3"};
	for (int i = 0; i < 4; i++) {
		char path[64];
		snprintf(path, sizeof path, W "/%s", names[i]);
		mem_put(t.b, path, data);
	}
	for (int i = 0; i < 4; i++) {
		r[i] = look(&t, ROOT, names[i]);
		ro[i] = (struct fs_open){.flags = O_RDONLY};
		CHECK_INT(fs_open(&t.fs, r[i], &ro[i]), 0);
		CHECK_INT(fs_read(&t.fs, r[i], ro[i].fh, buf, sizeof buf, 0,
				  &(struct fs_later){0}), (long long)sizeof buf);
	}
	CHECK(spool_fault_used() >= 512 * 1024);
	CHECK_INT(spool_fault_enospc(), 0);
	struct fs_open wo;
	uint64_t w = make_file(&t, ROOT, "w", "", &wo);
	memset(buf, 'w', sizeof buf);
	for (off_t off = 0; off < 256 * 1024; off += (off_t)sizeof buf)
		CHECK_INT(fs_write(&t.fs, w, wo.fh, buf, sizeof buf, off),
			  (long long)sizeof buf);
	CHECK_INT(fs_flush(&t.fs, w, wo.fh), 0);
	fs_release(&t.fs, w, wo.fh);
	char *landed = mem_get(t.b, W "/w");
	CHECK(landed && strlen(landed) == 256 * 1024);
	free(landed);
	/* the readers read on, whole, through the handles they held */
	for (int i = 0; i < 4; i++) {
		for (size_t off = 0; off < size; off += sizeof buf) {
			CHECK_INT(fs_read(&t.fs, r[i], ro[i].fh, buf, sizeof buf,
					  (off_t)off, &(struct fs_later){0}),
				  (long long)sizeof buf);
			CHECK(memcmp(buf, data + off, sizeof buf) == 0);
		}
		fs_release(&t.fs, r[i], ro[i].fh);
	}
	free(data);
	teardown(&t);
	spool_fault_remove();
}

/* A call that met a full spool while another gave back (and so waited
 * for the spool-full lock) tries the room made meanwhile before deciding:
 * giving back itself then finds nothing left to give (spool.bats, two
 * writers at once: the second one's ENOSPC, under the suite's load). */
struct racing_attempt {
	struct t *t;
	int calls;
};

static int64_t attempt_beside_a_give_back(void *arg)
{
	struct racing_attempt *a = arg;
	if (a->calls++ > 0)
		return 7; /* the room the other call made */
	CHECK(spool_give_back(&a->t->fs, -ENOSPC, NULL));
	return -ENOSPC;
}

static void test_spool_room_given_meanwhile_is_tried(void)
{
	struct t t;
	setup(&t);
	make_closed(&t, "a", "aaaa"); /* a read cache: the room to give */
	struct racing_attempt a = {&t, 0};
	CHECK_INT(spool_try_again(&t.fs, NULL, attempt_beside_a_give_back, &a), 7);
	CHECK_INT(a.calls, 2);
	teardown(&t);
}

struct reader {
	struct t *t;
	uint64_t ino;
	const char *want;
	size_t size;
	long long result;
};

static void *reader_thread(void *arg)
{
	struct reader *r = arg;
	r->result = read_whole(r->t, r->ino, r->want, r->size, 64 * 1024);
	return NULL;
}

/* Two readers on a full spool disk both read whole: each one's retry
 * finds room, not the room the other's fetch just took (f8d6107, 728c41b:
 * seen only end to end, under load, before the seam). */
static void test_spool_full_two_readers(void)
{
	struct t t;
	spool_fault_install(384 * 1024, 0);
	setup(&t);
	size_t size = 1024 * 1024;
	char *a = letters(size), *b = letters(size / 2);
	mem_put(t.b, W "/a", a);
	mem_put(t.b, W "/b", b);
	struct reader ra = {&t, look(&t, ROOT, "a"), a, size, 1};
	struct reader rb = {&t, look(&t, ROOT, "b"), b, size / 2, 1};
	pthread_t th;
	CHECK_INT(pthread_create(&th, NULL, reader_thread, &ra), 0);
	reader_thread(&rb);
	pthread_join(th, NULL);
	CHECK_INT(ra.result, 0);
	CHECK_INT(rb.result, 0);
	CHECK(spool_fault_enospc() > 0);
	free(a);
	free(b);
	teardown(&t);
	spool_fault_remove();
}

/* Out of descriptors when a spool is made: the read caches, each holding
 * one, give way and the open goes on (516e1e6: the 1,000th file read
 * under a soft limit of 1,024). With nothing to give, the open fails
 * with EMFILE and what was open stays whole. */
static void test_spool_open_emfile(void)
{
	struct t t;
	spool_fault_install(0, 3);
	setup(&t);
	make_closed(&t, "a", "aaaa");
	make_closed(&t, "b", "bbbb");
	make_closed(&t, "c", "cccc");
	CHECK_INT(t.fs.spool.kept_count, 3);
	mem_put(t.b, W "/d", "dddd");
	uint64_t d = look(&t, ROOT, "d");
	CHECK_INT(read_whole(&t, d, "dddd", 4, 4), 0);
	CHECK(spool_fault_emfile() > 0);
	CHECK_INT(t.fs.spool.kept_count, 1); /* d's own, kept now */

	struct fs_open o[3];
	uint64_t ino[3];
	const char *names[3] = {"a", "b", "c"};
	for (int i = 0; i < 3; i++) {
		ino[i] = look(&t, ROOT, names[i]);
		o[i] = (struct fs_open){.flags = O_RDONLY};
		CHECK_INT(fs_open(&t.fs, ino[i], &o[i]), 0);
	}
	struct fs_open od = {.flags = O_RDONLY};
	CHECK_INT(fs_open(&t.fs, d, &od), -EMFILE);
	char buf[4];
	for (int i = 0; i < 3; i++) {
		CHECK_INT(fs_read(&t.fs, ino[i], o[i].fh, buf, 4, 0,
				  &(struct fs_later){0}), 4);
		CHECK(buf[0] == names[i][0]);
		fs_release(&t.fs, ino[i], o[i].fh);
	}
	teardown(&t);
	spool_fault_remove();
}

/* A reader takes the part of a window that came and was checked, while the
 * rest is still on its way: a sequential read waits for a segment (SEG),
 * not for a whole window. With every read window held after each segment,
 * reading the first 2.5 SEG of a 5 SEG file ends: read-ahead doubles its
 * windows from 128 KiB, so the first one longer than a segment (2 SEG)
 * starts just before 2 SEG, and every byte read is in a window's first
 * segment. */
#define SEG ((off_t)READ_SEGMENT_BLOCKS * READ_BLOCK)

struct held_reader {
	struct t *t;
	uint64_t ino, fh;
	int rc;
	bool wrong;
	atomic_bool done;
};

static void *read_held(void *arg)
{
	struct held_reader *h = arg;
	static char buf[1 << 20];
	struct fs_later later = {0};
	for (off_t off = 0; off < 5 * SEG / 2 && h->rc == 0; off += sizeof buf) {
		ssize_t n = fs_read(&h->t->fs, h->ino, h->fh, buf, sizeof buf, off, &later);
		if (n != (ssize_t)sizeof buf)
			h->rc = n < 0 ? (int)n : -EIO;
		for (size_t i = 0; n > 0 && i < sizeof buf; i++)
			if (buf[i] != 'a' + (char)((off + (off_t)i) % 23))
				h->wrong = true;
	}
	atomic_store(&h->done, true);
	return NULL;
}

static void test_read_takes_checked_segments(void)
{
	struct t t;
	setup(&t);
	size_t size = (size_t)(5 * SEG);
	char *data = malloc(size + 1);
	for (size_t i = 0; i < size; i++)
		data[i] = 'a' + (char)(i % 23);
	data[size] = '\0';
	mem_put(t.b, W "/big", data);
	free(data);
	uint64_t ino = look(&t, ROOT, "big");
	struct fs_open o = {.flags = O_RDONLY};
	CHECK_INT(fs_open(&t.fs, ino, &o), 0);
	mem_hold_reads(t.b, MEM_HOLD_BETWEEN);
	struct held_reader h = {.t = &t, .ino = ino, .fh = o.fh};
	pthread_t th;
	CHECK_INT(pthread_create(&th, NULL, read_held, &h), 0);
	for (int i = 0; i < 2000 && !atomic_load(&h.done); i++)
		usleep(10000);
	CHECK(atomic_load(&h.done)); /* else it waited for a whole window */
	mem_hold_reads(t.b, MEM_HOLD_NONE);
	pthread_join(th, NULL);
	CHECK_INT(h.rc, 0);
	CHECK(!h.wrong);
	fs_release(&t.fs, ino, o.fh);
	teardown(&t);
}

/* A read's fetch that has handed over its bytes and not yet ended when the
 * file is uploaded is of the copy before the upload: ending, it must not
 * take that copy for a change in the sandbox (it once did, and the file
 * showed its old size: fsdiff seed 1, -o nowatch). */
static void test_read_ending_after_an_upload(void)
{
	struct t t;
	setup(&t);
	mem_put(t.b, W "/g", "0123456789");
	uint64_t ino = look(&t, ROOT, "g");
	struct fs_open o = {.flags = O_RDWR};
	CHECK_INT(fs_open(&t.fs, ino, &o), 0);
	mem_hold_reads(t.b, MEM_HOLD_AT_END);
	char buf[4];
	struct fs_later later = {0};
	CHECK_INT(fs_read(&t.fs, ino, o.fh, buf, 4, 0, &later), 4);
	CHECK(memcmp(buf, "0123", 4) == 0);
	/* past what the read fetches: it need not wait for it */
	CHECK_INT(fs_write(&t.fs, ino, o.fh, "tail", 4, 20), 4);
	CHECK_INT(fs_flush(&t.fs, ino, o.fh), 0); /* the upload */
	mem_hold_reads(t.b, MEM_HOLD_NONE);
	usleep(200000); /* the fetch ends */
	/* a write on top: the file is the mount's again, at its size */
	CHECK_INT(fs_write(&t.fs, ino, o.fh, "AB", 2, 0), 2);
	struct stat st;
	double timeout;
	CHECK_INT(fs_getattr(&t.fs, ino, &st, &timeout), 0);
	CHECK_INT(st.st_size, 24);
	CHECK_INT(fs_read(&t.fs, ino, o.fh, buf, 4, 20, &later), 4);
	CHECK(memcmp(buf, "tail", 4) == 0);
	fs_release(&t.fs, ino, o.fh);
	teardown(&t);
}

/* A dirty spool is the whole file from its first write: a replace in
 * the sandbox after it loses to the upload whole (last upload wins), and
 * one before it, under the open file, refuses the write (issue 41 item 2:
 * the upload completed the host's pages from the new file). */
static void test_write_never_splices_a_replaced_file(void)
{
	struct t t;
	setup(&t);
	mem_put(t.b, W "/g", "0123456789");
	uint64_t ino = look(&t, ROOT, "g");
	struct fs_open o = {.flags = O_RDWR};
	CHECK_INT(fs_open(&t.fs, ino, &o), 0);
	CHECK_INT(fs_write(&t.fs, ino, o.fh, "xy", 2, 0), 2);
	mem_remove(t.b, W "/g");
	mem_put(t.b, W "/g", "ABCDEFGHIJ"); /* sbexec mv new g */
	CHECK_INT(fs_flush(&t.fs, ino, o.fh), 0);
	char *got = mem_get(t.b, W "/g");
	CHECK(got && strcmp(got, "xy23456789") == 0);
	free(got);
	fs_release(&t.fs, ino, o.fh);

	/* replaced after the open, before the first write: refused */
	ino = look(&t, ROOT, "g");
	o = (struct fs_open){.flags = O_RDWR};
	CHECK_INT(fs_open(&t.fs, ino, &o), 0);
	mem_remove(t.b, W "/g");
	mem_put(t.b, W "/g", "abcdefghij");
	fs_invalidate(&t.fs, "/");
	CHECK_INT(fs_write(&t.fs, ino, o.fh, "HH", 2, 4), -EIO);
	CHECK_INT(fs_flush(&t.fs, ino, o.fh), 0);
	got = mem_get(t.b, W "/g");
	CHECK(got && strcmp(got, "abcdefghij") == 0);
	free(got);
	fs_release(&t.fs, ino, o.fh);

	/* a new open writes on the new copy */
	ino = look(&t, ROOT, "g");
	o = (struct fs_open){.flags = O_RDWR};
	CHECK_INT(fs_open(&t.fs, ino, &o), 0);
	CHECK_INT(fs_write(&t.fs, ino, o.fh, "HH", 2, 4), 2);
	CHECK_INT(fs_flush(&t.fs, ino, o.fh), 0);
	got = mem_get(t.b, W "/g");
	CHECK(got && strcmp(got, "abcdHHghij") == 0);
	free(got);
	fs_release(&t.fs, ino, o.fh);
	teardown(&t);
}

/* The copy a link's new name starts from: the content and what it is a
 * copy of; only a whole, clean spool of a known sandbox copy gives one. */
static void test_file_state_clone(void)
{
	char dir[] = "/tmp/sbfs-unit-clone-XXXXXX";
	CHECK(mkdtemp(dir) != NULL);
	struct file_state *f = file_state_new(dir, 0, 0640, true);
	CHECK(f != NULL);
	CHECK_INT(file_state_write(f, "hello world", 11, 0), 11);
	CHECK(!file_state_cloneable(f)); /* written, not uploaded */
	f->dirty = false; /* as an upload that told the mtime leaves it */
	f->remote_mtime = (struct timespec){1500000000, 123};
	CHECK(file_state_cloneable(f));
	struct file_state *c = file_state_clone(f, dir);
	CHECK(c != NULL);
	char buf[16] = "";
	CHECK_INT(pread(c->fd, buf, sizeof buf, 0), 11);
	CHECK(memcmp(buf, "hello world", 11) == 0);
	CHECK_INT(c->size, 11);
	CHECK_INT(c->mode, 0640);
	CHECK(range_set_covers(&c->present, 0, 11));
	CHECK(c->remote_exists && c->identity_known && !c->dirty);
	CHECK(c->remote_mtime.tv_sec == 1500000000 && c->remote_mtime.tv_nsec == 123);
	file_state_free(c);

	f->dirty = true; /* not uploaded: the sandbox has something else */
	CHECK(!file_state_cloneable(f));
	f->dirty = false;
	f->invalidated = true; /* a coherence point: the sandbox may have changed it */
	CHECK(!file_state_cloneable(f));
	f->invalidated = false;
	f->identity_known = false; /* uploaded, its sandbox mtime not known yet */
	CHECK(!file_state_cloneable(f));
	f->identity_known = true;
	f->size = 20; /* a part never fetched */
	CHECK(!file_state_cloneable(f));
	file_state_free(f);
	CHECK_INT(rmdir(dir), 0);
}

/* ---- write-back ---- */

static void test_writeback_upload_before_dir_rename(void)
{
	struct t t;
	setup_with(&t, true, 0);
	struct fs_entry e;
	CHECK_INT(fs_mkdir(&t.fs, ROOT, "d", 0755, &e), 0);
	uint64_t d = e.ino;
	struct fs_open o;
	uint64_t f = make_file(&t, d, "f", "data", &o);
	CHECK_INT(fs_flush(&t.fs, f, o.fh), 0); /* queued, not uploaded */
	fs_release(&t.fs, f, o.fh);
	mem_log_clear(t.b);
	CHECK_INT(fs_rename(&t.fs, ROOT, "d", ROOT, "e", 0, NULL), 0);
	CHECK(strcmp(mem_log(t.b), "write " W "/d/f\nrename " W "/d " W "/e\n") == 0);
	char *got = mem_get(t.b, W "/e/f");
	CHECK(got && strcmp(got, "data") == 0);
	free(got);
	teardown(&t);
}

/* tar and cp -p set each file's times after closing it: in write-back
 * mode that costs no call, the upload carries them (or one utimens
 * follows it where the backend's upload cannot, as here), and a write
 * after them gives the file a new mtime again. */
static void test_writeback_times_go_with_upload(void)
{
	struct t t;
	setup_with(&t, true, 0);
	wb_paths_write_lock(&t.fs); /* no worker uploads until the drain */
	struct fs_open o;
	uint64_t a = make_file(&t, ROOT, "a", "data", &o);
	fs_release(&t.fs, a, o.fh);
	unsigned long calls = mem_calls(t.b, SB_CALL_WRITE) + mem_calls(t.b, SB_CALL_UTIMENS);
	struct stat attr = {.st_atim = {1000000000, 7}, .st_mtim = {1100000000, 5}}, st;
	CHECK_INT(fs_setattr(&t.fs, a, &attr, FS_SET_ATIME | FS_SET_MTIME, &st), 0);
	CHECK_INT(mem_calls(t.b, SB_CALL_WRITE) + mem_calls(t.b, SB_CALL_UTIMENS), calls);
	CHECK_INT(st.st_mtim.tv_sec, 1100000000);
	CHECK(st.st_ctim.tv_sec > 1700000000); /* the change is now */
	double timeout;
	CHECK_INT(fs_getattr(&t.fs, a, &st, &timeout), 0);
	CHECK_INT(st.st_mtim.tv_sec, 1100000000);
	CHECK_INT(st.st_mtim.tv_nsec, 5);
	/* the second file: times, then a write that supersedes the mtime */
	uint64_t b = make_file(&t, ROOT, "b", "x", &o);
	CHECK_INT(fs_setattr(&t.fs, b, &attr, FS_SET_ATIME | FS_SET_MTIME, &st), 0);
	CHECK_INT(fs_write(&t.fs, b, o.fh, "yz", 2, 1), 2);
	fs_release(&t.fs, b, o.fh);
	wb_paths_unlock(&t.fs);
	wb_drain(&t.fs);
	char *got = mem_get(t.b, W "/a");
	CHECK(got && !strcmp(got, "data"));
	free(got);
	CHECK_INT(sb_stat(t.b, W "/a", &st, NULL), 0);
	CHECK_INT(st.st_mtim.tv_sec, 1100000000);
	CHECK_INT(st.st_mtim.tv_nsec, 5);
	CHECK_INT(st.st_atim.tv_sec, 1000000000);
	CHECK_INT(sb_stat(t.b, W "/b", &st, NULL), 0);
	CHECK(st.st_mtim.tv_sec != 1100000000);
	CHECK_INT(st.st_atim.tv_sec, 1000000000);
	CHECK_INT(fs_getattr(&t.fs, a, &st, &timeout), 0);
	CHECK_INT(st.st_mtim.tv_sec, 1100000000);
	teardown(&t);
}

static int open_fds(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/fd");
	while (d && readdir(d))
		n++;
	if (d)
		closedir(d);
	return n;
}

/* A closed file waiting for its upload holds no descriptor (wb_park.h):
 * hundreds of them under a small limit made every upload fail with
 * EMFILE. Its journal entry is opened again when it is read, written,
 * given times or uploaded, and closed after. */
static void test_writeback_pending_files_hold_no_descriptor(void)
{
	struct t t;
	setup_with(&t, true, 0);
	wb_paths_write_lock(&t.fs); /* no worker uploads until the drain */
	int before = open_fds();
	char name[16], data[16];
	uint64_t ino[20];
	for (int i = 0; i < 20; i++) {
		snprintf(name, sizeof name, "p%d", i);
		snprintf(data, sizeof data, "pending %d", i);
		ino[i] = make_closed(&t, name, data);
	}
	CHECK_INT(open_fds(), before);
	/* read again, written again, given times: each while it waits */
	struct fs_open o = {.flags = O_RDWR};
	char buf[32] = "";
	CHECK_INT(fs_open(&t.fs, ino[3], &o), 0);
	CHECK_INT(fs_read(&t.fs, ino[3], o.fh, buf, sizeof buf - 1, 0,
			  &(struct fs_later){0}), 9);
	CHECK(!strcmp(buf, "pending 3"));
	CHECK_INT(fs_write(&t.fs, ino[3], o.fh, "P", 1, 0), 1);
	CHECK_INT(fs_flush(&t.fs, ino[3], o.fh), 0);
	fs_release(&t.fs, ino[3], o.fh);
	struct stat attr = {.st_mtim = {1100000000, 0}}, st;
	CHECK_INT(fs_setattr(&t.fs, ino[4], &attr, FS_SET_MTIME, &st), 0);
	CHECK_INT(open_fds(), before);
	/* a failed upload leaves the file pending, and parked again */
	mem_fail(t.b, SB_CALL_WRITE, W "/p7", -EIO, 1);
	wb_paths_unlock(&t.fs);
	wb_drain(&t.fs);
	CHECK(!mem_exists(t.b, W "/p7"));
	/* the uploaded ones are read caches now, with descriptors */
	spool_give_back(&t.fs, -EMFILE, NULL);
	CHECK_INT(open_fds(), before);
	char msg[256];
	CHECK_INT(fs_flush_all(&t.fs, msg, sizeof msg), 0);
	char *got = mem_get(t.b, W "/p3");
	CHECK(got && !strcmp(got, "Pending 3"));
	free(got);
	got = mem_get(t.b, W "/p19");
	CHECK(got && !strcmp(got, "pending 19"));
	free(got);
	CHECK_INT(sb_stat(t.b, W "/p4", &st, NULL), 0);
	CHECK_INT(st.st_mtim.tv_sec, 1100000000);
	teardown(&t);
}

/* tar or cp -p as root chown each new file to the caller's own ids: the
 * sandbox user's, which the file's upload gives it anyway. */
static void test_chown_to_sandbox_user_goes_with_upload(void)
{
	struct t t;
	setup(&t);
	struct fs_open o;
	struct stat mine = {.st_uid = t.fs.uid, .st_gid = t.fs.gid}, st;
	uint64_t a = make_file(&t, ROOT, "a", "data", &o);
	unsigned long calls = mem_calls(t.b, SB_CALL_WRITE) + mem_calls(t.b, SB_CALL_CHOWN);
	CHECK_INT(fs_setattr(&t.fs, a, &mine, FS_SET_UID | FS_SET_GID, &st), 0);
	CHECK_INT(mem_calls(t.b, SB_CALL_WRITE) + mem_calls(t.b, SB_CALL_CHOWN), calls);
	CHECK_INT(st.st_uid, t.fs.uid);
	fs_release(&t.fs, a, o.fh);
	CHECK_INT(mem_calls(t.b, SB_CALL_CHOWN), 0);
	CHECK_INT(sb_stat(t.b, W "/a", &st, NULL), 0);
	CHECK_INT(st.st_uid, MEM_GUEST_UID);
	CHECK_INT(st.st_gid, MEM_GUEST_GID);
	/* another owner is a chown, after the upload */
	struct stat other = {.st_uid = 4321, .st_gid = 4322};
	uint64_t b = make_file(&t, ROOT, "b", "x", &o);
	CHECK_INT(fs_setattr(&t.fs, b, &other, FS_SET_UID | FS_SET_GID, &st), 0);
	CHECK_INT(mem_calls(t.b, SB_CALL_CHOWN), 1);
	CHECK_INT(sb_stat(t.b, W "/b", &st, NULL), 0);
	CHECK_INT(st.st_uid, 4321);
	fs_release(&t.fs, b, o.fh);
	/* under a set-group-ID directory the upload's group is the
	 * backend's to choose: the chown goes */
	struct fs_entry d;
	CHECK_INT(fs_mkdir(&t.fs, ROOT, "g", 02775, &d), 0);
	uint64_t c = make_file(&t, d.ino, "c", "y", &o);
	CHECK_INT(fs_setattr(&t.fs, c, &mine, FS_SET_UID | FS_SET_GID, &st), 0);
	CHECK_INT(mem_calls(t.b, SB_CALL_CHOWN), 2);
	fs_release(&t.fs, c, o.fh);
	teardown(&t);
}

struct setattr_call {
	struct t *t;
	uint64_t ino;
	struct stat attr;
	int to_set, rc;
};

static void *setattr_thread(void *arg)
{
	struct setattr_call *c = arg;
	struct stat st;
	c->rc = fs_setattr(&c->t->fs, c->ino, &c->attr, c->to_set, &st);
	return NULL;
}

/* tar sets a directory's times and mode after writing what is in it:
 * those land after the uploads into it, or an upload would move the
 * directory's mtime again (and one into a directory made read-only
 * would be refused). */
static void test_writeback_dir_attrs_land_after_uploads_below(void)
{
	struct t t;
	setup_with(&t, true, 0);
	struct fs_entry d;
	CHECK_INT(fs_mkdir(&t.fs, ROOT, "d", 0755, &d), 0);
	wb_drain(&t.fs);
	mem_log_clear(t.b);
	wb_paths_write_lock(&t.fs); /* the upload waits, as at 50 ms */
	struct fs_open o;
	uint64_t f = make_file(&t, d.ino, "f", "data", &o);
	fs_release(&t.fs, f, o.fh);
	struct setattr_call c = {
		.t = &t, .ino = d.ino,
		.attr = {.st_mode = 0555, .st_atim = {1000000000, 0}, .st_mtim = {1100000000, 0}},
		.to_set = FS_SET_MODE | FS_SET_ATIME | FS_SET_MTIME,
	};
	pthread_t th;
	CHECK_INT(pthread_create(&th, NULL, setattr_thread, &c), 0);
	usleep(200 * 1000); /* time for the setattr to land first, were it to */
	wb_paths_unlock(&t.fs);
	pthread_join(th, NULL);
	CHECK_INT(c.rc, 0);
	wb_drain(&t.fs);
	const char *want = "write " W "/d/f\nchmod " W "/d\nutimens " W "/d\n";
	if (strcmp(mem_log(t.b), want) != 0)
		fprintf(stderr, "log:\n%swanted:\n%s", mem_log(t.b), want);
	CHECK(strcmp(mem_log(t.b), want) == 0);
	struct stat st;
	CHECK_INT(sb_stat(t.b, W "/d", &st, NULL), 0);
	CHECK_INT(st.st_mtim.tv_sec, 1100000000);
	teardown(&t);
}

static void test_writeback_pending_rename_and_unlink(void)
{
	struct t t;
	setup_with(&t, true, 0);
	/* Workers wait on the paths lock meanwhile: what they upload is
	 * decided by the calls below, not by how fast this thread runs. */
	wb_paths_write_lock(&t.fs);
	struct fs_open o;
	uint64_t tmp = make_file(&t, ROOT, "tmp", "content", &o);
	CHECK_INT(fs_flush(&t.fs, tmp, o.fh), 0);
	fs_release(&t.fs, tmp, o.fh);
	uint64_t gone = make_file(&t, ROOT, "gone", "never", &o);
	CHECK_INT(fs_flush(&t.fs, gone, o.fh), 0);
	fs_release(&t.fs, gone, o.fh);
	/* a temp file renamed before its upload costs no rename call */
	CHECK_INT(fs_rename(&t.fs, ROOT, "tmp", ROOT, "final", 0, NULL), 0);
	/* a file removed before its upload costs no call at all */
	CHECK_INT(fs_unlink(&t.fs, ROOT, "gone"), 0);
	wb_paths_unlock(&t.fs);
	char msg[256] = "";
	CHECK_INT(fs_flush_all(&t.fs, msg, sizeof msg), 0);
	if (strcmp(mem_log(t.b), "write " W "/final\n") != 0)
		fprintf(stderr, "log: %s\n", mem_log(t.b));
	CHECK(strcmp(mem_log(t.b), "write " W "/final\n") == 0);
	char *got = mem_get(t.b, W "/final");
	CHECK(got && strcmp(got, "content") == 0);
	free(got);
	CHECK(!mem_exists(t.b, W "/tmp"));
	CHECK(!mem_exists(t.b, W "/gone"));
	teardown(&t);
}

/* A rename replaces the name in the sandbox: a pending file uploaded
 * under a name the sandbox holds would be written into that file (and
 * through a symlink there). */
static void test_writeback_pending_rename_over_sandbox_file(void)
{
	struct t t;
	setup_with(&t, true, 0);
	mem_put(t.b, W "/target", "old");
	CHECK(look(&t, ROOT, "target") != 0);
	wb_paths_write_lock(&t.fs);
	struct fs_open o;
	uint64_t tmp = make_file(&t, ROOT, "tmp", "new", &o);
	CHECK_INT(fs_flush(&t.fs, tmp, o.fh), 0);
	fs_release(&t.fs, tmp, o.fh);
	wb_paths_unlock(&t.fs);
	mem_log_clear(t.b);
	CHECK_INT(fs_rename(&t.fs, ROOT, "tmp", ROOT, "target", 0, NULL), 0);
	char msg[256] = "";
	CHECK_INT(fs_flush_all(&t.fs, msg, sizeof msg), 0);
	if (strcmp(mem_log(t.b), "write " W "/tmp\nrename " W "/tmp " W "/target\n") != 0)
		fprintf(stderr, "log: %s\n", mem_log(t.b));
	CHECK(strcmp(mem_log(t.b), "write " W "/tmp\nrename " W "/tmp " W "/target\n") == 0);
	char *got = mem_get(t.b, W "/target");
	CHECK(got && strcmp(got, "new") == 0);
	free(got);
	CHECK(!mem_exists(t.b, W "/tmp"));
	teardown(&t);
}

static void test_writeback_queued_remove(void)
{
	struct t t;
	setup_with(&t, true, 0);
	mem_put(t.b, W "/q", "1");
	CHECK(look(&t, ROOT, "q") != 0);
	mem_log_clear(t.b);
	CHECK_INT(fs_unlink(&t.fs, ROOT, "q"), 0);
	/* a stat of the queued path answers ENOENT without landing it */
	CHECK_INT(look(&t, ROOT, "q"), 0);
	fs_fsyncdir(&t.fs); /* a barrier: it lands */
	CHECK(strcmp(mem_log(t.b), "remove " W "/q\n") == 0);
	CHECK(!mem_exists(t.b, W "/q"));
	teardown(&t);
}

/* ---- write-back: links that wait for the upload (fs/link_pending.h) ---- */

/* The log of calls matches want; prints it otherwise. */
static void check_log(struct t *t, const char *want)
{
	if (strcmp(mem_log(t->b), want) != 0)
		fprintf(stderr, "log:\n%swanted:\n%s", mem_log(t->b), want);
	CHECK(strcmp(mem_log(t->b), want) == 0);
}

static void check_content(struct t *t, const char *path, const char *want)
{
	char *got = mem_get(t->b, path);
	if (!got || strcmp(got, want) != 0)
		fprintf(stderr, "%s holds %s, wanted %s\n", path, got ? got : "nothing", want);
	CHECK(got && strcmp(got, want) == 0);
	free(got);
}

/* A directory made through the mount (its listing is known) with a
 * closed, queued file name in it holding data; the workers wait on the
 * paths lock until the caller lets them go. */
static uint64_t pending_file_in_new_dir(struct t *t, const char *dir,
					const char *name, const char *data,
					uint64_t *file)
{
	struct fs_entry e;
	CHECK_INT(fs_mkdir(&t->fs, ROOT, dir, 0755, &e), 0);
	wb_paths_write_lock(&t->fs);
	struct fs_open o;
	*file = make_file(t, e.ino, name, data, &o);
	CHECK_INT(fs_flush(&t->fs, *file, o.fh), 0);
	fs_release(&t->fs, *file, o.fh);
	mem_log_clear(t->b);
	return e.ino;
}

/* pending_file_in_new_dir's o/a, holding "data", linked to o/b: the
 * link deferred, both names the file's node. o's inode. */
static uint64_t pending_file_linked(struct t *t, uint64_t *a)
{
	uint64_t o = pending_file_in_new_dir(t, "o", "a", "data", a);
	struct fs_entry e;
	struct fs_later later = {0};
	CHECK_INT(fs_link(&t->fs, *a, o, "b", &e, &later), 0);
	CHECK_INT(e.ino, *a);
	return o;
}

struct named_entry {
	const char *name;
	uint64_t ino;
	bool found;
};

static bool note_entry(void *ctx, const char *name, const struct fs_entry *e,
		       off_t next)
{
	(void)next;
	struct named_entry *s = ctx;
	if (strcmp(name, s->name) == 0) {
		s->found = true;
		s->ino = e->attr.st_ino;
	}
	return true;
}

/* git's object write: the link waits, the temporary name goes without a
 * call, and the upload lands under the final name only. */
static void test_writeback_link_waits_for_upload(void)
{
	struct t t;
	setup_with(&t, true, 0);
	uint64_t tmp;
	uint64_t o = pending_file_in_new_dir(&t, "o", "tmp", "object", &tmp);
	struct fs_entry e;
	struct fs_later later = {0};
	CHECK_INT(fs_link(&t.fs, tmp, o, "obj", &e, &later), 0);
	CHECK_INT(e.ino, tmp); /* one file: both names show its inode */
	CHECK_INT(e.attr.st_nlink, 2);
	CHECK_INT(look(&t, o, "tmp"), tmp);
	CHECK_INT(look(&t, o, "obj"), tmp);
	struct fs_dir *d;
	struct named_entry s = {.name = "tmp"};
	CHECK_INT(fs_opendir(&t.fs, o, &d, &(struct fs_later){0}), 0);
	fs_readdir(&t.fs, o, d, 0, false, note_entry, &s);
	fs_releasedir(&t.fs, o, d);
	CHECK(s.found && s.ino == tmp);
	CHECK_INT(fs_unlink(&t.fs, o, "tmp"), 0);
	CHECK_INT(look(&t, o, "tmp"), 0);
	struct stat st;
	double timeout;
	CHECK_INT(fs_getattr(&t.fs, tmp, &st, &timeout), 0);
	CHECK_INT(st.st_nlink, 1);
	CHECK_INT(mem_calls(t.b, SB_CALL_LINK) + mem_calls(t.b, SB_CALL_WRITE), 0);
	wb_paths_unlock(&t.fs);
	char msg[256] = "";
	CHECK_INT(fs_flush_all(&t.fs, msg, sizeof msg), 0);
	check_log(&t, "write " W "/o/obj\n");
	check_content(&t, W "/o/obj", "object");
	CHECK(!mem_exists(t.b, W "/o/tmp"));
	teardown(&t);
}

/* Kept, the old name is linked once the upload lands; asked of the
 * sandbox again once its attributes are stale, it stays the file's name
 * while the sandbox names the same inode there, and becomes a name of
 * its own once a command put another file there. An rmdir of its
 * directory meanwhile is ENOTEMPTY. */
static void test_writeback_link_lands_after_upload(void)
{
	struct t t;
	setup_with(&t, true, 0);
	uint64_t a;
	uint64_t o = pending_file_in_new_dir(&t, "o", "a", "data", &a);
	struct fs_entry e, d2;
	struct fs_later later = {0};
	CHECK_INT(fs_mkdir(&t.fs, ROOT, "p", 0755, &d2), 0);
	CHECK_INT(fs_link(&t.fs, a, d2.ino, "b", &e, &later), 0);
	CHECK_INT(e.ino, a);
	CHECK_INT(fs_rmdir(&t.fs, ROOT, "o"), -ENOTEMPTY);
	wb_paths_unlock(&t.fs);
	char msg[256] = "";
	CHECK_INT(fs_flush_all(&t.fs, msg, sizeof msg), 0);
	check_log(&t, "mkdir " W "/p\nwrite " W "/p/b\nlink " W "/p/b " W "/o/a\n");
	check_content(&t, W "/o/a", "data");
	check_content(&t, W "/p/b", "data");
	CHECK_INT(look(&t, o, "a"), a); /* still the one file the kernel knows */
	struct stat st;
	double timeout;
	CHECK_INT(fs_getattr(&t.fs, a, &st, &timeout), 0);
	CHECK_INT(st.st_nlink, 2);
	/* its attributes stale (the watch reported the link back): the
	 * sandbox's inode says one file, so one node for both names */
	fs_invalidate(&t.fs, "/");
	CHECK_INT(look(&t, o, "a"), a);
	CHECK_INT(look(&t, d2.ino, "b"), a);
	CHECK_INT(fs_getattr(&t.fs, a, &st, &timeout), 0);
	CHECK_INT(st.st_nlink, 2);
	CHECK_INT(mem_calls(t.b, SB_CALL_STAT) > 0, 1);
	/* a command replaced o/a: a name of its own, another file */
	CHECK_INT(mem_remove(t.b, W "/o/a"), 0);
	CHECK_INT(mem_put(t.b, W "/o/a", "other"), 0);
	fs_invalidate(&t.fs, "/");
	uint64_t now_a = look(&t, o, "a");
	CHECK(now_a != 0 && now_a != a);
	CHECK_INT(fs_getattr(&t.fs, now_a, &st, &timeout), 0);
	CHECK_INT(st.st_nlink, 1);
	CHECK_INT(st.st_size, 5);
	teardown(&t);
}

/* A rename of either name lands the upload and the link first; an
 * unlink of the file's own name leaves it under the alias's, which then
 * goes without a call. */
static void test_writeback_link_lands_before_other_changes(void)
{
	struct t t;
	setup_with(&t, true, 0);
	uint64_t a;
	uint64_t o = pending_file_linked(&t, &a);
	struct fs_entry e;
	struct fs_later later = {0};
	wb_paths_unlock(&t.fs); /* the rename takes it for reading */
	CHECK_INT(fs_rename(&t.fs, o, "a", o, "c", 0, NULL), 0);
	check_log(&t, "write " W "/o/b\nlink " W "/o/b " W "/o/a\nrename " W "/o/a " W "/o/c\n");
	mem_log_clear(t.b);
	wb_paths_write_lock(&t.fs);
	uint64_t f;
	struct fs_open op;
	f = make_file(&t, o, "x", "xdata", &op);
	CHECK_INT(fs_flush(&t.fs, f, op.fh), 0);
	fs_release(&t.fs, f, op.fh);
	CHECK_INT(fs_link(&t.fs, f, o, "y", &e, &later), 0);
	wb_paths_unlock(&t.fs);
	CHECK_INT(fs_unlink(&t.fs, o, "y"), 0);
	char msg[256] = "";
	CHECK_INT(fs_flush_all(&t.fs, msg, sizeof msg), 0);
	check_log(&t, "write " W "/o/x\n");
	check_content(&t, W "/o/x", "xdata");
	CHECK(!mem_exists(t.b, W "/o/y"));
	CHECK_INT(look(&t, o, "x") != 0, 1);
	teardown(&t);
}

/* The kernel holds the old name with the file's node: a coherence point
 * (which evicts what the kernel has forgotten) keeps the alias, and an
 * unlink of the file's own name leaves that node under the old name. */
static void test_writeback_link_alias_outlives_refresh(void)
{
	struct t t;
	setup_with(&t, true, 0);
	uint64_t a;
	uint64_t o = pending_file_linked(&t, &a);
	wb_paths_unlock(&t.fs);
	char msg[256] = "";
	CHECK_INT(fs_flush_all(&t.fs, msg, sizeof msg), 0); /* landed */
	fs_invalidate(&t.fs, "/");
	CHECK_INT(fs_unlink(&t.fs, o, "b"), 0);
	struct stat st;
	double timeout;
	CHECK_INT(fs_getattr(&t.fs, a, &st, &timeout), 0);
	CHECK_INT(st.st_nlink, 1);
	CHECK_INT(look(&t, o, "a"), a);
	CHECK_INT(look(&t, o, "b"), 0);
	CHECK_INT(fs_flush_all(&t.fs, msg, sizeof msg), 0);
	check_content(&t, W "/o/a", "data");
	CHECK(!mem_exists(t.b, W "/o/b"));
	teardown(&t);
}

/* A name the sandbox may have (the directory's listing is not current):
 * the link goes to the sandbox now, after the upload. */
static void test_writeback_link_to_unknown_name_is_not_deferred(void)
{
	struct t t;
	setup_with(&t, true, 0);
	mem_put(t.b, W "/old/keep", "1"); /* a directory the mount never listed */
	uint64_t old = look(&t, ROOT, "old");
	CHECK(old != 0);
	uint64_t a;
	pending_file_in_new_dir(&t, "o", "a", "data", &a);
	struct fs_entry e;
	struct fs_later later = {0};
	CHECK_INT(fs_link(&t.fs, a, old, "b", &e, &later), 0);
	CHECK(e.ino != a);
	check_log(&t, "write " W "/o/a\nlink " W "/o/a " W "/old/b\n");
	wb_paths_unlock(&t.fs);
	teardown(&t);
}

/* ---- hard links where the sandbox tells no inode ---- */

/* The names the mount's own links made count each new one; a file the
 * sandbox told no inode of is no name of theirs (inode 0 named them all). */
static void test_link_counts_without_inodes(void)
{
	struct t t;
	setup(&t);
	mem_tell_no_inodes(t.b);
	mem_put(t.b, W "/f", "data");
	mem_put(t.b, W "/x", "other");
	uint64_t f = look(&t, ROOT, "f"), x = look(&t, ROOT, "x");
	CHECK(f && x);
	struct fs_entry g, h;
	struct fs_later later = {0};
	CHECK_INT(fs_link(&t.fs, f, ROOT, "g", &g, &later), 0);
	CHECK_INT(fs_link(&t.fs, f, ROOT, "h", &h, &later), 0);
	struct stat st;
	double timeout;
	uint64_t names[] = {f, g.ino, h.ino};
	for (size_t i = 0; i < 3; i++) {
		CHECK_INT(fs_getattr(&t.fs, names[i], &st, &timeout), 0);
		CHECK_INT(st.st_nlink, 3);
	}
	CHECK_INT(fs_getattr(&t.fs, x, &st, &timeout), 0);
	CHECK_INT(st.st_nlink, 1);
	teardown(&t);
}

/* ---- write-back: queued mkdir ---- */

/* A mkdir where the name is known absent (the root listed) returns at
 * once; the mkdirs land in one call, before what is written below them. */
static void test_writeback_mkdir_queued(void)
{
	struct t t;
	setup_with(&t, true, 0);
	list_dir(&t, ROOT);
	mem_log_clear(t.b);
	wb_paths_write_lock(&t.fs);
	struct fs_entry a, b, c;
	CHECK_INT(fs_mkdir(&t.fs, ROOT, "a", 0750, &a), 0);
	CHECK_INT(fs_mkdir(&t.fs, ROOT, "b", 0755, &b), 0);
	CHECK_INT(fs_mkdir(&t.fs, a.ino, "c", 0755, &c), 0);
	CHECK_INT(mem_calls(t.b, SB_CALL_MKDIR), 0);
	CHECK(look(&t, c.ino, "x") == 0); /* a new directory: known empty */
	struct fs_open o;
	uint64_t f = make_file(&t, c.ino, "f", "deep", &o);
	CHECK_INT(fs_flush(&t.fs, f, o.fh), 0);
	fs_release(&t.fs, f, o.fh);
	CHECK_INT(mem_calls(t.b, SB_CALL_MKDIR), 0);
	wb_paths_unlock(&t.fs);
	char msg[256] = "";
	CHECK_INT(fs_flush_all(&t.fs, msg, sizeof msg), 0);
	check_log(&t, "mkdir " W "/a\nmkdir " W "/b\nmkdir " W "/a/c\nwrite " W "/a/c/f\n");
	CHECK_INT(mem_calls(t.b, SB_CALL_MKDIR), 1);
	check_content(&t, W "/a/c/f", "deep");
	struct stat st;
	double timeout;
	CHECK_INT(fs_getattr(&t.fs, a.ino, &st, &timeout), 0);
	CHECK_INT(st.st_mode & 07777, 0750);
	teardown(&t);
}

/* Where the sandbox may have the name (the parent never listed), the
 * sandbox answers: EEXIST for a directory made behind the mount's back. */
static void test_writeback_mkdir_of_unknown_name_asks(void)
{
	struct t t;
	setup_with(&t, true, 0);
	mem_put(t.b, W "/d/keep", "1");
	struct fs_entry e;
	CHECK_INT(fs_mkdir(&t.fs, ROOT, "d", 0755, &e), -EEXIST);
	CHECK_INT(fs_mkdir(&t.fs, ROOT, "n", 0755, &e), 0);
	CHECK_INT(mem_calls(t.b, SB_CALL_MKDIR), 2);
	teardown(&t);
}

/* A name whose guest path (W in front) would not fit the sandbox's
 * PATH_MAX is ENAMETOOLONG at once, in both modes, never queued: the
 * queue answered 0 and the sandbox refused it at the next sbexec
 * (pjdfstest mkdir/03.t). Depth 15 of 255-byte names is W + 3,840 bytes;
 * a name of 244 more makes 4,095, the longest path with its NUL. */
static void check_path_max(bool writeback)
{
	struct t t;
	setup_with(&t, writeback, 0);
	list_dir(&t, ROOT);
	char name[NAME_MAX_BYTES + 1];
	memset(name, 'n', NAME_MAX_BYTES);
	name[NAME_MAX_BYTES] = '\0';
	struct fs_entry e = {.ino = ROOT};
	for (int i = 0; i < 15; i++)
		CHECK_INT(fs_mkdir(&t.fs, e.ino, name, 0755, &e), 0);
	uint64_t deep = e.ino;
	char fits[245], over[246];
	memset(fits, 'f', 244);
	fits[244] = '\0';
	memset(over, 'o', 245);
	over[245] = '\0';
	CHECK_INT(fs_mkdir(&t.fs, deep, over, 0755, &e), -ENAMETOOLONG);
	struct fs_open o = {.flags = O_WRONLY | O_CREAT};
	CHECK_INT(fs_create(&t.fs, deep, over, 0644, &o, &e), -ENAMETOOLONG);
	CHECK_INT(fs_symlink(&t.fs, "t", deep, over, &e), -ENAMETOOLONG);
	uint64_t f = make_file(&t, ROOT, "f", "x", &o);
	CHECK_INT(fs_flush(&t.fs, f, o.fh), 0);
	fs_release(&t.fs, f, o.fh);
	struct fs_later later = {0};
	CHECK_INT(fs_link(&t.fs, f, deep, over, &e, &later), -ENAMETOOLONG);
	CHECK_INT(fs_rename(&t.fs, ROOT, "f", deep, over, 0, &later), -ENAMETOOLONG);
	CHECK(look(&t, deep, over) == 0);
	CHECK_INT(fs_mkdir(&t.fs, deep, fits, 0755, &e), 0);
	char msg[256] = "";
	CHECK_INT(fs_flush_all(&t.fs, msg, sizeof msg), 0);
	CHECK(msg[0] == '\0');
	CHECK_INT(mem_calls(t.b, SB_CALL_SYMLINK) + mem_calls(t.b, SB_CALL_RENAME), 0);
	teardown(&t);
}

static void test_path_max_refused_at_once(void)
{
	check_path_max(false);
	check_path_max(true);
}

/* ---- answers overtaken by the mount's own changes ---- */

/* What a test does while an answer is on its way (mem_after). */
struct meanwhile {
	struct t *t;
	uint64_t ino;
	const char *data;
};

/* Rewrites the file and closes it: the upload lands (default mode). */
static void rewrite_file(void *arg)
{
	struct meanwhile *w = arg;
	struct fs_open o = {.flags = O_WRONLY | O_TRUNC};
	CHECK_INT(fs_open(&w->t->fs, w->ino, &o), 0);
	CHECK_INT(fs_write(&w->t->fs, w->ino, o.fh, w->data, strlen(w->data), 0),
		  (long long)strlen(w->data));
	CHECK_INT(fs_flush(&w->t->fs, w->ino, o.fh), 0);
	fs_release(&w->t->fs, w->ino, o.fh);
}

/* Sets the node's mode to w->data's octal value (a chmod through the
 * mount). */
static void chmod_node(void *arg)
{
	struct meanwhile *w = arg;
	struct stat attr = {.st_mode = (mode_t)strtol(w->data, NULL, 8)};
	struct stat out;
	CHECK_INT(fs_setattr(&w->t->fs, w->ino, &attr, FS_SET_MODE, &out), 0);
}

static void drain_uploads(void *arg) { wb_drain(&((struct meanwhile *)arg)->t->fs); }
static void drain_removes(void *arg) { wb_drain_removes(&((struct meanwhile *)arg)->t->fs); }

static void test_answers_overtaken(void)
{
	struct t t;
	setup(&t);
	struct stat st;
	double timeout;
	mem_put(t.b, W "/a", "old");
	struct meanwhile w = {.t = &t, .ino = look(&t, ROOT, "a"),
			      .data = "the new content"};
	/* a stat made before the upload landed, answered after it */
	fs_invalidate(&t.fs, "/a");
	mem_after(t.b, SB_CALL_STAT, rewrite_file, &w);
	CHECK_INT(fs_getattr(&t.fs, w.ino, &st, &timeout), 0);
	CHECK_INT(st.st_size, 15);
	CHECK_INT(fs_getattr(&t.fs, w.ino, &st, &timeout), 0);
	CHECK_INT(st.st_size, 15);
	/* a listing, likewise */
	w.data = "newer";
	fs_invalidate(&t.fs, "/");
	mem_after(t.b, SB_CALL_LIST, rewrite_file, &w);
	list_dir(&t, ROOT);
	CHECK_INT(fs_getattr(&t.fs, w.ino, &st, &timeout), 0);
	CHECK_INT(st.st_size, 5);
	/* a chmod (a chown alike) lands while a stat, then a listing, is
	 * on its way: the old mode must not come back */
	w.data = "600";
	fs_invalidate(&t.fs, "/a");
	mem_after(t.b, SB_CALL_STAT, chmod_node, &w);
	CHECK_INT(fs_getattr(&t.fs, w.ino, &st, &timeout), 0);
	CHECK_INT(st.st_mode & 07777, 0600);
	CHECK_INT(fs_getattr(&t.fs, w.ino, &st, &timeout), 0);
	CHECK_INT(st.st_mode & 07777, 0600);
	w.data = "640";
	fs_invalidate(&t.fs, "/");
	mem_after(t.b, SB_CALL_LIST, chmod_node, &w);
	list_dir(&t, ROOT);
	CHECK_INT(fs_getattr(&t.fs, w.ino, &st, &timeout), 0);
	CHECK_INT(st.st_mode & 07777, 0640);
	teardown(&t);

	/* Write-back: a queued remove lands while a listing is on its way;
	 * so does an empty new file's first upload, and its spool goes with
	 * the upload (nothing to keep in a read cache). Neither answer may
	 * bring the name back or take it away. */
	setup_with(&t, true, 0);
	mem_put(t.b, W "/gone", "1");
	CHECK(look(&t, ROOT, "gone") != 0);
	CHECK_INT(fs_unlink(&t.fs, ROOT, "gone"), 0);
	fs_invalidate(&t.fs, "/");
	mem_after(t.b, SB_CALL_LIST, drain_removes, &w);
	list_dir(&t, ROOT);
	CHECK(!mem_exists(t.b, W "/gone"));
	CHECK_INT(look(&t, ROOT, "gone"), 0);
	struct fs_open o;
	uint64_t ino = make_file(&t, ROOT, "empty", "", &o);
	fs_release(&t.fs, ino, o.fh);
	fs_invalidate(&t.fs, "/");
	mem_after(t.b, SB_CALL_LIST, drain_uploads, &w);
	list_dir(&t, ROOT);
	CHECK(mem_exists(t.b, W "/empty"));
	CHECK_INT(look(&t, ROOT, "empty"), ino);
	teardown(&t);
}

/* Modal's and e2b's listings name an owner by a user name only the guest's
 * passwd maps: such an entry's ids come from a stat, never a guess. */
static void test_listing_names_owner(void)
{
	struct t t;
	setup(&t);
	mem_put(t.b, W "/a", "x");
	CHECK_INT(sb_chown(t.b, W "/a", 4321, 4322), 0); /* in the sandbox */
	mem_tell_owner_names(t.b);
	list_dir(&t, ROOT);
	unsigned long before = mem_calls(t.b, SB_CALL_STAT);
	struct stat st;
	double timeout;
	uint64_t a = look(&t, ROOT, "a");
	CHECK_INT(fs_getattr(&t.fs, a, &st, &timeout), 0);
	CHECK_INT(st.st_uid, 4321);
	CHECK_INT(st.st_gid, 4322);
	CHECK_INT(mem_calls(t.b, SB_CALL_STAT) - before, 1);
	teardown(&t);
}

/* Renames "tmp" over "conf" through the mount. */
static void rename_tmp_over_conf(void *arg)
{
	struct meanwhile *w = arg;
	CHECK_INT(fs_rename(&w->t->fs, ROOT, "tmp", ROOT, "conf", 0, NULL), 0);
}

/* An editor's save (write a temp, rename it over the name) lands while a
 * lookup of the name is on its way: the lookup answers the file the name
 * holds now, never the one replaced (the kernel would show its cached
 * pages, the old content) nor the old file's attributes on the new one. */
static void test_lookup_overtaken_by_rename(void)
{
	for (int cached = 0; cached < 2; cached++) {
		struct t t;
		setup(&t);
		mem_put(t.b, W "/conf", "v1\n");
		struct meanwhile w = {.t = &t};
		uint64_t old = 0;
		if (cached) {
			/* known from a listing, its attributes since forgotten */
			list_dir(&t, ROOT);
			old = look(&t, ROOT, "conf");
			CHECK(old != 0);
			fs_invalidate(&t.fs, "/conf");
		}
		struct fs_open o;
		uint64_t tmp = make_file(&t, ROOT, "tmp", "v2 longer\n", &o);
		CHECK_INT(fs_flush(&t.fs, tmp, o.fh), 0);
		fs_release(&t.fs, tmp, o.fh);
		mem_after(t.b, SB_CALL_STAT, rename_tmp_over_conf, &w);
		struct fs_entry e;
		CHECK_INT(fs_lookup(&t.fs, ROOT, "conf", &e), 0);
		CHECK_INT(e.ino, tmp);
		CHECK(e.ino != old);
		CHECK_INT(e.attr.st_size, 10);
		check_content(&t, W "/conf", "v2 longer\n");
		teardown(&t);
	}
}

/* ---- failure paths ---- */

static void test_failures(void)
{
	struct t t;
	setup(&t);
	mem_put(t.b, W "/a", "x");
	mem_fail(t.b, SB_CALL_STAT, W "/a", -EIO, 1);
	struct fs_entry e;
	CHECK_INT(fs_lookup(&t.fs, ROOT, "a", &e), -EIO);
	CHECK_INT(fs_lookup(&t.fs, ROOT, "a", &e), 0);
	uint64_t a = e.ino;

	mem_fail(t.b, SB_CALL_RENAME, NULL, -EIO, 1);
	CHECK_INT(fs_rename(&t.fs, ROOT, "a", ROOT, "b", 0, NULL), -EIO);
	CHECK_INT(look(&t, ROOT, "a"), a); /* nothing moved */
	CHECK(mem_exists(t.b, W "/a"));

	mem_fail(t.b, SB_CALL_MKDIR, NULL, -ENOENT, 1);
	CHECK_INT(fs_mkdir(&t.fs, ROOT, "m", 0755, &e), -ENOENT);
	CHECK_INT(look(&t, ROOT, "m"), 0);

	mem_fail(t.b, SB_CALL_REMOVE, NULL, -EIO, 1);
	CHECK_INT(fs_unlink(&t.fs, ROOT, "a"), -EIO);
	CHECK_INT(look(&t, ROOT, "a"), a); /* still there */

	/* a failed upload keeps the data and is retried at the barrier */
	struct fs_open o;
	uint64_t f = make_file(&t, ROOT, "f", "keep me", &o);
	mem_fail(t.b, SB_CALL_WRITE, NULL, -EIO, 1);
	CHECK_INT(fs_flush(&t.fs, f, o.fh), -EIO);
	CHECK(!mem_exists(t.b, W "/f"));
	json_t *st = json_object();
	fs_status(&t.fs, st);
	CHECK_INT(json_array_size(json_object_get(st, "pending_uploads")), 1);
	json_decref(st);
	fs_release(&t.fs, f, o.fh);
	char msg[256] = "";
	CHECK_INT(fs_flush_all(&t.fs, msg, sizeof msg), 0);
	char *got = mem_get(t.b, W "/f");
	CHECK(got && strcmp(got, "keep me") == 0);
	free(got);

	mem_fail(t.b, SB_CALL_LIST, NULL, -EIO, 1);
	struct fs_dir *d;
	fs_invalidate(&t.fs, "/");
	CHECK_INT(fs_opendir(&t.fs, ROOT, &d, &(struct fs_later){0}), -EIO);

	/* a dead sandbox: everything fails but the root's getattr */
	sb_backend_fail(t.b, "the sandbox is gone");
	CHECK_INT(fs_lookup(&t.fs, ROOT, "a", &e), -EIO);
	struct stat s;
	double timeout;
	CHECK_INT(fs_getattr(&t.fs, ROOT, &s, &timeout), 0);
	CHECK(S_ISDIR(s.st_mode));
	CHECK_INT(fs_getattr(&t.fs, a, &s, &timeout), -EIO);
	teardown(&t);
}

/* ---- notifications ---- */

struct seen {
	int inodes, entries;
};

static void seen_inode(void *arg, uint64_t ino, int64_t off, int64_t len)
{
	(void)ino, (void)off, (void)len;
	((struct seen *)arg)->inodes++;
}

static void seen_entry(void *arg, uint64_t parent, const char *name,
		       bool is_dir)
{
	(void)parent, (void)name, (void)is_dir;
	((struct seen *)arg)->entries++;
}

static void test_notifications(void)
{
	struct t t;
	setup(&t);
	struct seen s = {0};
	t.fs.notify = (struct fs_notify){
		.arg = &s, .inode = seen_inode, .entry = seen_entry,
	};
	mem_put(t.b, W "/n", "1");
	CHECK(look(&t, ROOT, "n") != 0);
	fs_invalidate(&t.fs, "/");
	CHECK_INT(s.inodes, 2);  /* the root and n */
	CHECK_INT(s.entries, 1); /* n's name */
	teardown(&t);
}

/* ---- a watched mount (the backend reports changes: fs_changed) ---- */

/* What the backend's stat says of path now, as a watch reports it. */
static bool stat_now(struct t *t, const char *path, struct stat *st)
{
	return sb_stat(t->b, path, st, NULL) == 0;
}

static void test_watched_keeps_what_did_not_change(void)
{
	struct t t;
	setup(&t);
	atomic_store(&t.fs.watched, true);
	struct seen s = {0};
	t.fs.notify = (struct fs_notify){.arg = &s, .inode = seen_inode, .entry = seen_entry};
	mem_put(t.b, W "/a", "1");
	mem_put(t.b, W "/b", "2");
	list_dir(&t, ROOT);
	uint64_t a = look(&t, ROOT, "a"), b = look(&t, ROOT, "b");
	CHECK(a && b);
	struct stat st;
	/* the mount's own change coming back: nothing is forgotten */
	CHECK(stat_now(&t, W "/a", &st));
	unsigned long before = asks(&t);
	fs_changed(&t.fs, "a", &st);
	CHECK_INT(look(&t, ROOT, "a"), a);
	list_dir(&t, ROOT);
	CHECK_INT(asks(&t), before);
	CHECK_INT(s.inodes + s.entries, 0);
	/* a changed in the sandbox: a alone is asked again, not b, not the
	 * root's listing */
	mem_put(t.b, W "/a", "longer");
	CHECK(stat_now(&t, W "/a", &st));
	before = asks(&t);
	fs_changed(&t.fs, "a", &st);
	CHECK_INT(s.inodes, 1);
	CHECK_INT(look(&t, ROOT, "b"), b);
	list_dir(&t, ROOT);
	CHECK_INT(asks(&t), before);
	struct fs_entry e;
	CHECK_INT(fs_lookup(&t.fs, ROOT, "a", &e), 0);
	CHECK_INT(e.attr.st_size, 6);
	CHECK_INT(asks(&t), before + 1);
	/* a report taken before the mount's own change (a stale stat) only
	 * makes the mount ask again: it never shows what the report said */
	struct stat stale = st;
	stale.st_size = 1;
	fs_changed(&t.fs, "a", &stale);
	CHECK_INT(fs_lookup(&t.fs, ROOT, "a", &e), 0);
	CHECK_INT(e.attr.st_size, 6);
	/* a replaced by another file (another inode): asked again, with the
	 * root's listing */
	before = asks(&t);
	mem_remove(t.b, W "/a");
	mem_put(t.b, W "/a", "other");
	CHECK(stat_now(&t, W "/a", &st));
	fs_changed(&t.fs, "a", &st);
	CHECK_INT(fs_lookup(&t.fs, ROOT, "a", &e), 0);
	CHECK_INT(e.attr.st_size, 5);
	list_dir(&t, ROOT);
	CHECK(asks(&t) > before + 1);
	/* a name made in the sandbox is found at once */
	mem_put(t.b, W "/c", "3");
	CHECK(stat_now(&t, W "/c", &st));
	s.entries = 0;
	fs_changed(&t.fs, "c", &st);
	CHECK(look(&t, ROOT, "c") != 0);
	/* and a name removed there is gone */
	mem_remove(t.b, W "/b");
	fs_changed(&t.fs, "b", NULL);
	CHECK_INT(fs_lookup(&t.fs, ROOT, "b", &e), -ENOENT);
	teardown(&t);
}

/* A file the sandbox replaces while it is open: the open goes on reading
 * the version it read (the kernel may split one read() into several
 * requests, which must not see two versions); the next open sees the new
 * one. */
static void test_watched_report_keeps_an_open_readers_version(void)
{
	struct t t;
	setup(&t);
	atomic_store(&t.fs.watched, true);
	mem_put(t.b, W "/r", "AAAAAAAA");
	uint64_t r = look(&t, ROOT, "r");
	struct fs_open o = {.flags = O_RDONLY};
	CHECK_INT(fs_open(&t.fs, r, &o), 0);
	char buf[8] = "";
	struct fs_later later = {0};
	CHECK_INT(fs_read(&t.fs, r, o.fh, buf, 4, 0, &later), 4);
	CHECK(memcmp(buf, "AAAA", 4) == 0);
	mem_put(t.b, W "/r", "BBBBBBBB");
	struct stat st;
	CHECK(stat_now(&t, W "/r", &st));
	fs_changed(&t.fs, "r", &st);
	CHECK_INT(fs_read(&t.fs, r, o.fh, buf, 4, 4, &later), 4);
	CHECK(memcmp(buf, "AAAA", 4) == 0);
	fs_release(&t.fs, r, o.fh);
	o = (struct fs_open){.flags = O_RDONLY};
	CHECK_INT(fs_open(&t.fs, r, &o), 0);
	CHECK_INT(fs_read(&t.fs, r, o.fh, buf, 8, 0, &later), 8);
	CHECK(memcmp(buf, "BBBBBBBB", 8) == 0);
	fs_release(&t.fs, r, o.fh);
	teardown(&t);
}

static void test_watched_expiry(void)
{
	struct t t;
	setup(&t);
	struct timespec now = fs_now();
	table_lock(&t.fs);
	uint64_t since = t.fs.changes;
	/* unwatched: the timeout (60 s here) */
	CHECK(fs_cache_expiry(&t.fs, 60, since).tv_sec <= now.tv_sec + 61);
	atomic_store(&t.fs.watched, true);
	CHECK(fs_cache_expiry(&t.fs, 60, since).tv_sec > now.tv_sec + 3600);
	/* a change reported while the call ran: it may predate it */
	t.fs.changes++;
	CHECK(fs_cache_expiry(&t.fs, 60, since).tv_sec <= now.tv_sec + 61);
	/* timeouts the user set hold */
	t.fs.cfg.timeouts_set = true;
	CHECK(fs_cache_expiry(&t.fs, 60, t.fs.changes).tv_sec <= now.tv_sec + 61);
	table_unlock(&t.fs);
	/* the watch lost: everything is asked again, timeouts from then on */
	t.fs.cfg.timeouts_set = false;
	mem_put(t.b, W "/x", "1");
	CHECK(look(&t, ROOT, "x") != 0);
	unsigned long before = asks(&t);
	fs_watch_lost(&t.fs);
	CHECK(!atomic_load(&t.fs.watched));
	CHECK(look(&t, ROOT, "x") != 0);
	CHECK(asks(&t) > before);
	teardown(&t);
}

/* ---- lock order ---- */

#ifdef SBFS_LOCK_CHECK
static void test_lock_order_checked(void)
{
	struct t t;
	setup(&t);
	struct fs_open o;
	uint64_t f = make_file(&t, ROOT, "l", "x", &o);
	table_lock(&t.fs);
	struct file_state *fsf = node_by_ino(&t.fs.t, f)->file;
	table_unlock(&t.fs);
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		table_lock(&t.fs);
		file_lock(fsf); /* out of order: aborts */
		_exit(0);
	}
	int status = 0;
	waitpid(pid, &status, 0);
	CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
	/* in order: fine */
	file_lock(fsf);
	table_lock(&t.fs);
	table_unlock(&t.fs);
	file_unlock(fsf);
	fs_release(&t.fs, f, o.fh);
	teardown(&t);
}
#endif

int main(void)
{
	test_lookup();
	test_create_upload();
	test_rename_unlink();
	test_file_state_clone();
	test_mkdir_symlink();
	test_listing_answers_absent();
	test_parent_listing_keeps_child_listing();
	test_listing_drops_removed_names();
	test_eviction();
	test_rename_over_open_file();
	test_rename_over_unread_open_file();
	test_read_through_spool();
	test_read_caches_give_way();
	test_read_gives_back_fetched();
	test_spool_full_during_fetch();
	test_spool_full_two_readers();
	test_spool_open_emfile();
	test_spool_full_write_beside_readers();
	test_spool_room_given_meanwhile_is_tried();
	test_read_takes_checked_segments();
	test_read_ending_after_an_upload();
	test_write_never_splices_a_replaced_file();
	test_writeback_upload_before_dir_rename();
	test_writeback_pending_rename_and_unlink();
	test_writeback_times_go_with_upload();
	test_writeback_pending_files_hold_no_descriptor();
	test_chown_to_sandbox_user_goes_with_upload();
	test_writeback_dir_attrs_land_after_uploads_below();
	test_writeback_pending_rename_over_sandbox_file();
	test_writeback_queued_remove();
	test_link_counts_without_inodes();
	test_writeback_mkdir_queued();
	test_path_max_refused_at_once();
	test_writeback_mkdir_of_unknown_name_asks();
	test_writeback_link_waits_for_upload();
	test_writeback_link_lands_after_upload();
	test_writeback_link_lands_before_other_changes();
	test_writeback_link_alias_outlives_refresh();
	test_writeback_link_to_unknown_name_is_not_deferred();
	test_answers_overtaken();
	test_lookup_overtaken_by_rename();
	test_listing_names_owner();
	test_failures();
	test_notifications();
	test_watched_keeps_what_did_not_change();
	test_watched_expiry();
	test_watched_report_keeps_an_open_readers_version();
#ifdef SBFS_LOCK_CHECK
	test_lock_order_checked();
#endif
	return unit_done("fs_core");
}
