/* SPDX-License-Identifier: Apache-2.0
 * child.h - what every process airlock forks does first, and its last
 * words.
 */
#ifndef AIRLOCK_CHILD_H
#define AIRLOCK_CHILD_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* A child's start (child_start()). */
struct child_spec {
	const char *name;       /* PR_SET_NAME: what ps and the tests see */
	const char *who;        /* its name in a warning ("key holder") */
	pid_t parent;           /* the supervisor, as the child's parent */
	int ctl;                /* its channel to the supervisor (last words), or -1 */
	const int *keep;        /* every descriptor it keeps (0-2 included
				   when kept); entries < 0 are ignored */
	size_t nkeep;
	bool null_stdio;        /* descriptors 0 and 1 become /dev/null */
	bool ignore_session_signals; /* SIGINT, SIGTERM, SIGHUP, SIGQUIT,
					SIGUSR1/2 ignored: the terminal
					signals the whole group, and the
					session ends through the supervisor */
	bool outlives_parent;   /* no SIGKILL when the supervisor dies: it
				   ends when its channel closes */
	/* The environment variables it keeps (NULL: none); every other
	 * string's bytes are wiped. */
	bool (*keep_env)(const char *entry);
};

/* What every child of the supervisor runs first, before it reads anything
 * or loads anything: not dumpable (no core, no ptrace, /proc/PID/mem
 * closed to the caller's other processes), SIGKILL when the supervisor
 * dies (and an exit if it died before that was set), its name, every
 * descriptor closed but @keep, the environment wiped but for what
 * @keep_env keeps, SIGPIPE ignored. A failure is the child's last words
 * (child_fatal()). */
void child_start(const struct child_spec *s);

/* The child's last words: @fmt as a MSG_FATAL on its channel to the
 * supervisor (or, when that cannot be sent, a warning naming it), then
 * exit 125. Before child_start(), the words go to stderr. */
__attribute__((noreturn, format(printf, 1, 2))) void child_fatal(const char *fmt, ...);

/* The channel child_fatal() speaks on, from now on (a child whose channel
 * is made after its start). */
void child_set_channel(int ctl);

/* @fn(@arg) runs once when child_fatal() is called, before the last
 * words: a worker sends the receipts it still holds. It must not call
 * child_fatal() itself (if it does, it is not run again). */
void child_on_fatal(void (*fn)(void *arg), void *arg);

/* The supervisor's side: reads what waits on @ctl (the supervisor's end of
 * a child's channel, the child reaped) and keeps the reason of a MSG_FATAL
 * in @fatal (@len bytes), unchanged when there is none. */
void child_read_last_words(int ctl, char *fatal, size_t len);

/* "killed by signal N", "exited with status N", or @fatal when the child
 * left last words. */
void child_describe_exit(int wstatus, const char *fatal, char *out, size_t len);

#endif /* AIRLOCK_CHILD_H */
