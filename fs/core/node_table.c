#include "node_table.h"
#include "backends/backend.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static size_t ino_bucket(const struct node_table *t, uint64_t ino)
{
	return (size_t)(ino % t->nbuckets);
}

static size_t name_bucket(const struct node_table *t, uint64_t parent_ino,
			  const char *name)
{
	/* FNV-1a over the parent inode and the name bytes */
	uint64_t h = 1469598103934665603ULL ^ parent_ino;
	for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
		h ^= *p;
		h *= 1099511628211ULL;
	}
	return (size_t)(h % t->nbuckets);
}

static void name_unhash(struct node_table *t, struct node *n)
{
	if (!n->parent)
		return;
	struct node **pp = &t->by_name[name_bucket(t, n->parent->ino, n->name)];
	for (; *pp; pp = &(*pp)->name_next) {
		if (*pp == n) {
			*pp = n->name_next;
			break;
		}
	}
	n->name_next = NULL;
}

static void name_hash(struct node_table *t, struct node *n)
{
	size_t b = name_bucket(t, n->parent->ino, n->name);
	n->name_next = t->by_name[b];
	t->by_name[b] = n;
}

static void unlink_sibling(struct node *n)
{
	if (!n->parent)
		return;
	if (n->prev_sibling)
		n->prev_sibling->next_sibling = n->next_sibling;
	else
		n->parent->children = n->next_sibling;
	if (n->next_sibling)
		n->next_sibling->prev_sibling = n->prev_sibling;
	n->next_sibling = n->prev_sibling = NULL;
}

static void link_sibling(struct node *parent, struct node *n)
{
	n->parent = parent;
	n->prev_sibling = NULL;
	n->next_sibling = parent->children;
	if (parent->children)
		parent->children->prev_sibling = n;
	parent->children = n;
}

static int grow(struct node_table *t)
{
	size_t nb = t->nbuckets * 4;
	struct node **by_ino = calloc(nb, sizeof *by_ino);
	struct node **by_name = calloc(nb, sizeof *by_name);
	if (!by_ino || !by_name) {
		free(by_ino);
		free(by_name);
		return -ENOMEM;
	}
	struct node **old_ino = t->by_ino;
	size_t old_nb = t->nbuckets;
	free(t->by_name);
	t->by_ino = by_ino;
	t->by_name = by_name;
	t->nbuckets = nb;
	for (size_t i = 0; i < old_nb; i++) {
		struct node *n = old_ino[i];
		while (n) {
			struct node *next = n->ino_next;
			size_t b = ino_bucket(t, n->ino);
			n->ino_next = t->by_ino[b];
			t->by_ino[b] = n;
			if (n->parent)
				name_hash(t, n);
			n = next;
		}
	}
	free(old_ino);
	return 0;
}

static struct node *node_new(struct node_table *t, const char *name)
{
	if (t->count >= t->nbuckets * 2 && grow(t) < 0)
		return NULL;
	struct node *n = calloc(1, sizeof *n);
	if (!n)
		return NULL;
	n->name = strdup(name);
	if (!n->name) {
		free(n);
		return NULL;
	}
	n->ino = t->next_ino++;
	size_t b = ino_bucket(t, n->ino);
	n->ino_next = t->by_ino[b];
	t->by_ino[b] = n;
	t->count++;
	return n;
}

static void node_free(struct node_table *t, struct node *n)
{
	struct node **pp = &t->by_ino[ino_bucket(t, n->ino)];
	for (; *pp; pp = &(*pp)->ino_next) {
		if (*pp == n) {
			*pp = n->ino_next;
			break;
		}
	}
	t->count--;
	free(n->name);
	free(n->link_target);
	free(n);
}

