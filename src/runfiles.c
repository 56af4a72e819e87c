/* SPDX-License-Identifier: Apache-2.0
 * runfiles.c - see runfiles.h.
 *
 * DOC: Theory of Operation
 *
 * A session is decided by its policy and recorded by its events file and
 * signing key; secret, CA and key files feed it. The agent may write its
 * workspace and the fs.rw paths, and whatever it leaves there is what the
 * next session starts from: a policy it rewrote (mode off), a key it
 * replaced, receipts it truncated. So in shadow and enforce mode none of
 * these files may lie in a writable path, and the session is refused when
 * one does.
 *
 * What is compared is where a file really is, not how it was named: every
 * existing component is resolved (symbolic links included), a dangling
 * link is followed to where open(O_CREAT) would create the file, and only
 * the components that do not exist yet are taken as spelled (the default
 * events file, before its first session). A descriptor (--events -,
 * fd:N) is judged by the file it has open.
 *
 * Hard links: a regular file with more than one link has other names, and
 * one of them could be inside a writable path, where the agent writes the
 * file through it. Finding the other names would mean walking the
 * writable trees; instead such a file is refused when it is on the
 * filesystem (st_dev) of a writable path, the only place another name
 * inside could be. A file on another filesystem, or with one link, is
 * judged by its path alone. (A filesystem mounted below a writable path is
 * not looked for: a link there is not detected.)
 *
 * The check runs before the agent does, and the files it passes lie
 * outside everything the agent can write, so the agent cannot change them
 * between the check and their use. Only the caller's own processes could.
 *
 * Should: refuse a file in the workspace or an fs.rw path, also through a
 * symbolic link, a dangling link, a relative path or a descriptor. Mustn't:
 * refuse a file outside them because of how it was spelled.
 */
#include "runfiles.h"

#include <errno.h>
#include <limits.h>
#include <openssl/evp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

/* Links followed while resolving one path, as the kernel allows (40). */
#define RESOLVE_MAX_LINKS 40

/* @dir joined with @name into a new string, or NULL with ENAMETOOLONG. */
static char *join(const char *dir, const char *name)
{
	char *out;

	out = util_xasprintf("%s%s%s", dir, strcmp(dir, "/") == 0 ? "" : "/", name);
	if (strlen(out) >= PATH_MAX) {
		free(out);
		errno = ENAMETOOLONG;
		return NULL;
	}
	return out;
}

static char *resolve(const char *path, int *links)
{
	char *r, *copy = NULL, *slash, *parent = NULL, *target = NULL, *out = NULL;
	const char *dir, *base;
	char buf[PATH_MAX];
	struct stat st;
	ssize_t n;

	r = realpath(path, NULL);
	if (r || errno != ENOENT)
		return r;
	copy = util_xstrdup(path);
	/* Trailing slashes name the same file. */
	for (n = (ssize_t)strlen(copy); n > 1 && copy[n - 1] == '/'; n--)
		copy[n - 1] = '\0';
	slash = strrchr(copy, '/');
	if (!slash) {
		dir = ".";
		base = copy;
	} else {
		*slash = '\0';
		dir = slash == copy ? "/" : copy;
		base = slash + 1;
	}
	if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) {
		/* A dangling link: open(O_CREAT) would create its target. */
		if (++*links > RESOLVE_MAX_LINKS) {
			errno = ELOOP;
			goto out;
		}
		n = readlink(path, buf, sizeof(buf) - 1);
		if (n < 0)
			goto out;
		buf[n] = '\0';
		if (buf[0] == '/') {
			target = util_xstrdup(buf);
		} else {
			target = join(dir, buf);
			if (!target)
				goto out;
		}
		out = resolve(target, links);
		goto out;
	}
	if (errno != ENOENT)
		goto out;
	if (strcmp(base, ".") == 0 || strcmp(base, "..") == 0 || base[0] == '\0') {
		/* "missing/.." would be taken lexically, unlike the kernel. */
		errno = EINVAL;
		goto out;
	}
	parent = resolve(dir, links);
	if (parent)
		out = join(parent, base);
out:
	free(copy);
	free(parent);
	free(target);
	return out;
}

char *runfiles_resolve(const char *path)
{
	int links = 0;

	if (!path || !*path) {
		errno = ENOENT;
		return NULL;
	}
	return resolve(path, &links);
}

bool runfiles_under(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	if (strcmp(dir, "/") == 0)
		return path[0] == '/';
	return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* The path of the file open at @fd, or NULL when it has none (deleted, or
 * not a file of a filesystem). The caller frees it. */
static char *fd_path(int fd)
{
	char link[64], buf[PATH_MAX];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, buf, sizeof(buf) - 1);
	if (n <= 0)
		return NULL;
	buf[n] = '\0';
	if (buf[0] != '/' || (n > 10 && strcmp(buf + n - 10, " (deleted)") == 0))
		return NULL;
	return util_xstrdup(buf);
}

