/* SPDX-License-Identifier: Apache-2.0
 * proxy.h - the egress proxy (docs/PROXY.md): one epoll loop per worker,
 * a connection state table, splice() relay, an HTTP exchange with filter
 * hooks. N workers may serve one listening socket (EPOLLEXCLUSIVE), their
 * shared state (connection counts per client) in a struct proxy_shared
 * created before they are forked.
 */
#ifndef AIRLOCK_PROXY_H
#define AIRLOCK_PROXY_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/signalfd.h>

#include "policy.h"
#include "receipt.h"

/* Writes one receipt (receipt.h). */
typedef receipt_record_fn proxy_record_fn;

/* Called for every signal read from the signal fd; returns false to stop
 * the loop (see proxy_stop for draining). */
typedef bool (*proxy_signal_fn)(void *arg, const struct signalfd_siginfo *si);

struct proxy_timeouts {
	unsigned int head_ms;        /* whole request head: 10000 */
	unsigned int dns_ms;         /* 5000 */
	unsigned int connect_ms;     /* 10000 */
	unsigned int first_flight_ms;/* CONNECT's first client bytes: 10000 */
	unsigned int ambiguous_ms;   /* ports other than 80 and 443: client
					silence after a first flight that is
					neither TLS nor yet HTTP, before it is
					relayed as opaque: 1000 */
	unsigned int idle_ms;        /* tunnel / keep-alive idle: 300000 */
};

struct proxy_shared;
struct filter_reg;
struct dnsstub_table;

#define PROXY_CLIENT_LIMIT_NONE UINT32_MAX

struct proxy_opts {
	int listen_fd;               /* listening socket; the proxy owns it
					(each worker its own copy of it) */
	const struct policy *policy; /* borrowed; must stay valid until
					proxy_free(): requests decided under
					it keep using it after a reload */
	proxy_record_fn record;
	void *record_arg;
	int (*record_flush)(void *record_arg); /* NULL, or sends the records
					held so far when they are due: runs
					before each wait, and returns the
					ms until it must run again (-1:
					nothing held) */
	int signal_fd;               /* a signalfd to watch, or -1 */
	proxy_signal_fn on_signal;
	void *signal_arg;
	struct proxy_timeouts timeouts; /* zero fields take the defaults */
	unsigned int max_conns;      /* 0: 16384 (in all workers); never
					more than the descriptors allow */
	unsigned int client_limit;   /* connections one client address may
					hold; 0: a quarter of the limit;
					PROXY_CLIENT_LIMIT_NONE: no limit of
					its own (one client: a sandbox) */
	struct proxy_shared *shared; /* NULL: a private one (one worker) */
	unsigned int worker;         /* this worker's index in @shared */
	/* Transparent mode (docs/TRANSPARENT.md): listening sockets whose
	 * connections were redirected in the sandbox's namespace (owned by
	 * the proxy, like listen_fd; at most 2), and the read-only table of
	 * the stub's synthetic addresses (borrowed). 0 / NULL: none. */
	const int *tlisten_fds;
	size_t ntlisten;
	const struct dnsstub_table *names;
	const struct filter_reg *filters; /* NULL: none; see filter.h */
	size_t nfilters;             /* at most FILTER_MAX */
	const struct intercept_opts *intercept; /* TLS interception
					(intercept.h); NULL: every tunnel
					passes through */
};

/* State the workers of one proxy share: per-client connection counts and
 * the total, in MAP_SHARED memory. Create it before forking the workers
 * (after raising RLIMIT_NOFILE, which the connection limit follows) and
 * pass it to each worker's proxy_new(); @max_conns and @client_limit as
 * in struct proxy_opts (the ones given here win). Returns NULL with a
 * reason in @err. */
struct proxy_shared *proxy_shared_new(unsigned int workers,
				      unsigned int max_conns,
				      unsigned int client_limit, char *err,
				      size_t errlen);

