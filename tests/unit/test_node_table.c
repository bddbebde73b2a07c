/* The node table's cache rules: a listing stops vouching for a directory
 * once a node it named is freed, and a directory's times never go back
 * behind a change the mount made there. */
#include "fs/node_table.h"
#include "unit.h"

#include <string.h>

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
	freed_child_drops_listing();
	dir_times_follow_own_changes();
	removed_node();
	return unit_done("node_table");
}
