/* SPDX-License-Identifier: Apache-2.0
 * runfiles.h - the files that decide and record a session (the policy, the
 * signing key, the events file, secret, CA and key files): where they
 * really are, whether the agent could write them, the default events
 * path, and the fingerprint a caller pins a signing key by.
 */
#ifndef AIRLOCK_RUNFILES_H
#define AIRLOCK_RUNFILES_H

#include <stdbool.h>
#include <stddef.h>

/* "SHA256:" and 43 characters of unpadded base64, and the NUL. */
#define RUNFILES_FINGERPRINT_LEN (7 + 43 + 1)

/* The absolute, symlink-free form of @path (relative to the current
 * directory) whether or not it exists: every existing component is
 * resolved as realpath(3) does, a dangling symbolic link is followed to
 * where it points, and the components that do not exist yet are appended
 * as they are spelled. Returns a string the caller frees, or NULL with
 * errno set (ELOOP, ENAMETOOLONG, EINVAL for a "." or ".." after a missing
 * component, or the error of a component that cannot be looked up). */
char *runfiles_resolve(const char *path);

/* Is @path @dir itself or below it? Both absolute and resolved. */
bool runfiles_under(const char *path, const char *dir);

/* One file that must stay out of the agent's reach. */
struct runfiles_entry {
	const char *what;  /* how the caller named it: "--policy", "secrets.x.from_file" */
	const char *path;  /* as given (relative to the current directory), or NULL */
	int fd;            /* or a descriptor (--events - and fd:N); -1 when @path is used */
};

/* Checks that @e lies in none of the @nwritable directories (absolute and
 * resolved: the workspace and the fs.rw paths), and that, when it is a
 * regular file with several hard links, it is on no filesystem of theirs
 * (another name of it could be inside). A descriptor is checked by the
 * file it has open, when that is a regular file. A path that cannot be
 * resolved is refused too. Returns true, or false with one line in @err
 * that names the file and says what to do. */
bool runfiles_check(const struct runfiles_entry *e, const char *const *writable,
		    size_t nwritable, char *err, size_t errlen);

/* The default events path of session @id: $XDG_STATE_HOME/airlock/ID.jsonl
 * when XDG_STATE_HOME is an absolute path, else
 * $HOME/.local/state/airlock/ID.jsonl (HOME from the environment, else the
 * password database). Returns a string the caller frees, or NULL with a
 * reason in @err. */
char *runfiles_default_events(const char *id, char *err, size_t errlen);

/* Creates the missing directories above @file, mode 0700 (the existing
 * ones are left as they are). Returns 0, or -1 with a reason in @err. */
int runfiles_make_parents(const char *file, char *err, size_t errlen);

/* The fingerprint of a signing key given as session.start's "pubkey" (base64
 * of the 32 raw public key bytes): "SHA256:" and the unpadded base64 of the
 * SHA-256 of those 32 bytes. Returns false for a malformed @pubkey_b64. */
bool runfiles_fingerprint(const char *pubkey_b64, char out[RUNFILES_FINGERPRINT_LEN]);

#endif /* AIRLOCK_RUNFILES_H */
