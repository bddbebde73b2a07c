/* The node cache's bound: forgotten nodes holding only cached attributes
 * are evicted past it; nodes the kernel holds, open files and open
 * directories never are; an evicted child makes its parent's listing
 * incomplete. */
#include "fs/core/node_table.h"
#include "unit.h"

#include <stdio.h>
#include <string.h>

static const struct timespec far = {.tv_sec = 1L << 40};

/* A child with attributes, as a listing makes it (nlookup 0). */
static struct node *listed(struct node_table *t, struct node *dir, const char *name)
{
	struct node *n = node_child_get(t, dir, name);
	struct stat st;
	memset(&st, 0, sizeof st);
	st.st_mode = S_IFREG | 0644;
	node_set_attr(t, n, &st, NULL, &far);
	return n;
}

static struct node *list_dir(struct node_table *t, struct node *dir, int n)
{
	struct node *last = NULL;
	char name[32];
	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof name, "f%05d", i);
		last = listed(t, dir, name);
	}
	dir->list_set = true;
	return last;
}

static void unbounded_keeps_everything(void)
{
	struct node_table t;
	CHECK_INT(node_table_init(&t, 0755), 0);
	struct node *d = listed(&t, t.root, "d");
	d->st.st_mode = S_IFDIR | 0755;
	struct node *f = list_dir(&t, d, 50);
	f->nlookup = 1;
	f->nlookup = 0;
	node_forgotten(&t, f);
	CHECK_INT(t.count, 52);
	CHECK(node_child(&t, d, "f00049") == f);
	CHECK(d->list_set);
	node_table_destroy(&t);
}

static void forget_evicts_past_bound(void)
{
	struct node_table t;
	CHECK_INT(node_table_init(&t, 0755), 0);
	t.max_nodes = 100;
	struct node *d = listed(&t, t.root, "d");
	d->st.st_mode = S_IFDIR | 0755;
	d->nlookup = 1;
	list_dir(&t, d, 200);
	CHECK_INT(t.count, 202);
	/* the kernel looked one up and forgets it: it and the listing's
	 * nodes go, down to three quarters of the bound */
	struct node *f = node_child(&t, d, "f00007");
	f->nlookup = 1;
	f->nlookup = 0;
	node_forgotten(&t, f);
	CHECK(t.count <= 75);
	CHECK(t.count >= 2);
	CHECK_INT(t.evicted, 202 - t.count);
	CHECK(!d->list_set); /* cannot answer "absent" any more */
	CHECK(node_child(&t, t.root, "d") == d); /* held by the kernel */
	node_table_destroy(&t);
}

static void pinned_nodes_stay(void)
{
	struct node_table t;
	CHECK_INT(node_table_init(&t, 0755), 0);
	t.max_nodes = 100;
	struct node *d = listed(&t, t.root, "d");
	d->st.st_mode = S_IFDIR | 0755;
	list_dir(&t, d, 300);
	struct node *held = node_child(&t, d, "f00001");
	held->nlookup = 2;
	struct node *open_file = node_child(&t, d, "f00002");
	open_file->file = (struct file_state *)1; /* any spool pins it */
	struct node *od = listed(&t, t.root, "opendir");
	od->open_dirs = 1;
	struct node *in_open = listed(&t, od, "listed-in-open-dir");
	uint64_t held_ino = held->ino;
	size_t gone = node_table_evict(&t, 0);
	CHECK_INT(gone, 298);
	/* d keeps children, so it stays; the root always does */
	CHECK_INT(t.count, 6);
	CHECK(node_child(&t, od, "listed-in-open-dir") == in_open);
	CHECK(node_by_ino(&t, held_ino) == held);
	CHECK(node_child(&t, d, "f00002") == open_file);
	CHECK(node_child(&t, t.root, "opendir") == od);
	CHECK(node_child(&t, d, "f00003") == NULL);
	open_file->file = NULL;
	/* under the bound a forgotten node keeps its attributes... */
	held->nlookup = 0;
	node_forgotten(&t, held);
	CHECK(node_child(&t, d, "f00001") == held);
	/* ...until a sweep; then the directory it leaves empty goes too */
	node_table_evict(&t, 0);
	CHECK(node_by_ino(&t, held_ino) == NULL);
	CHECK(node_child(&t, t.root, "d") == NULL); /* d is freed: not used again */
	CHECK_INT(t.count, 3);
	od->open_dirs = 0;
	node_table_evict(&t, 0);
	CHECK_INT(t.count, 1);
	node_table_destroy(&t);
}