int node_table_init(struct node_table *t, mode_t root_mode)
{
	memset(t, 0, sizeof *t);
	pthread_mutex_init(&t->lock, NULL);
	t->nbuckets = 1024;
	t->by_ino = calloc(t->nbuckets, sizeof *t->by_ino);
	t->by_name = calloc(t->nbuckets, sizeof *t->by_name);
	t->next_ino = NODE_ROOT_INO;
	t->gen = 1;
	if (!t->by_ino || !t->by_name)
		return -ENOMEM;
	t->root = node_new(t, "");
	if (!t->root)
		return -ENOMEM;
	t->root->nlookup = 1; /* the kernel never forgets the root */
	t->root->st.st_mode = S_IFDIR | root_mode;
	t->root->st.st_nlink = 2;
	return 0;
}

void node_table_destroy(struct node_table *t)
{
	for (size_t i = 0; i < t->nbuckets; i++) {
		struct node *n = t->by_ino[i];
		while (n) {
			struct node *next = n->ino_next;
			free(n->name);
			free(n->link_target);
			free(n);
			n = next;
		}
	}
	free(t->by_ino);
	free(t->by_name);
	pthread_mutex_destroy(&t->lock);
	memset(t, 0, sizeof *t);
}

struct node *node_by_ino(struct node_table *t, uint64_t ino)
{
	for (struct node *n = t->by_ino[ino_bucket(t, ino)]; n; n = n->ino_next)
		if (n->ino == ino)
			return n;
	return NULL;
}

struct node *node_child(struct node_table *t, struct node *parent,
			const char *name)
{
	for (struct node *n = t->by_name[name_bucket(t, parent->ino, name)]; n;
	     n = n->name_next)
		if (n->parent == parent && strcmp(n->name, name) == 0)
			return n;
	return NULL;
}

struct node *node_child_get(struct node_table *t, struct node *parent,
			    const char *name)
{
	struct node *n = node_child(t, parent, name);
	if (n)
		return n;
	n = node_new(t, name);
	if (!n)
		return NULL;
	link_sibling(parent, n);
	name_hash(t, n);
	return n;
}

void node_detach(struct node_table *t, struct node *n)
{
	if (!n->parent)
		return;
	name_unhash(t, n);
	unlink_sibling(n);
	n->parent = NULL;
	/* Children of a removed directory are gone with it. */
	while (n->children) {
		node_detach(t, n->children);
	}
	node_release_if_unused(t, n);
}

int node_move(struct node_table *t, struct node *n, struct node *new_parent,
	      const char *new_name)
{
	char *name = strdup(new_name);
	if (!name)
		return -ENOMEM;
	struct node *old = node_child(t, new_parent, new_name);
	if (old && old != n)
		node_detach(t, old);
	name_unhash(t, n);
	unlink_sibling(n);
	free(n->name);
	n->name = name;
	link_sibling(new_parent, n);
	name_hash(t, n);
	return 0;
}

/* What a node made again from the sandbox's stat would lose, so the node
 * is neither released nor evicted while it holds it:
 * - the link count of a directory the mount's own mkdir, rmdir or rename
 *   changed, or of a file the mount's own link gave other names, where
 *   the stat counts none (it would start from 2, a file from 1);
 * - the times of a directory whose entries the mount changed within the
 *   last ENTRY_TIMES_KEPT_S seconds: the daemon's clock, which the
 *   sandbox's stat of the same moment (docker's whole seconds) would put
 *   back. */
#define ENTRY_TIMES_KEPT_S 2

static bool knows_more_than_a_stat(const struct node *n)
{
	if (!S_ISDIR(n->st.st_mode))
		return n->nlink_untold && n->st.st_nlink > 1;
	if (n->links_counted)
		return true;
	if (n->entries_changed_at.tv_sec == 0)
		return false;
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	return now.tv_sec - n->entries_changed_at.tv_sec <= ENTRY_TIMES_KEPT_S;
}

