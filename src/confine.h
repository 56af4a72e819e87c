/* SPDX-License-Identifier: Apache-2.0
 * confine.h - the seccomp filters airlock puts on its own processes:
 * the key holder, the proxy workers, the ledger, the token mint and the
 * supervisor itself.
 */
#ifndef AIRLOCK_CONFINE_H
#define AIRLOCK_CONFINE_H

#include <stdbool.h>
#include <stddef.h>

enum confine_profile {
	/* The key holder: its channels, its stream, nothing else. */
	CONFINE_KEEPER = 0,
	/* A proxy worker: the keeper's calls plus TCP/UDP over IPv4 and
	 * IPv6 (connect, accept, splice), and no more. */
	CONFINE_WORKER,
	/* The ledger process (spendd.c): the keeper's calls plus what SQLite
	 * and libpq need: files opened for writing (where Landlock lets it,
	 * the ledger's directory), unix and TCP/UDP sockets, connect; no
	 * accept, listen, bind, splice. */
	CONFINE_LEDGER,
	/* The supervisor once the session runs (confine_supervisor()): the
	 * keeper's calls plus waiting for and signalling its children, the
	 * policy's memfd for a reload, and a TCP/UDP client over IP (the
	 * GitLab token's mint and revocation, the OAuth refresh); no fork,
	 * clone or exec, no ptrace, no
	 * new namespace, no mount, no file opened for writing. */
	CONFINE_SUPERVISOR,
	/* The live feed (feed.c): the keeper's calls, but no file opened at
	 * all, plus TCP and UDP clients over IP (the collector, the witness:
	 * socket, connect, socket options) and threads of its own (clone
	 * with CLONE_THREAD only; clone3 fails with ENOSYS, so libc falls
	 * back to clone); no accept, listen, bind, exec or fork. */
	CONFINE_FEED,
	/* The GitHub App token's mint process (mintd.c): the keeper's calls
	 * plus a TCP/UDP client over IP (socket, connect, socket options);
	 * no accept, listen, bind, splice, pipes, exec or fork. */
	CONFINE_MINT,
	CONFINE_PROFILE_COUNT
};

const char *confine_profile_to_string(enum confine_profile p);

/* Confines the calling process, which must have no other threads, for
 * good: drops every capability, sets no_new_privs, limits with Landlock
 * (where the kernel has it) what can be opened to reading the @nread
 * paths of @read_paths (a file, or a directory and everything below it;
 * paths that do not exist are skipped), and loads the seccomp filter of
 * @p. Every system call the profile does not list fails with EPERM (so a
 * library's unexpected call is an error it reports, not a crash); a call
 * from another architecture's ABI kills the process. Read-only opens of
 * the listed paths still work, so what a library reads lazily (resolv.conf
 * on a reload, OpenSSL's configuration) still loads. Returns 0, or -1
 * with a reason in @err. */
int confine_self(enum confine_profile p, const char *const *read_paths,
		 size_t nread, char *err, size_t errlen);

/* confine_self() with, besides the @nread read-only paths, @nrw paths
 * (directories) below which files may also be created, written,
 * truncated and removed. */
int confine_self_rw(enum confine_profile p, const char *const *read_paths,
		    size_t nread, const char *const *rw_paths, size_t nrw,
		    char *err, size_t errlen);

/* Confines the supervisor once the session's processes are started: sets
 * no_new_privs and loads the CONFINE_SUPERVISOR filter. Its capabilities
 * stay (it signals the sandbox's init, in another user namespace) and
 * there is no Landlock (it reads a reloaded policy, the events file for
 * the summary, the trust store for the GitLab mint and the OAuth
 * refresh: what it opens is the
 * caller's to choose). Returns 0, or -1 with a reason in @err. */
int confine_supervisor(char *err, size_t errlen);

/* The files a TLS client with a resolver still reads once confined
 * (resolv.conf, the hosts and nsswitch files, OpenSSL's configuration and
 * trust store), into @out (room for CONFINE_CLIENT_READS_MAX): the fixed
 * ones, the directory where resolv.conf really lives when it is a link
 * out of /etc (resolvers rewrite it there), and the trust store's file
 * and directories as OpenSSL will look for them (SSL_CERT_FILE and
 * SSL_CERT_DIR included, resolved); those it resolved are also in @own
 * (room for CONFINE_CLIENT_OWNED_MAX), *@nown of them, to be freed after
 * confine_self(). Returns how many in @out. */
#define CONFINE_TRUST_DIRS_MAX 4
#define CONFINE_CLIENT_OWNED_MAX (2 + CONFINE_TRUST_DIRS_MAX)
#define CONFINE_CLIENT_READS_MAX (12 + CONFINE_CLIENT_OWNED_MAX)
size_t confine_client_reads(const char **out, char **own, size_t *nown);

/* child_spec.keep_env of such a client: what OpenSSL reads for the trust
 * store and its configuration, what c-ares reads, and the tests'
 * timeouts. */
bool confine_client_env(const char *entry);

/* Drops every capability of the calling process (effective, permitted,
 * inheritable). Returns 0, or -1 with errno. */
int confine_drop_capabilities(void);

/* Closes every descriptor of the calling process but the @n of @keep
 * (entries < 0 are ignored). For a process just forked from the
 * supervisor: it keeps what its job needs and nothing the supervisor
 * happened to hold. */
void confine_close_fds(const int *keep, size_t n);

/* Wipes the bytes of every environment string (they may hold secret
 * values the supervisor was given) and empties the environment. */
void confine_wipe_environment(void);

#endif /* AIRLOCK_CONFINE_H */