static void name_file(const struct runfiles_entry *e, const char *real, char *out,
		      size_t len)
{
	if (!e->path)
		snprintf(out, len, "%s (%s)", e->what, real ? real : "an open file");
	else if (real && strcmp(real, e->path) != 0)
		snprintf(out, len, "%s %s (%s)", e->what, e->path, real);
	else
		snprintf(out, len, "%s %s", e->what, e->path);
}

bool runfiles_check(const struct runfiles_entry *e, const char *const *writable,
		    size_t nwritable, char *err, size_t errlen)
{
	char *real = NULL, name[PATH_MAX + 128];
	bool ok = false, have_st = false;
	struct stat st;
	size_t i;

	if (e->path) {
		real = runfiles_resolve(e->path);
		if (!real) {
			snprintf(err, errlen, "%s %s: cannot tell where it is: %s", e->what,
				 e->path, strerror(errno));
			goto out;
		}
		have_st = stat(real, &st) == 0;
	} else {
		/* A descriptor that is not open fails where it is used. */
		if (fstat(e->fd, &st) < 0 || !S_ISREG(st.st_mode)) {
			ok = true;
			goto out;
		}
		have_st = true;
		real = fd_path(e->fd);
	}
	name_file(e, real, name, sizeof(name));
	for (i = 0; real && i < nwritable; i++) {
		if (!runfiles_under(real, writable[i]))
			continue;
		snprintf(err, errlen,
			 "%s is in %s%s, which the agent can write: move it out (the "
			 "agent could replace it for the next session)",
			 name, i == 0 ? "the workspace " : "the fs.rw path ", writable[i]);
		goto out;
	}
	if (have_st && S_ISREG(st.st_mode) && st.st_nlink > 1) {
		for (i = 0; i < nwritable; i++) {
			struct stat ws;

			if (stat(writable[i], &ws) < 0 || ws.st_dev != st.st_dev)
				continue;
			snprintf(err, errlen,
				 "%s has %lu hard links, on the filesystem of %s%s, which "
				 "the agent can write: another of its names could be there; "
				 "give airlock a copy of its own (cp)",
				 name, (unsigned long)st.st_nlink,
				 i == 0 ? "the workspace " : "the fs.rw path ", writable[i]);
			goto out;
		}
	}
	ok = true;
out:
	free(real);
	return ok;
}

char *runfiles_default_events(const char *id, char *err, size_t errlen)
{
	const char *state = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
	char *out;

	/* XDG: a relative XDG_STATE_HOME is invalid and ignored. */
	if (state && state[0] == '/') {
		out = util_xasprintf("%s/airlock/%s.jsonl", state, id);
	} else {
		if (!home || home[0] != '/') {
			const struct passwd *pw = getpwuid(getuid());

			home = pw && pw->pw_dir && pw->pw_dir[0] == '/' ? pw->pw_dir : NULL;
		}
		if (!home) {
			snprintf(err, errlen, "no --events given, and neither XDG_STATE_HOME "
				 "nor HOME says where the receipts should go: pass --events");
			return NULL;
		}
		out = util_xasprintf("%s/.local/state/airlock/%s.jsonl", home, id);
	}
	if (strlen(out) >= PATH_MAX) {
		snprintf(err, errlen, "the default events path is too long: pass --events");
		free(out);
		return NULL;
	}
	return out;
}

int runfiles_make_parents(const char *file, char *err, size_t errlen)
{
	char buf[PATH_MAX];
	char *p, *last;

	if (!util_strlcpy(buf, file, sizeof(buf))) {
		snprintf(err, errlen, "%s: path too long", file);
		return -1;
	}
	last = strrchr(buf, '/');
	if (!last || last == buf)
		return 0;
	*last = '\0';
	for (p = buf + 1;; p++) {
		bool end = *p == '\0';

		if (!end && *p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0700) < 0 && errno != EEXIST) {
			snprintf(err, errlen, "cannot create the directory %s: %s", buf,
				 strerror(errno));
			return -1;
		}
		if (end)
			break;
		*p = '/';
	}
	return 0;
}

bool runfiles_fingerprint(const char *pubkey_b64, char out[RUNFILES_FINGERPRINT_LEN])
{
	unsigned char raw[48], md[EVP_MAX_MD_SIZE], b64[48];
	unsigned int mdlen = 0;
	size_t n;

	/* 32 bytes are 44 base64 characters, the last one padding. */
	if (strlen(pubkey_b64) != 44 || pubkey_b64[43] != '=' || pubkey_b64[42] == '=')
		return false;
	if (EVP_DecodeBlock(raw, (const unsigned char *)pubkey_b64, 44) != 33)
		return false;
	if (EVP_Digest(raw, 32, md, &mdlen, EVP_sha256(), NULL) != 1 || mdlen != 32)
		return false;
	if (EVP_EncodeBlock(b64, md, 32) != 44)
		return false;
	n = 43; /* the '=' dropped */
	memcpy(out, "SHA256:", 7);
	memcpy(out + 7, b64, n);
	out[7 + n] = '\0';
	return true;
}