bool node_release_if_unused(struct node_table *t, struct node *n)
{
	if (n == t->root || n->nlookup > 0 || n->file || n->open_dirs > 0 ||
	    n->children)
		return false;
	/* A node still in the tree is kept while it caches attributes, is
	 * an alias, or knows more than a stat would tell. */
	if (n->parent && (n->attr_set || n->alias_of || knows_more_than_a_stat(n)))
		return false;
	name_unhash(t, n);
	struct node *parent = n->parent;
	unlink_sibling(n);
	node_free(t, n);
	/* The parent's listing no longer has a node for every child it
	 * named, so a name without one is no longer known to be absent. */
	if (parent)
		parent->list_set = false;
	if (parent && !parent->attr_set)
		node_release_if_unused(t, parent);
	return true;
}

struct node *node_shown(struct node_table *t, struct node *c)
{
	struct node *n = c && c->alias_of ? node_by_ino(t, c->alias_of) : NULL;
	return n && n->alias == c->ino ? n : c;
}

struct node *node_alias(struct node_table *t, const struct node *n)
{
	struct node *s = n && n->alias ? node_by_ino(t, n->alias) : NULL;
	return s && s->alias_of == n->ino ? s : NULL;
}

char *node_path(const struct node *n)
{
	if (!n->parent) {
		if (n->ino == NODE_ROOT_INO)
			return strdup("/");
		return NULL;
	}
	size_t len = 0;
	const struct node *p;
	for (p = n; p->parent; p = p->parent)
		len += strlen(p->name) + 1;
	if (p->ino != NODE_ROOT_INO)
		return NULL; /* below a detached directory */
	char *path = malloc(len + 1);
	if (!path)
		return NULL;
	path[len] = '\0';
	for (p = n; p->parent; p = p->parent) {
		size_t l = strlen(p->name);
		len -= l;
		memcpy(path + len, p->name, l);
		path[--len] = '/';
	}
	return path;
}

