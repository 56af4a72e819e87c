/* SPDX-License-Identifier: Apache-2.0
 * dnsd.h - transparent mode's DNS stub as a process of its own: the only
 * reader of the sandbox's DNS datagrams, and the writer of the table of
 * synthetic addresses (dnsstub.h), confined like a proxy worker.
 */
#ifndef AIRLOCK_DNSD_H
#define AIRLOCK_DNSD_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "dnsstub.h"
#include "policy.h"

#define DNSD_PROC_NAME "airlock-dns"

/* The longest reason the stub sends (its reasons are static lines). */
#define DNSD_REASON_MAX 512

struct dnsd {
	pid_t pid;          /* -1: not running (never started, or reaped) */
	int ctl;            /* the supervisor's end of its channel, or -1 */
	int wstatus;        /* once reaped */
	bool stopping;      /* dnsd_stop() was called */
	char fatal[256];    /* its last words (MSG_FATAL), or "" */
};

/* A name the stub refused (or, in shadow mode, would have): what the
 * supervisor records as dns.block. */
struct dnsd_block {
	bool would_block;
	const char *rule;
	const char *host;
	unsigned int qtype;
	enum dnsstub_outcome outcome;
	const char *reason;
};

/* Forks the stub's process: it runs child_start(), calls @forget(@arg)
 * (which wipes the secret values its copy of the caller's memory holds),
 * answers for @p with addresses from @table (the writer's mapping,
 * inherited) on the UDP socket @stub_fd, confines itself (the workers'
 * seccomp filter, Landlock with nothing to read, no capabilities) and
 * serves until its channel closes. The caller keeps @stub_fd and @table;
 * it should close and free them once every reader is forked. Returns 0,
 * or -1 with @err. */
int dnsd_start(struct dnsd *d, const struct policy *p, struct dnsstub_table *table,
	       int stub_fd, void (*forget)(void *), void *arg, char *err,
	       size_t errlen);

/* Reads the messages waiting on the stub's channel, calling @on_block for
 * each refusal. Returns false when the channel is closed or sent anything
 * else than checked dns-block messages (the caller then stops reading it:
 * the stub is ending, and its end is seen when it is reaped). */
bool dnsd_read(struct dnsd *d, void (*on_block)(void *arg, const struct dnsd_block *b),
	       void *arg);

/* Tells the stub to end (closes its channel); it exits at once. */
void dnsd_stop(struct dnsd *d);

void dnsd_reaped(struct dnsd *d, int wstatus);
void dnsd_describe_exit(const struct dnsd *d, char *out, size_t len);

#endif /* AIRLOCK_DNSD_H */
