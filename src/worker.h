/* SPDX-License-Identifier: Apache-2.0
 * worker.h - proxy workers: processes that each run one event loop of the
 * egress proxy, confined, holding no key; and the supervisor's handle on
 * them.
 */
#ifndef AIRLOCK_WORKER_H
#define AIRLOCK_WORKER_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <time.h>

#include "policy.h"
#include "proxy.h"
#include "session.h"

struct filter_def;
struct filter_source;

/* The most workers `--workers` accepts. */
#define WORKER_MAX 256

/* The name a worker gives itself (PR_SET_NAME): what ps and the tests
 * find it by. */
#define WORKER_PROC_NAME "airlock-proxy"

struct worker_config {
	int listen_fd;               /* shared by every worker; each owns a copy */
	const struct policy *policy; /* the policy at start */
	unsigned int max_conns;      /* 0: the proxy's default */
	unsigned int client_limit;   /* per client address; 0: a quarter of
					the connection limit,
					PROXY_CLIENT_LIMIT_NONE: none */
	/* Transparent mode: the transparent listeners (shared like
	 * listen_fd; at most 2) and the stub's table of synthetic
	 * addresses, the writer's, which each worker turns into a
	 * read-only view of its own first thing. 0 / NULL: none. */
	const int *tlisten_fds;
	size_t ntlisten;
	struct dnsstub_table *names;
	bool intercept;              /* the key holder has a session CA:
					terminate TLS for the hosts the
					policy intercepts (intercept.h) */
	/* What each filter of filter_table is configured from: each
	 * worker gets, before anything else, one MSG_FILTER_CONFIG per
	 * filter made from it (filter.h), never these fields themselves. */
	const struct filter_source *filters;
	/* Called first thing in each worker (a copy of the supervisor's
	 * memory): wipes what the workers must not hold (oauth.h: the
	 * refresh tokens and client secrets), or NULL. */
	void (*forget)(void *arg);
	void *forget_arg;
};

struct worker {
	pid_t pid;                   /* -1 once reaped */
	int ctl;                     /* the supervisor's end of its channel */
	bool ready;                  /* it is confined and waits for go */
	bool go;                     /* it was told to serve */
	bool killed;                 /* stopped before go: killed, never served */
	int wstatus;                 /* once reaped */
	char fatal[256];             /* its last words (MSG_FATAL), or "" */
	bool exhausted;              /* it refused a call for the spend cap
					under on_exhausted "stop"
					(MSG_SPEND_EXHAUSTED) */
};

struct worker_pool {
	struct worker *w;
	unsigned int n;
	unsigned int alive;          /* not yet reaped */
	struct proxy_shared *shared; /* the workers' connection counts */
	bool stopping;               /* worker_pool_stop() was called */
	/* a worker saw a 401 to an OAuth token (oauth.h), or NULL */
	void (*oauth401)(void *arg, const char *secret, const void *value, size_t len);
	void *oauth_arg;
};

/* The default number of workers: the online CPUs, at least 1. */
unsigned int worker_default_count(void);

/* `--workers N` of command @cmd: 1 to WORKER_MAX, else exits 125 with one
 * line saying so. */
unsigned int worker_parse_count(const char *cmd, const char *text);

/* Forks @n workers, each with its own channel to the key holder of @s
 * (when @s has a stream) and one to us. Each builds its proxy, confines
 * itself, says it is ready (worker_pool_read() sees it) and serves only
 * once told to (worker_pool_go()): so a worker that was never told can be
 * killed at the end without losing anything it saw. Call with the
 * session's signals blocked. Returns 0, or -1 with a reason in @err
 * (workers already started are killed and reaped). */
int worker_pool_start(struct worker_pool *wp, unsigned int n,
		      const struct worker_config *cfg, struct session *s,
		      char *err, size_t errlen);

/* Tells every ready worker not yet told to serve. Returns 0 or -errno. */
int worker_pool_go(struct worker_pool *wp);

/* Reads what worker @i said (ready, or its last words) without blocking.
 * Returns false when its channel has closed. */
bool worker_pool_read(struct worker_pool *wp, unsigned int i);

/* Sends @p (its canonical text, in a sealed memfd) to every worker, which
 * parses it, checks its digest and puts it in force for new requests. A
 * worker that cannot stops with its reason (the caller sees it exit).
 * Returns 0 or -1 with a reason in @err. */
int worker_pool_reload(struct worker_pool *wp, const struct policy *p, char *err,
		       size_t errlen);

/* Sends every worker filter @d's configuration again, made from @src
 * (the git filter's on a refresh of its token). Returns 0, or -1 when a
 * worker could not be told. */
int worker_pool_configure(struct worker_pool *wp, const struct filter_def *d,
			  const struct filter_source *src);

/* Sends every worker a value of secret @secret (MSG_CAPTURE: an OAuth
 * token, valid until @expires_at, behind placeholder @ph). Returns 0 or
 * -errno. */
int worker_pool_value(struct worker_pool *wp, const char *secret, time_t expires_at,
		      const char *ph, size_t phlen, const char *value, size_t len);

/* Tells every serving worker to stop accepting and to exit once its
 * connections are done, or after @drain_ms; kills those never told to
 * serve (they have seen nothing). */
void worker_pool_stop(struct worker_pool *wp, unsigned int drain_ms);

/* The worker with pid @pid, or NULL. */
struct worker *worker_pool_find(struct worker_pool *wp, pid_t pid);

/* The caller reaped worker @w with @wstatus. */
void worker_pool_reaped(struct worker_pool *wp, struct worker *w, int wstatus);

/* Did @w end as asked (exit 0 after worker_pool_stop())? */
bool worker_exited_cleanly(const struct worker_pool *wp, const struct worker *w);

/* One line saying how @w ended (its last words, its signal or status). */
void worker_describe_exit(const struct worker *w, char *out, size_t len);

/* Kills and reaps every worker still running, closes the channels and
 * frees @wp. */
void worker_pool_release(struct worker_pool *wp);

#endif /* AIRLOCK_WORKER_H */