/* Worker @worker ended: the connections it held are gone, release their
 * counts (the parent calls this after reaping it, before starting a
 * replacement). */
void proxy_shared_worker_gone(struct proxy_shared *s, unsigned int worker);

/* The limits in force: connections in all workers, and per client. */
unsigned int proxy_shared_max_conns(const struct proxy_shared *s);
unsigned int proxy_shared_client_limit(const struct proxy_shared *s);
unsigned int proxy_shared_workers(const struct proxy_shared *s);

/* A connection from @peer in @worker (proxy.c, on accept): takes a slot
 * of the connection limit and of @peer's share. ADMIT_CLIENT_FIRST:
 * refused for its share, the first time since @peer was last under it
 * (recorded, once). */
struct addr;
enum proxy_admit { ADMIT_OK, ADMIT_FULL, ADMIT_CLIENT, ADMIT_CLIENT_FIRST };
enum proxy_admit proxy_shared_acquire(struct proxy_shared *s, unsigned int worker,
				      const struct addr *peer);
/* Its connection closed (conn.c): gives the slots back. */
void proxy_shared_release(struct proxy_shared *s, unsigned int worker,
			  const struct addr *peer);

void proxy_shared_free(struct proxy_shared *s);

struct proxy;

/* Creates the proxy (epoll, resolver). Returns NULL with a reason in
 * @err. */
struct proxy *proxy_new(const struct proxy_opts *opts, char *err, size_t errlen);

/* Serves until a signal handler returns false or proxy_stop() is called,
 * then drains. Returns 0, or -errno if the loop itself failed. */
int proxy_run(struct proxy *p);

/* Stops accepting; connections in progress get @drain_ms to finish, then
 * are closed. Safe to call from the signal callback. */
void proxy_stop(struct proxy *p, unsigned int drain_ms);

/* Replaces the policy for new requests (SIGHUP). Returns 0 or -1 with a
 * reason in @err (e.g. the resolver could not be reconfigured); the old
 * policy stays in force on failure. The caller keeps ownership of both. */
int proxy_set_policy(struct proxy *p, const struct policy *policy, char *err,
		     size_t errlen);

void proxy_free(struct proxy *p);

/* A filter hook that answered FILTER_PENDING is resumed: @r is
 * FILTER_CONTINUE (go on) or FILTER_VERDICT (apply *@v, whose extra is
 * consumed). Call it from the proxy's loop (a proxy_watch() callback).
 * Returns 0, or -ESTALE when that exchange is gone (nothing happens). */
struct filter_ref;
struct verdict;
int proxy_resume(struct proxy *p, const struct filter_ref *ref, int r,
		 struct verdict *v);

/* Lets a filter watch its own descriptor in the proxy's loop: @fn runs
 * with the epoll events whenever @fd is ready (level-triggered), until
 * proxy_unwatch(). Returns 0 or -errno. */
typedef void (*proxy_watch_fn)(void *arg, int fd, uint32_t events);
int proxy_watch(struct proxy *p, int fd, uint32_t events, proxy_watch_fn fn,
		void *arg);
void proxy_unwatch(struct proxy *p, int fd);

/* Lets a filter keep time: @fn runs on every turn of the proxy's loop
 * (at least once a second) with the monotonic time in ms, and returns
 * how many ms it may wait until its next turn (-1: no wish), which
 * shortens the loop's wait. One tick per @arg (a second call with the
 * same @arg replaces it; NULL removes it), at most PROXY_TICKS_MAX. */
#define PROXY_TICKS_MAX 4
typedef int (*proxy_tick_fn)(void *arg, uint64_t now_ms);
void proxy_set_tick(struct proxy *p, proxy_tick_fn fn, void *arg);

/* The four calls above as a struct filter_loop (filter.h) on @p, for a
 * filter that must not depend on the proxy's modules. */
struct filter_loop;
void proxy_filter_loop(struct proxy *p, struct filter_loop *loop);

#endif /* AIRLOCK_PROXY_H */