/* A table full of nodes the kernel holds is not rescanned at every forget. */
static void no_rescan_of_held_table(void)
{
	struct node_table t;
	CHECK_INT(node_table_init(&t, 0755), 0);
	t.max_nodes = 100;
	list_dir(&t, t.root, 400);
	for (struct node *c = t.root->children; c; c = c->next_sibling)
		c->nlookup = 1;
	struct node *f = node_child(&t, t.root, "f00000");
	f->nlookup = 0;
	node_forgotten(&t, f); /* evicted itself, sweep finds nothing else */
	CHECK_INT(t.count, 400);
	CHECK(t.sweep_at >= 400 + 25);
	uint64_t before = t.evicted;
	f = node_child(&t, t.root, "f00001");
	f->nlookup = 0;
	node_forgotten(&t, f);
	CHECK_INT(t.evicted, before + 1);
	node_table_destroy(&t);
}

static struct timespec far_future(void)
{
	struct timespec t = {.tv_sec = 4000000000LL, .tv_nsec = 0};
	return t;
}

static void set_attr(struct node_table *t, struct node *n, mode_t mode,
		     time_t mtime)
{
	struct stat st;
	memset(&st, 0, sizeof st);
	st.st_mode = mode;
	st.st_mtim.tv_sec = st.st_ctim.tv_sec = mtime;
	struct timespec exp = far_future();
	node_set_attr(t, n, &st, NULL, &exp);
}

static void freed_child_drops_listing(void)
{
	struct node_table t;
	CHECK_INT(node_table_init(&t, 0755), 0);
	struct node *d = node_child_get(&t, t.root, "d");
	set_attr(&t, d, S_IFDIR | 0755, 100);
	struct node *a = node_child_get(&t, d, "a");
	set_attr(&t, a, S_IFREG | 0644, 100);
	d->list_set = true;
	d->list_gen = t.gen;
	d->list_expires = far_future();
	struct timespec now = {.tv_sec = 1000, .tv_nsec = 0};
	CHECK(node_list_fresh(&t, d, &now));

	/* Still cached: the node stays and so does the listing. */
	CHECK(!node_release_if_unused(&t, a));
	CHECK(node_list_fresh(&t, d, &now));

	/* Its attributes forgotten and the kernel's reference gone: freed,
	 * and the listing can no longer say whether "a" exists. */
	a->attr_set = false;
	CHECK(node_release_if_unused(&t, a));
	CHECK(node_child(&t, d, "a") == NULL);
	CHECK(!node_list_fresh(&t, d, &now));
	node_table_destroy(&t);
}

/* A directory the mount just changed keeps its node, so its times (the
 * daemon's clock) do not go back to a stat of the same second; later it
 * may go like any other. */
static void just_changed_dir_is_kept(void)
{
	struct node_table t;
	CHECK_INT(node_table_init(&t, 0755), 0);
	struct node *d = node_child_get(&t, t.root, "d");
	set_attr(&t, d, S_IFDIR | 0755, 100);
	node_entries_changed(d);
	d->attr_set = false;
	CHECK(!node_evictable(&t, d));
	CHECK(!node_release_if_unused(&t, d));
	CHECK(node_child(&t, t.root, "d") == d);
	d->entries_changed_at.tv_sec -= 10;
	CHECK(node_evictable(&t, d));
	CHECK(node_release_if_unused(&t, d));
	CHECK(node_child(&t, t.root, "d") == NULL);
	node_table_destroy(&t);
}