static bool before(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec < b->tv_sec ||
	       (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

bool node_attr_fresh(const struct node_table *t, const struct node *n,
		     const struct timespec *now)
{
	return n->attr_set && n->attr_gen == t->gen &&
	       before(now, &n->attr_expires);
}

static const struct timespec *later(const struct timespec *a,
				    const struct timespec *b)
{
	return before(a, b) ? b : a;
}

void node_set_attr(struct node_table *t, struct node *n, const struct stat *st,
		   const char *link_target, const struct timespec *expires)
{
	/* st may be our own view again (fs_node_stat after an upload): that
	 * says nothing new of the sandbox's inode; nor does a listing that
	 * gives no inode numbers (0) */
	if (st->st_ino != n->ino && st->st_ino != 0) {
		n->guest_ino = st->st_ino;
		n->guest_dev = st->st_dev;
	}
	/* what the node last knew, expired or not, of a node of that type */
	nlink_t known = (n->st.st_mode & S_IFMT) == (st->st_mode & S_IFMT) ? n->st.st_nlink : 0;
	uid_t uid = n->owner_told ? n->st.st_uid : t->untold_uid;
	gid_t gid = n->owner_told ? n->st.st_gid : t->untold_gid;
	n->st = *st;
	/* A call that cannot tell the owner (SB_ID_UNTOLD: docker's archive
	 * stat, a listing that names it without a number) leaves the one a
	 * call or the mount's chown told. */
	if (st->st_uid == SB_ID_UNTOLD)
		n->st.st_uid = uid;
	if (st->st_gid == SB_ID_UNTOLD)
		n->st.st_gid = gid;
	if (st->st_uid != SB_ID_UNTOLD && st->st_gid != SB_ID_UNTOLD) {
		n->owner_told = true;
		n->owner_stale = false;
	}
	n->st.st_ino = n->ino;
	/* A stat that cannot count links (nlink 0: a directory's
	 * subdirectories, a file's names) leaves the count the mount's own
	 * mkdir, rmdir, rename, link and unlink kept. */
	n->nlink_untold = st->st_nlink == 0;
	if (n->nlink_untold)
		n->st.st_nlink = known ? known : S_ISDIR(st->st_mode) ? 2 : 1;
	/* The sandbox may not have seen the mount's last change here yet (a
	 * create uploaded at close, a queued remove). */
	if (S_ISDIR(st->st_mode)) {
		n->st.st_mtim = *later(&n->st.st_mtim, &n->entries_changed_at);
		n->st.st_ctim = *later(&n->st.st_ctim, &n->entries_changed_at);
	}
	if (link_target != n->link_target) {
		free(n->link_target);
		n->link_target = link_target ? strdup(link_target) : NULL;
	}
	n->attr_gen = t->gen;
	n->attr_expires = *expires;
	n->attr_set = true;
	n->attr_made_here = false;
}

void node_forget_attr(struct node *n)
{
	n->attr_set = false;
	n->list_set = false;
}

void node_entries_changed(struct node *d)
{
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	d->entry_changes++;
	d->entries_changed_at = now;
	d->st.st_mtim = d->st.st_ctim = now;
}

void node_subdirs_changed(struct node *d, int delta)
{
	/* A count below 2 means the sandbox's file system does not count
	 * subdirectories (btrfs shows 1): nothing to keep up to date. */
	if (d->st.st_nlink < 2 || (delta < 0 && d->st.st_nlink == 2))
		return;
	d->st.st_nlink += delta;
	d->links_counted = true;
}

bool node_list_fresh(const struct node_table *t, const struct node *n,
		     const struct timespec *now)
{
	return n->list_set && n->list_gen == t->gen &&
	       before(now, &n->list_expires);
}

void node_walk(struct node *n, void (*fn)(struct node *, void *), void *arg)
{
	struct node *c = n->children;
	while (c) {
		struct node *next = c->next_sibling;
		node_walk(c, fn, arg);
		c = next;
	}
	fn(n, arg);
}

bool node_evictable(const struct node_table *t, const struct node *n)
{
	/* an open directory's handle names its children by inode, and
	 * readdirplus hands those to the kernel: they stay while it is open */
	return n != t->root && n->parent && n->parent->open_dirs == 0 &&
	       n->nlookup == 0 && !n->file && n->open_dirs == 0 && !n->children &&
	       !n->alias_of && /* the kernel may hold its name with another node */
	       !knows_more_than_a_stat(n);
}

static bool over_bound(const struct node_table *t)
{
	return t->max_nodes && t->count > t->max_nodes;
}

static void evict(struct node_table *t, struct node *n)
{
	/* the parent's listing no longer has a node for every child, so it
	 * can no longer answer "absent" */
	n->parent->list_set = false;
	name_unhash(t, n);
	unlink_sibling(n);
	node_free(t, n);
	t->evicted++;
}

struct evict_ctx {
	struct node_table *t;
	size_t target;
	size_t evicted;
};

static void evict_if_possible(struct node *n, void *arg)
{
	struct evict_ctx *c = arg;
	if (c->t->count > c->target && node_evictable(c->t, n)) {
		evict(c->t, n);
		c->evicted++;
	}
}

size_t node_table_evict(struct node_table *t, size_t target)
{
	struct evict_ctx c = {.t = t, .target = target};
	/* post-order: a directory is tried after its children went */
	node_walk(t->root, evict_if_possible, &c);
	return c.evicted;
}

void node_forgotten(struct node_table *t, struct node *n)
{
	if (!node_release_if_unused(t, n)) {
		while (n && over_bound(t) && node_evictable(t, n)) {
			struct node *parent = n->parent;
			evict(t, n);
			n = parent;
		}
	}
	if (!over_bound(t) || t->count < t->sweep_at)
		return;
	/* Listings add nodes the kernel never looked up, which no forget
	 * reaches: sweep down to three quarters of the bound, and not again
	 * until the table has grown by a quarter of it (a table of nodes the
	 * kernel holds is not rescanned at every forget). */
	node_table_evict(t, t->max_nodes - t->max_nodes / 4);
	t->sweep_at = t->count + t->max_nodes / 4;
}
