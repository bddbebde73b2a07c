/* Symlink containment: what the mount shows for a symlink the sandbox made.
 *
 * The sandbox is untrusted, and the host kernel resolves whatever readlink
 * answers on the host, not in the sandbox: a link to /home/me/.ssh/id_rsa or
 * to ../../../etc would let a host process (cp, tar, an editor, a build)
 * read or write host files through the mount. So the answer to readlink is
 * always one that, followed by the host kernel from the link's directory,
 * stays inside the mount. The rule, applied to the target T of the link at
 * mount-relative path P whose directory is D levels below the mount root:
 *
 *  1. Relative T: shown as it is (byte for byte, so git, cp -a and tar
 *     copy it faithfully) when its ".." components all come first and
 *     number at most D, and no ".." follows a named component ("." and
 *     empty components are ignored). Otherwise EPERM. Leading ".."s climb
 *     real parent directories of the link, which are inside the mount; a
 *     named component may itself be a symlink (contained by this same
 *     rule), so a ".." after one could climb from wherever that link led,
 *     which is why it is refused rather than normalised.
 *  2. Absolute T naming the workdir or a path below it (no "." or ".."
 *     tricks: any ".." component refuses it): rewritten to the relative
 *     path from D to that place, so a link written in the sandbox as
 *     /workspace/lib/x works from the host too.
 *  3. Any other absolute T (/etc/passwd, /usr/bin/python3): EPERM. There
 *     is no place inside the mount it could honestly point to.
 *  4. Empty, or PATH_MAX bytes or more: EPERM / ENAMETOOLONG.
 *
 * A refused link still lists and lstats as a symlink; only readlink and
 * following it fail, with "Operation not permitted" (sshfs's
 * contain_symlinks answers the same way). The view is computed at every
 * readlink from the link's current place, so a link moved on the mount is
 * judged where it now is. The kernel must therefore never cache symlink
 * bodies across a rename (FUSE_CAP_CACHE_SYMLINKS stays off).
 *
 * symlink() from the host writes the target exactly as given; reading it
 * back goes through the same rule as any other link. */
#ifndef SBFS_SYMLINK_POLICY_H
#define SBFS_SYMLINK_POLICY_H

/* workdir: the guest directory the mount root shows (absolute);
 * link_relpath: the link's mount-relative path ("/a/l"); target: the raw
 * target from the sandbox. Returns 0 with *shown malloc'd, or -EPERM,
 * -ENAMETOOLONG, -ENOMEM. */
int symlink_policy_view(const char *workdir, const char *link_relpath,
			const char *target, char **shown);

/* Logs a refused link (a few times per process, then once more to say
 * further ones are not logged). */
void symlink_policy_log_refusal(const char *link_relpath, const char *target,
				int err);

#endif
