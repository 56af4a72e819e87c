/* SPDX-License-Identifier: Apache-2.0
 * sandbox.h - the agent's sandbox: namespaces, filesystem
 * view, privileges, seccomp, Landlock and the proxy socket hand-off.
 */
#ifndef AIRLOCK_SANDBOX_H
#define AIRLOCK_SANDBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SANDBOX_PROXY_PORT 3128

struct sandbox_config {
	const char *workspace; /* absolute, symlink-free */
	char **rw;             /* fs.rw: writable host paths (absolute, resolved) */
	size_t nrw;
	char **ro;             /* fs.ro: host paths shown read-only, even where
				  the view hides them (absolute, resolved) */
	size_t nro;
	char **hide;           /* fs.hide: masked paths (absolute, resolved) */
	size_t nhide;
	char **protect;        /* fs.protect: read-only paths in the workspace,
				  relative to it (cleaned, no "..") */
	size_t nprotect;
	char **mask;           /* airlock's own files (policy, key, events,
				  secret files): masked after everything else */
	size_t nmask;
	const char *home;      /* the caller's $HOME, replaced by a private empty
				  one at the same path; NULL: the password
				  database's home directory */
	int stdio[3];          /* the agent's descriptors 0-2, or -1 for the
				  caller's own (a terminal or a pipe) */
	char **argv;           /* the agent command */
	char **envp;           /* its complete environment */
	uint16_t proxy_port;   /* 127.0.0.1:PORT inside the sandbox */
	bool transparent;      /* transparent mode (docs/TRANSPARENT.md):
				  init makes the transparent listener's and
				  the DNS stub's sockets, sets the redirect
				  up and names the stub in /etc/resolv.conf */
	bool pass_ns;          /* publish (publish.c): init passes out
				  descriptors of its user and network
				  namespaces, for the relay to connect to
				  the sandbox's loopback from */
	const char *ca_bundle; /* the CA bundle the agent trusts, shown
				  read-only at TLS_SYSTEM_BUNDLE; NULL: the
				  host's own */
	size_t ca_bundle_len;
	/* Called first thing in the sandbox's init (a copy of the caller's
	 * memory): wipes what the sandbox must not hold, e.g. secret values. */
	void (*scrub)(void *arg);
	void *scrub_arg;
};

struct sandbox {
	pid_t init_pid;        /* the sandbox's PID 1, a child of ours */
	int proxy_fd;          /* listening socket, in the sandbox's netns */
	int tlisten_fd[2];     /* transparent mode: the transparent listener
				  on 127.0.0.1 and [::1] (-1: none) */
	int stub_fd;           /* transparent mode: the DNS stub's UDP
				  socket on 127.0.0.53:53, or -1 */
	int ns_fd[2];          /* pass_ns: the sandbox's user and network
				  namespaces (-1: none) */
	int exec_err_fd;       /* readable: errno of a failed exec, or EOF */
	int landlock_abi;      /* Landlock ABI applied (0: none) */
};

/* Builds the sandbox and starts argv[0] in it. On success returns 0 and
 * fills @sb; the agent is running. On failure returns -1 with one line in
 * @err saying what failed; nothing is left running. Before the sandbox
 * exists, an existing repository's .git/hooks and .git/info are created
 * empty in the workspace when missing, and .git/config as an empty file,
 * so that they can be kept read-only; nothing else on the host changes.
 * The caller keeps ownership of cfg->stdio (the sandbox holds copies). */
int sandbox_start(const struct sandbox_config *cfg, struct sandbox *sb,
		  char *err, size_t errlen);

/* After the init process has been reaped with wait status @wstatus:
 * the session's exit status (see util_wait_status()), or 126/127 if the agent could not be
 * executed (read from exec_err_fd; *exec_errno receives the errno, else 0). */
int sandbox_exit_status(struct sandbox *sb, int wstatus, int *exec_errno);

/* Closes the descriptors of @sb. */
void sandbox_release(struct sandbox *sb);

#endif /* AIRLOCK_SANDBOX_H */