static void dir_times_follow_own_changes(void)
{
	struct node_table t;
	CHECK_INT(node_table_init(&t, 0755), 0);
	struct node *d = node_child_get(&t, t.root, "d");
	set_attr(&t, d, S_IFDIR | 0755, 100);
	node_entries_changed(d);
	time_t changed = d->st.st_mtim.tv_sec;
	CHECK(changed > 100);
	CHECK_INT(d->st.st_ctim.tv_sec, changed);
	CHECK_INT(d->entry_changes, 1);

	/* A stat from before the sandbox saw the change does not undo it. */
	set_attr(&t, d, S_IFDIR | 0755, 100);
	CHECK_INT(d->st.st_mtim.tv_sec, changed);
	CHECK_INT(d->st.st_ctim.tv_sec, changed);
	/* A later one is taken as it is. */
	set_attr(&t, d, S_IFDIR | 0755, changed + 10);
	CHECK_INT(d->st.st_mtim.tv_sec, changed + 10);

	/* Files keep the sandbox's times: only directories are floored. */
	struct node *f = node_child_get(&t, d, "f");
	f->entries_changed_at = d->entries_changed_at;
	set_attr(&t, f, S_IFREG | 0644, 100);
	CHECK_INT(f->st.st_mtim.tv_sec, 100);
	node_table_destroy(&t);
}

/* A stat that cannot count subdirectories (the Docker archive API says
 * nlink 0) keeps the count a listing or the mount's own mkdir gave. */
static void unknown_dir_link_count_is_kept(void)
{
	struct node_table t;
	CHECK_INT(node_table_init(&t, 0755), 0);
	struct node *d = node_child_get(&t, t.root, "d");
	set_attr(&t, d, S_IFDIR | 0755, 100); /* nlink 0: never known */
	CHECK_INT(d->st.st_nlink, 2);
	struct stat st;
	memset(&st, 0, sizeof st);
	st.st_mode = S_IFDIR | 0755;
	st.st_nlink = 5; /* a listing counted three subdirectories */
	struct timespec exp = far_future();
	node_set_attr(&t, d, &st, NULL, &exp);
	node_subdirs_changed(d, -1); /* the mount's rmdir of one */
	set_attr(&t, d, S_IFDIR | 0755, 200);
	CHECK_INT(d->st.st_nlink, 4);
	/* A count that is known replaces it. */
	st.st_nlink = 3;
	node_set_attr(&t, d, &st, NULL, &exp);
	CHECK_INT(d->st.st_nlink, 3);
	node_table_destroy(&t);
}

/* A file the mount's own link gave a second name, where the stat counts
 * no links: its node stays, or one made again would show 1. */
static void linked_file_count_is_kept(void)
{
	struct node_table t;
	CHECK_INT(node_table_init(&t, 0755), 0);
	struct node *a = node_child_get(&t, t.root, "a");
	set_attr(&t, a, S_IFREG | 0644, 100); /* nlink 0: untold */
	CHECK_INT(a->st.st_nlink, 1);
	a->st.st_nlink = 2; /* the mount's link */
	a->attr_set = false;
	CHECK(!node_evictable(&t, a));
	CHECK(!node_release_if_unused(&t, a));
	set_attr(&t, a, S_IFREG | 0644, 200);
	CHECK_INT(a->st.st_nlink, 2);
	/* one name again: it may go */
	a->st.st_nlink = 1;
	a->attr_set = false;
	CHECK(node_release_if_unused(&t, a));
	node_table_destroy(&t);
}

static void removed_node(void)
{
	struct node_table t;
	CHECK_INT(node_table_init(&t, 0755), 0);
	struct node *a = node_child_get(&t, t.root, "a");
	set_attr(&t, a, S_IFREG | 0644, 100);
	a->nlookup = 1; /* still open: outlives its name */
	CHECK(!node_removed(a));
	CHECK(!node_removed(t.root));
	node_detach(&t, a);
	CHECK(node_removed(a));
	CHECK(node_by_ino(&t, a->ino) == a);
	node_table_destroy(&t);
}

int main(void)
{
	unbounded_keeps_everything();
	forget_evicts_past_bound();
	pinned_nodes_stay();
	no_rescan_of_held_table();
	freed_child_drops_listing();
	dir_times_follow_own_changes();
	just_changed_dir_is_kept();
	linked_file_count_is_kept();
	removed_node();
	unknown_dir_link_count_is_kept();
	return unit_done("node_table");
}
