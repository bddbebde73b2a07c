/* The node cache's bound: forgotten nodes holding only cached attributes
 * are evicted past it; nodes the kernel holds, open files and open
 * directories never are; an evicted child makes its parent's listing
 * incomplete. */
#include "fs/node_table.h"
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
	CHECK(node_child(&t, d, "f00001") == NULL);
	CHECK(node_child(&t, t.root, "d") == NULL);
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

int main(void)
{
	unbounded_keeps_everything();
	forget_evicts_past_bound();
	pinned_nodes_stay();
	no_rescan_of_held_table();
	return unit_done("node_table");
}
